"""Run by test_keras_hub_recurrent.py under Keras on JAX (argv: families).

For every family, under `jax.jit`, with the rows of `recurrent_helpers`
(sequences straddling the chunk of 64, of one token, shorter than the
kernel of 4):

- each sequence's packed output equals keras-hub's backbone on that
  sequence alone (each in its own one-row batch of one shape, right padded,
  so keras-hub compiles once: padding after a causal model's tokens does
  not reach them);
- the gradient of a loss summed over the packs' sequences equals the sum of
  the per-sequence gradients: the adapter's on every sequence alone in its
  own row (keras-hub's gated delta rule unrolls 63 steps a chunk, and its
  gradient compiles for a minute a shape on a loaded CPU; the TensorFlow test
  holds keras-hub's gradients equal to the packed ones);
- without the resets (one segment a row) the outputs differ: the comparison
  can fail.

Prints one timing line a family, then "ok".
"""

import sys
import time

import jax
import keras
import numpy as np

from recurrent_helpers import LENGTH, examples, make, packed_examples
from recurrent_helpers import returns_logits, spans
from tfpack.models import from_keras_hub
from tfpack.testing import pack_examples

assert keras.backend.backend() == "jax"


def tolerance(reference):
    return 1e-4 * max(1.0, float(np.abs(reference).max()))


def check(family):
    start = time.process_time()
    backbone = make(family)
    adapter = from_keras_hub(backbone, attention_implementation="dense",
                             check_exact=False)
    trainable = [v.value for v in backbone.trainable_variables]
    fixed = [v.value for v in backbone.non_trainable_variables]
    data = examples()
    packed = packed_examples()
    # Every sequence alone in its own row (sequence ids 1, then padding).
    alone_rows = pack_examples(data, LENGTH, packs=[[i] for i in range(len(data))])
    weights = np.random.default_rng(1).normal(
        size=(len(data), LENGTH, adapter.hidden_dim)).astype("float32")

    def output(values, features):
        out, _ = adapter.stateless_call(values, fixed, features)
        return out["sequence_output"]

    # The packed rows without resets (one sequence a row) must differ: the
    # comparison can fail.
    leaky = dict(packed, sequence_ids=np.where(packed["sequence_ids"] > 0, 1, 0))
    # Packed rows, rows of one sequence and leaky rows in one batch: one
    # program, its backward traced once for both losses (`jacrev` maps it
    # over them); the rows do not meet (a batch's rows never do).
    batch = {n: np.concatenate([packed[n], alone_rows[n], leaky[n]])
             for n in adapter.input_features if n in packed}
    rows = len(packed["input_ids"])

    def losses(values):
        out = output(values, batch)
        packed_loss = sum((out[row, tokens] * weights[i, :len(tokens)]).sum()
                          for i, (row, tokens) in enumerate(spans(packed)))
        alone_loss = sum((out[rows + i, :len(e["input_ids"])]
                          * weights[i, :len(e["input_ids"])]).sum()
                         for i, e in enumerate(data))
        return keras.ops.stack([packed_loss, alone_loss]), (
            out[:rows], out[rows + len(data):])

    grads, (out, leaked) = jax.jit(jax.jacrev(losses, has_aux=True))(trainable)
    for variable, pair in zip(backbone.trainable_variables, grads):
        got, want = np.asarray(pair[0]), np.asarray(pair[1])
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance(want),
                                   err_msg=f"{family} {variable.path}")
    out = np.asarray(adapter.logits(out) if returns_logits(backbone) else out)
    longest = max(len(e["input_ids"]) for e in data)
    hub = jax.jit(lambda ids, mask: backbone.stateless_call(
        trainable, fixed, {"token_ids": ids, "padding_mask": mask})[0])
    worst = 0.0
    for e, (row, tokens) in zip(data, spans(packed)):
        n = len(e["input_ids"])
        ids = np.zeros((1, longest), "int32")
        ids[0, :n] = e["input_ids"]
        mask = (np.arange(longest) < n).astype("int32")[None]
        reference = np.asarray(hub(ids, mask))[0, :n]
        np.testing.assert_allclose(out[row, tokens], reference, rtol=0,
                                   atol=tolerance(reference),
                                   err_msg=f"{family}, {n} tokens")
        worst = max(worst, float(np.abs(out[row, tokens] - reference).max()))
    leaked = np.asarray(adapter.logits(leaked) if returns_logits(backbone)
                        else leaked)
    assert np.abs(leaked - out).max() > 10 * worst, family
    print(f"{family}: {time.process_time() - start:.1f} s of CPU, exact to "
          f"{worst:.1e}, a leak moves {np.abs(leaked - out).max():.1e}",
          flush=True)


for name in sys.argv[1:]:
    check(name)
print("ok")
