"""What the run-time exactness check returns or raises (`check_packing_exact`).

`ExactnessResult` describes a check that passed; `PackingNotExactError` is its
one-line refusal, naming where the packed model first differs.

>>> result = ExactnessResult((5, 1, 3), 12, "packs of one", "float32", "dense",
...                          1e-4, {"output 'sequence_output'": (2.5e-5, 1e-4)}, 0.5)
>>> result.worst
("output 'sequence_output'", 0.25)
"""

import dataclasses

import numpy as np

from tfpack.errors import TfpackError
from tfpack.params import InstanceOf
from tfpack.params import Integer
from tfpack.params import Real
from tfpack.params import Text
from tfpack.params import validate_params

__all__ = ["ExactnessResult", "PackingNotExactError"]

_NUMBER = InstanceOf(float, int, np.floating, description="a number")


class PackingNotExactError(TfpackError):
    """The packed model computes a sequence differently than it does alone.

    Attributes:
        location: what differs: ``"layer 'name'"``, ``"output
            'sequence_output'"`` or ``"gradient of 'weight path'"``.
        difference: the largest absolute difference found there.
        tolerance: the largest one allowed there.
    """

    @validate_params({"message": Text(), "location": Text(),
                      "difference": _NUMBER, "tolerance": _NUMBER})
    def __init__(self, message, location, difference, tolerance):
        super().__init__(message)
        self.location = location
        self.difference = difference
        self.tolerance = tolerance


@dataclasses.dataclass(frozen=True)
class ExactnessResult:
    """What `check_packing_exact` compared (it passed).

    Attributes:
        lengths: the probe's sequence lengths, in pack order.
        length: the probe pack's length `L`.
        reference: ``"keras-hub backbone"`` or ``"packs of one"``.
        compute_dtype: the backbone's compute dtype.
        implementation: the attention implementation the packed probe ran.
        tolerance: the relative tolerance used (`TOLERANCES`).
        differences: ``{location: (largest difference, tolerance)}`` of every
            layer output, output and weight gradient compared, in order.
        seconds: wall time of the check.
    """

    lengths: tuple
    length: int
    reference: str
    compute_dtype: str
    implementation: str
    tolerance: float
    differences: dict
    seconds: float

    def describe(self):
        """One line: what was probed and how close it came to the tolerance."""
        where, ratio = self.worst
        return (f"exactness check passed: probe of {'+'.join(map(str, self.lengths))} "
                f"tokens at L={self.length}, {self.compute_dtype}, {self.implementation} "
                f"attention, against {self.reference}; {len(self.differences)} values "
                f"compared, the closest at {ratio:.1%} of its tolerance ({where}); "
                f"{self.seconds:.1f} s")

    @property
    def worst(self):
        """``(location, difference / tolerance)`` of the closest call."""
        return max(((name, d / t if t > 0 else (0.0 if d == 0 else np.inf))
                    for name, (d, t) in self.differences.items()),
                   key=lambda item: item[1], default=(None, 0.0))


ExactnessResult.__init__ = validate_params({
    "lengths": InstanceOf(tuple, description="a tuple of sequence lengths"),
    "length": Integer(1), "reference": Text(), "compute_dtype": Text(),
    "implementation": Text(), "tolerance": Real(0),
    "differences": InstanceOf(dict), "seconds": Real(0)})(ExactnessResult.__init__)
