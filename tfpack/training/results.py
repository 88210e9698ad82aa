"""What a training run reports: its result, its stop on a non-finite loss, and loss records.

`loss_record` turns summed loss statistics (``{t}_loss_sum``, ``{t}_count``,
``{t}_correct`` per loss term ``t``) into the per-target means that training
logs and `Trainer.evaluate` report: every target weighs the same, whatever
pack or batch it came in.

>>> loss_record({"mlm_loss_sum": 6.0, "mlm_count": 4.0, "mlm_correct": 3.0}, ["mlm"])
{'mlm_loss': 1.5, 'mlm_accuracy': 0.75, 'loss': 1.5}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from tfpack.errors import TfpackError
from tfpack.params import Boolean, InstanceOf, Integer, declare_fields, validate_params

__all__ = ["NonFiniteLossError", "TrainResult", "loss_record"]


class NonFiniteLossError(TfpackError):
    """The loss became NaN or infinite; ``step`` says at which update."""

    @validate_params({"message": InstanceOf(str), "step": Integer(0),
                      "checkpoint": [None, InstanceOf(str)]})
    def __init__(self, message: str, step: int, checkpoint: str | None):
        super().__init__(message)
        self.step = step
        self.checkpoint = checkpoint


@declare_fields({
    "step": Integer(0), "history": InstanceOf(list), "checkpoint": [None, InstanceOf(str)],
    "resumed_from": [None, Integer(0)], "data_exhausted": Boolean(),
})
@dataclasses.dataclass
class TrainResult:
    """What `Trainer.fit` returns.

    Attributes:
        step: optimizer updates done (including those before a resume).
        history: the logged records (dicts), one per ``log_every`` steps.
        checkpoint: path of the last checkpoint written, if any.
        resumed_from: the step restored at the start, if any.
        data_exhausted: the dataset ran out before ``num_steps`` (the
            micro-batches of an incomplete last update are not applied).
    """

    step: int
    history: list[dict]
    checkpoint: str | None = None
    resumed_from: int | None = None
    data_exhausted: bool = False


def loss_record(sums: Mapping[str, float], terms: Iterable[str]) -> dict:
    """``{t}_loss`` and ``{t}_accuracy`` per term (means over targets) and their sum ``loss``."""
    record, total = {}, 0.0
    for t in terms:
        count = max(sums[f"{t}_count"], 1.0)
        record[f"{t}_loss"] = sums[f"{t}_loss_sum"] / count
        record[f"{t}_accuracy"] = sums[f"{t}_correct"] / count
        total += record[f"{t}_loss"]
    record["loss"] = total
    return record
