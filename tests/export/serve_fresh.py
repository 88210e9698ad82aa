"""Run in a fresh process: serve SavedModels with TensorFlow's own loaders only (no tfpack).

    python serve_fresh.py REQUESTS.json

REQUESTS.json: a list of {"saved_model", "signature", "inputs" (npz path), "outputs" (npz
path), "loader"}, optionally "refused": true (a request the model must refuse: its
``InvalidArgumentError`` message is saved as the output ``error``). ``loader`` is ``"tf2"``
(`tf.saved_model.load`) or ``"saved_model_cli"``:
the function behind ``saved_model_cli run`` (TensorFlow's client, which restores the
variables with the TF1 session loader, as TensorFlow Serving does); it writes one
``<output>.npy`` per output key.
"""

import gc
import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# TensorFlow imported with the cyclic garbage collector paused, then its objects frozen out
# of the collector's scans, as `tfpack.cli` does: about a million objects, none of them
# garbage, scanned over and over otherwise (`import tensorflow` here: 2.55 -> 1.6 CPU s).
gc.disable()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.tools import saved_model_cli  # noqa: E402

gc.enable()
gc.freeze()


def _saved_model_cli(path, signature, inputs):
    with tempfile.TemporaryDirectory() as outdir:
        saved_model_cli.run_saved_model_with_feed_dict(
            path, "serve", signature, inputs, outdir, True)
        return {name[:-4]: np.load(os.path.join(outdir, name)) for name in os.listdir(outdir)}


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    loaded = {}
    for request in requests:
        path, signature = request["saved_model"], request["signature"]
        inputs = dict(np.load(request["inputs"]))
        try:
            if request.get("loader", "tf2") == "saved_model_cli":
                outputs = _saved_model_cli(path, signature, inputs)
            else:
                if path not in loaded:
                    loaded[path] = tf.saved_model.load(path)
                function = loaded[path].signatures[signature]
                outputs = {k: v.numpy() for k, v in
                           function(**{k: tf.constant(v) for k, v in inputs.items()}).items()}
        except tf.errors.InvalidArgumentError as error:
            if not request.get("refused"):
                raise
            outputs = {"error": np.array(error.message)}
        np.savez(request["outputs"], **outputs)
    assert not any(name.split(".")[0] == "tfpack" for name in sys.modules), "tfpack imported"


if __name__ == "__main__":
    main()
