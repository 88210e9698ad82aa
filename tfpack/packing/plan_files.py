"""What one-length and two-length plan files share: their JSON, fields and stored numbers.

`PackingPlan.from_json` and `PairPackingPlan.from_json` check their own format,
version, lengths and strategies; both read the JSON, require the same fields and
keep only the numbers an algorithm alone knows (its time and its lower bound),
checked here once.

>>> data = load_json('{"metrics": {"solve_seconds": 0.5, "lower_bound_packs": 3}}')
>>> stored_metrics(data)
{'solve_seconds': 0.5, 'lower_bound_packs': 3, 'lower_bound_kind': None}
>>> stored_metrics({"metrics": {"solve_seconds": "soon"}})
Traceback (most recent call last):
...
tfpack.errors.TfpackError: A plan file's metrics.solve_seconds must be a number. Received: solve_seconds='soon'
"""

from __future__ import annotations

import json
from collections.abc import Collection

from tfpack.errors import TfpackError
from tfpack.params import Anything, Constraint, InstanceOf, Integer, Text

__all__ = ["FIELDS", "check_fields", "field_constraints", "load_json", "stored_metrics"]

# Every plan file has these, whatever its number of lengths.
FIELDS = ("max_length", "max_sequences_per_pack", "algorithm", "histogram", "strategies", "counts",
          "metrics")


def load_json(text: str):
    """The parsed JSON of a plan file; `TfpackError` if it is not JSON."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as error:
        raise TfpackError(f"A plan file must be valid JSON. Received: {error}") from None


def check_fields(data: dict) -> None:
    """Refuse a plan file without every one of `FIELDS`."""
    missing = [key for key in FIELDS if key not in data]
    if missing:
        raise TfpackError(f"A plan file must have the fields {list(FIELDS)}. Received: missing {missing}")


def stored_metrics(data: dict, kinds: Collection[str] | None = None) -> dict:
    """``solve_seconds``, ``lower_bound_packs`` and ``lower_bound_kind`` as stored.

    The derived numbers are recomputed by the reader; only these are read. A kind
    not in ``kinds`` (when given) is dropped.
    """
    stored = data["metrics"] if isinstance(data.get("metrics"), dict) else {}
    for key in ("solve_seconds", "lower_bound_packs"):
        value = stored.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise TfpackError(f"A plan file's metrics.{key} must be a number. Received: {key}={value!r}")
    kind = stored.get("lower_bound_kind")
    return {"solve_seconds": float(stored.get("solve_seconds") or 0.0),
            "lower_bound_packs": stored.get("lower_bound_packs"),
            "lower_bound_kind": kind if kinds is None or kind in kinds else None}


def field_constraints(max_length: Constraint) -> dict:
    """The declared fields of a plan class (`params.declare_fields`); ``max_length``
    is what differs (one length, or a pair)."""
    return {"max_length": max_length, "max_sequences_per_pack": [None, Integer(1)],
            "algorithm": Text("the name of the algorithm that made the plan"),
            "histogram": Anything("int64 counts per length, checked with the plan"),
            "strategies": Anything("tuples of lengths, checked with the plan"),
            "counts": Anything("int64 packs per strategy, checked with the plan"),
            "metrics": InstanceOf(dict, description="a dict of plan metrics")}
