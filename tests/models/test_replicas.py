"""Loss normalization is global across replicas: one `Trainer` update under
MirroredStrategy over two logical CPUs (1 pack per replica per micro-batch, 2
micro-batches) equals the update of the global loss, for SFT (token averaging)
and for preference pairs (DPO: the pair count). Both updates run in one subprocess
(`replicas_run.py`): logical devices must be set before TensorFlow starts, and
TensorFlow starts once."""

import pytest

from preference_helpers import unpacked_update
from sft_helpers import expected_update
from update_helpers import max_difference, replicas_updates

pytestmark = pytest.mark.slow

JOBS = [("sft_helpers", "token"), ("preference_helpers", "sigmoid")]


@pytest.fixture(scope="module")
def updates(tmp_path_factory):
    return replicas_updates(JOBS, tmp_path_factory.mktemp("replicas"))


def test_sft_normalization_is_global_across_replicas(updates):
    assert max_difference(updates["sft_helpers", "token"], expected_update("token", 1)) < 1e-5


def test_preference_pair_count_is_global_across_replicas(updates):
    assert max_difference(updates["preference_helpers", "sigmoid"],
                          unpacked_update("sigmoid")) < 1e-5
