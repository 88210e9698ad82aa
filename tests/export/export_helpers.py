"""Helpers shared by the export tests."""

import os

import numpy as np


def unpacked(rows, max_length, max_sequences_per_pack, *, max_predictions=None, labels=None):
    """Each sequence alone in its pack (the unpacked reference), as numpy features.

    ``max_predictions`` adds empty ``masked_lm_positions``; ``labels`` adds one
    per-sequence label per row.
    """
    n = len(rows)
    f = {k: np.zeros((n, max_length), np.int32) for k in
         ("input_ids", "sequence_ids", "position_ids", "token_type_ids")}
    for i, row in enumerate(rows):
        f["input_ids"][i, :len(row)] = row
        f["sequence_ids"][i, :len(row)] = 1
        f["position_ids"][i, :len(row)] = np.arange(len(row))
    f["cls_positions"] = np.zeros((n, max_sequences_per_pack), np.int32)
    f["sequence_mask"] = np.zeros((n, max_sequences_per_pack), np.float32)
    f["sequence_mask"][:, 0] = 1.0
    if max_predictions is not None:
        f["masked_lm_positions"] = np.zeros((n, max_predictions), np.int32)
    if labels is not None:
        f["labels"] = np.zeros((n, max_sequences_per_pack), np.int32)
        f["labels"][:, 0] = labels
    return f


def signature_defs(path):
    """The SavedModel's served signatures (name: SignatureDef), as TensorFlow Serving reads
    them from saved_model.pb: no `tf.saved_model.load` restoring the weights. The map there
    also holds the initializer (``__saved_model_init_op``), which is no signature:
    `tf.saved_model.load(path).signatures` leaves it out too."""
    from tensorflow.core.protobuf import saved_model_pb2

    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        graph = saved_model_pb2.SavedModel.FromString(f.read()).meta_graphs[0]
    return {name: signature for name, signature in graph.signature_def.items()
            if name != "__saved_model_init_op"}


def served_ids_shape(path):
    """``input_ids``' shape in serving_default's signature (-1: any size), from saved_model.pb
    (`signature_defs`)."""
    return [d.size for d in signature_defs(path)["serving_default"].inputs["input_ids"]
            .tensor_shape.dim]
