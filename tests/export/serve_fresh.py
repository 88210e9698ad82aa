"""Run in a fresh process: serve SavedModels with `tf.saved_model.load` only (no tfpack).

    python serve_fresh.py REQUESTS.json

REQUESTS.json: a list of {"saved_model", "signature", "inputs" (npz path), "outputs" (npz path)}.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    loaded = {}
    for request in requests:
        path = request["saved_model"]
        if path not in loaded:
            loaded[path] = tf.saved_model.load(path)
        inputs = dict(np.load(request["inputs"]))
        function = loaded[path].signatures[request["signature"]]
        outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
        np.savez(request["outputs"], **{k: v.numpy() for k, v in outputs.items()})
    assert not any(name.split(".")[0] == "tfpack" for name in sys.modules), "tfpack imported"


if __name__ == "__main__":
    main()
