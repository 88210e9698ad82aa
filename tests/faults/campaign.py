"""The campaign's hypothesis settings: a few examples per property in CI, many on request.

Every property-based scenario of `tests/faults` takes its settings from
`campaign`: in CI each runs the number of examples it names (chosen by its
cost: a handful where an example starts a pack or a process, a few dozen
where it is a function call). The longer setting draws
``TFPACK_CAMPAIGN_EXAMPLES`` examples for every property instead, and
``TFPACK_CAMPAIGN_SEED`` moves the kill points of the ``kill -9`` scenarios
(docs/faults.md, "Running it").

Example:

>>> from hypothesis import given, strategies as st
>>> @campaign(examples=3)
... @given(st.integers())
... def test_anything(x):
...     assert isinstance(x, int)
>>> test_anything()
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["LONG_EXAMPLES", "KILL_SEED", "campaign", "kill_rounds"]

# Unset in CI; e.g. 200 for the longer setting.
LONG_EXAMPLES = int(os.environ.get("TFPACK_CAMPAIGN_EXAMPLES", "0") or 0)
KILL_SEED = int(os.environ.get("TFPACK_CAMPAIGN_SEED", "0") or 0)


def campaign(examples: int) -> settings:
    """Settings of one property: ``examples`` in CI, ``TFPACK_CAMPAIGN_EXAMPLES`` if set.

    On top of the suite's profile (no deadline, derandomized in CI): the
    scenarios build files and models, so no health check about slow data
    generation or function-scoped fixtures (each example makes its own
    folder with ``tmp_path_factory``).
    """
    return settings(max_examples=LONG_EXAMPLES or examples, deadline=None,
                    suppress_health_check=list(HealthCheck))


def kill_rounds(ci: int) -> int:
    """How many processes a ``kill -9`` scenario kills: ``ci``, or a tenth of the long
    setting's examples (each round costs a process start)."""
    return max(ci, LONG_EXAMPLES // 10)
