import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.layers import StatisticRatio
from tfpack.layers import causal_lm_statistics
from tfpack.layers import global_sum
from tfpack.layers import loss_from_statistics
from tfpack.layers import masked_lm_statistics
from tfpack.layers import sequence_statistics


def _ce(logits, label):
    logits = np.asarray(logits, np.float64)
    return np.log(np.exp(logits).sum()) - logits[label]


def _values(stats):
    return {k: float(v) for k, v in stats.items()}


# One pack: sequence 1 owns predictions 0 and 1, sequence 2 owns prediction
# 2, the last slot is padding.
LOGITS = np.array([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0],
                    [9.0, 9.0, 9.0]]])
IDS = np.array([[0, 2, 2, 0]])
WEIGHTS = np.array([[1.0, 1.0, 1.0, 0.0]])
SEQUENCE_IDS = np.array([[1, 1, 2, 0]])
LOSSES = [_ce([2, 0, 0], 0), _ce([0, 1, 0], 2), _ce([0, 0, 3], 2)]


def test_mlm_token_averaging_by_hand():
    stats = _values(masked_lm_statistics(LOGITS, IDS, WEIGHTS))
    assert stats["mlm_count"] == 3.0 and stats["mlm_correct"] == 2.0
    assert stats["mlm_loss_sum"] == pytest.approx(sum(LOSSES), rel=1e-6)


def test_mlm_sequence_averaging_by_hand():
    stats = _values(masked_lm_statistics(
        LOGITS, IDS, WEIGHTS, SEQUENCE_IDS, num_sequences=3,
        averaging="sequence"))
    assert stats["mlm_count"] == 2.0  # two sequences have predictions
    assert stats["mlm_correct"] == pytest.approx(0.5 + 1.0)
    expected = (LOSSES[0] + LOSSES[1]) / 2 + LOSSES[2]
    assert stats["mlm_loss_sum"] == pytest.approx(expected, rel=1e-6)


def test_mlm_errors():
    with pytest.raises(TfpackError, match=r"Received: averaging='pack'"):
        masked_lm_statistics(LOGITS, IDS, WEIGHTS, averaging="pack")
    with pytest.raises(TfpackError, match=r"needs `masked_lm_sequence_ids`"):
        masked_lm_statistics(LOGITS, IDS, WEIGHTS, averaging="sequence")


def test_sequence_statistics_count_real_sequences_only():
    logits = np.array([[[2.0, 0.0], [0.0, 2.0], [5.0, 0.0]]])
    stats = _values(sequence_statistics(logits, np.array([[0, 0, 1]]),
                                        np.array([[1.0, 1.0, 0.0]]),
                                        term="nsp"))
    assert stats["nsp_count"] == 2.0 and stats["nsp_correct"] == 1.0
    assert stats["nsp_loss_sum"] == pytest.approx(
        _ce([2, 0], 0) + _ce([0, 2], 0), rel=1e-6)


def test_causal_statistics_ignore_minus_100():
    logits = np.array([[[1.0, 0.0], [0.0, 1.0], [3.0, 3.0]]])
    stats = _values(causal_lm_statistics(logits, np.array([[1, -100, -100]])))
    assert stats == pytest.approx(
        {"lm_loss_sum": _ce([1, 0], 1), "lm_count": 1.0, "lm_correct": 0.0})


def test_loss_from_statistics_mean_and_balancing():
    stats = {"mlm_loss_sum": 6.0, "mlm_count": 3.0, "mlm_correct": 0.0,
             "nsp_loss_sum": 1.0, "nsp_count": 0.0, "nsp_correct": 0.0}
    loss = loss_from_statistics(stats, ("mlm", "nsp"))
    assert float(loss) == pytest.approx(2.0 + 1.0)  # max(count, 1)
    balanced = loss_from_statistics(stats, ("mlm", "nsp"),
                                    expected_counts={"mlm": 4.0}, num_packs=3)
    assert float(balanced) == pytest.approx(6.0 / 12.0 + 1.0)
    with pytest.raises(TfpackError, match=r"Received: num_packs=None"):
        loss_from_statistics(stats, ("mlm",), expected_counts={"mlm": 4.0})


def test_statistic_ratio_accumulates_sums():
    metric = StatisticRatio()
    metric.update_state(1.0, 1.0)
    metric.update_state(0.0, 3.0)
    assert float(metric.result()) == pytest.approx(0.25)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def test_global_sum_is_identity_without_replicas():
    assert float(global_sum(np.float32(3.0))) == 3.0


def test_step_loss_is_keras_mean_on_one_replica_and_round_trips():
    import keras

    from tfpack.layers import StepLoss

    tracker, mean = StepLoss(name="loss"), keras.metrics.Mean(name="loss")
    for value, batch in ((2.0, 3), (4.0, 1)):
        tracker.update_state(value, sample_weight=batch)
        mean.update_state(value, sample_weight=batch)
    assert float(tracker.result()) == float(mean.result()) == 2.5
    again = StepLoss.from_config(tracker.get_config())
    assert isinstance(again, StepLoss) and again.name == "loss"
    # Tasks report their loss through it (the distributed value is checked in
    # tests/models/test_replicas.py).
    from tfpack.models import CausalLM, DecoderBackbone

    model = CausalLM(DecoderBackbone(vocabulary_size=10, num_layers=1, hidden_dim=4,
                                     num_heads=1, intermediate_dim=8))
    model.compile(optimizer="sgd")
    assert isinstance(model._loss_tracker, StepLoss)
