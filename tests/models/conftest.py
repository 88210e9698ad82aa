"""Fixtures of the model tests."""

import keras
import pytest


@pytest.fixture(autouse=True)
def _float32_policy():
    yield
    keras.mixed_precision.set_global_policy("float32")
