"""The exactness check before training: `Trainer.fit`, `tfpack train`, `model.fit`.

Before the first update, `tfpack.testing.check_packing_exact` runs one probe
pack through the model's packed backbone and each of its sequences alone
through the unpacked reference, at the training packs' length `L` (so that
`"auto"` attention picks what training runs) and under the model's own
precision and backend; a model that does not compute every sequence as it
would alone is refused in one line before it trains (docs/training.md,
"The exactness check"). `Trainer(check_exact=False)`, `tfpack train
--no-check-exact` and leaving out the callback skip it.

Example:

>>> import numpy as np
>>> from tfpack.models import CausalLM, DecoderBackbone
>>> from tfpack.testing import next_token_labels, pack_examples
>>> model = CausalLM(DecoderBackbone(vocabulary_size=30, num_layers=1,
...                                  hidden_dim=8, num_heads=2,
...                                  intermediate_dim=16))
>>> model.compile(optimizer="adam")
>>> packed = pack_examples([{"input_ids": ids, "labels": next_token_labels(ids)}
...                         for ids in ([3, 4, 5], [6, 7])], max_length=6)
>>> check = ExactnessCheck(length=6)
>>> _ = model.fit(packed, epochs=1, verbose=0, callbacks=[check])
>>> check.result.reference
'packs of one'
"""

import warnings

import keras

from tfpack.params import Integer
from tfpack.params import validate_params
from tfpack.testing.exactness import check_packing_exact
from tfpack.testing.exactness import unchecked_reason

__all__ = ["ExactnessCheck", "check_before_training"]


def check_before_training(model, length=None):
    """`check_packing_exact(model, length=length)`; a model without a packed
    backbone to probe (the bare training contract) gets a warning instead,
    and None is returned."""
    reason = unchecked_reason(model)
    if reason is not None:
        warnings.warn(f"tfpack's exactness check was skipped: {reason}, so "
                      "there is nothing to probe; check packed == unpacked with "
                      "tfpack.testing.assert_packed_equals_unpacked.", stacklevel=3)
        return None
    return check_packing_exact(model, length=length)


class ExactnessCheck(keras.callbacks.Callback):
    """A Keras callback for `model.fit`: the exactness check before training.

    `on_train_begin` runs `tfpack.testing.check_packing_exact` on the model
    being fitted, so `fit` raises `tfpack.testing.PackingNotExactError`
    before the first update if the packed model does not compute each
    sequence as it would alone. `Trainer.fit` and `tfpack train` run the
    same check themselves.

    Args:
        length: the packs' length `L`, so that `"auto"` attention chooses
            what training runs; default the probe's own (short) length.

    Attributes:
        result: the `tfpack.testing.ExactnessResult` of the last check.
    """

    @validate_params({"length": [None, Integer(1)]})
    def __init__(self, length=None):
        super().__init__()
        self.length = length
        self.result = None

    def on_train_begin(self, logs=None):
        self.result = check_before_training(self.model, self.length)
