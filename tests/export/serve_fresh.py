"""Run in a fresh process: serve SavedModels with TensorFlow's own loaders only (no tfpack).

    python serve_fresh.py REQUESTS.json

REQUESTS.json: a list of {"saved_model", "signature", "inputs" (npz path), "outputs" (npz
path), "loader"}, optionally "refused": true (a request the model must refuse: its
``InvalidArgumentError`` message is saved as the output ``error``). ``loader`` is ``"tf2"``
(`tf.saved_model.load`) or ``"saved_model_cli"``: what ``saved_model_cli run`` does
(TensorFlow's client: the TF1 session loader restores the variables, as TensorFlow Serving
does, then one ``Session.run`` fetches the signature's output tensors, fed its input
tensors, by the names its SignatureDef gives). Each loader restores a SavedModel once and
serves its every request, as TensorFlow Serving keeps a model loaded: ``saved_model_cli
run`` itself restores it again for each command (0.6 CPU s a restore of the toy models;
the command itself: test_saved_model.py's ``test_saved_model_cli_console_script``).
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# TensorFlow is imported with the garbage collector paused, then frozen, by the suite's site
# (tests/paused_imports.py).
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.saved_model import loader  # noqa: E402


def _session(path):
    """A TF1 session holding the SavedModel at ``path`` (tag ``serve``) and its MetaGraphDef,
    restored by the loader ``saved_model_cli run`` calls (`loader.load`)."""
    session = tf.compat.v1.Session(graph=tf.Graph())
    return session, loader.load(session, ["serve"], path)


def _saved_model_cli(restored, signature, inputs):
    """``saved_model_cli run``'s run (`run_saved_model_with_feed_dict`): the signature's
    outputs, by key, from one ``Session.run`` fed its inputs by tensor name."""
    session, meta_graph = restored
    signature_def = meta_graph.signature_def[signature]
    unknown = set(inputs) - set(signature_def.inputs)
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not inputs of {signature}")
    keys = sorted(signature_def.outputs)
    values = session.run([signature_def.outputs[k].name for k in keys],
                         feed_dict={signature_def.inputs[k].name: v for k, v in inputs.items()})
    return dict(zip(keys, values))


def main():
    with open(sys.argv[1]) as f:
        requests = json.load(f)
    loaded, sessions = {}, {}
    for request in requests:
        path, signature = request["saved_model"], request["signature"]
        inputs = dict(np.load(request["inputs"]))
        try:
            if request.get("loader", "tf2") == "saved_model_cli":
                if path not in sessions:
                    sessions[path] = _session(path)
                outputs = _saved_model_cli(sessions[path], signature, inputs)
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
