"""The realized speed-up: median of interleaved rounds with spread; above the bound is noise."""

import re

import pytest

from tfpack.errors import TfpackError
from tfpack.training.speed import SpeedupResult, measure_speedup


def test_median_and_spread_of_the_rounds():
    result = SpeedupResult(ratios=(1.2, 1.5, 1.3, 1.4, 1.1), upper_bound=1.65)
    assert result.median == 1.3 and result.spread == (1.1, 1.5) and result.value == 1.3
    assert re.fullmatch(r"realized speed-up 1.300x \(median of 5 interleaved rounds, spread "
                        r"1.100-1.500; upper bound 1.650x\)", result.label)


def test_a_median_above_the_upper_bound_is_noise_not_a_result():
    # The demo once printed 1.92x against an upper bound of 1.65x as its result.
    result = SpeedupResult(ratios=(1.92, 1.7, 2.1), upper_bound=1.65)
    assert result.is_noise and result.value is None
    assert result.label.startswith("timing noise, not a result: 1.920x")


class _FakeTrainer:
    """Tokens per second fixed per round (a Trainer's fit history, without training)."""

    def __init__(self, speeds):
        import tensorflow as tf

        self.speeds, self.step, self.calls = list(speeds), tf.Variable(0, dtype="int64"), []

    def fit(self, dataset, num_steps):
        self.calls.append(num_steps)
        self.step.assign(num_steps)
        import types
        return types.SimpleNamespace(history=[{"real_tokens": self.speeds.pop(0),
                                               "seconds": 1.0}])


def test_rounds_are_interleaved_and_the_median_taken():
    packed, unpacked = _FakeTrainer([30, 90, 33]), _FakeTrainer([20, 20, 20])
    result = measure_speedup(packed, unpacked, {"packed": None, "unpacked": None}, rounds=3,
                             steps_per_round=2, upper_bound=2.0)
    assert result.ratios == (1.5, 4.5, 1.65) and result.value == 1.65  # 4.5: one noisy round
    assert packed.calls == unpacked.calls == [2, 4, 6]
    with pytest.raises(TfpackError, match=r"`rounds` must be a positive integer"):
        measure_speedup(packed, unpacked, {}, rounds=0)
