"""Test-suite settings shared by every test module."""

import os

# Quiet TensorFlow's C++ logging before any test imports it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from hypothesis import HealthCheck, settings  # noqa: E402

# CI machines are shared and noisy: property tests are judged on correctness,
# never on per-example timing.
settings.register_profile(
    "tfpack",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("tfpack")
