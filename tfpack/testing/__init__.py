"""Equivalence checks for packed models (seed 000, appendix T.5).

- `assert_no_cross_contamination(model, packed_inputs)`: perturbing one
  sequence of a pack leaves every other sequence's outputs unchanged.
- `assert_packed_equals_unpacked(model, examples)`: the same examples run
  one per row and packed give the same per-sequence outputs, losses and
  gradients.
- `pack_examples`: the small numpy packer both use.
- `check_packing_exact(model)`: the run-time check `Trainer.fit`, `tfpack
  train`, `from_keras_hub` and `tfpack.training.ExactnessCheck` run: one
  probe pack against each of its sequences alone (`PackingNotExactError`).

Example:

>>> from tfpack.testing import pack_examples
>>> pack_examples([{"input_ids": [5, 6]}, {"input_ids": [7]}],
...               max_length=4)["sequence_ids"].tolist()
[[1, 1, 2, 0]]
"""

from tfpack.testing.equivalence import EquivalenceResult
from tfpack.testing.equivalence import assert_no_cross_contamination
from tfpack.testing.equivalence import assert_packed_equals_unpacked
from tfpack.testing.exactness import ExactnessResult
from tfpack.testing.exactness import PackingNotExactError
from tfpack.testing.exactness import check_packing_exact
from tfpack.testing.packer import next_fit
from tfpack.testing.packer import next_token_labels
from tfpack.testing.packer import pack_examples

__all__ = [
    "EquivalenceResult",
    "ExactnessResult",
    "PackingNotExactError",
    "assert_no_cross_contamination",
    "assert_packed_equals_unpacked",
    "check_packing_exact",
    "next_fit",
    "next_token_labels",
    "pack_examples",
]
