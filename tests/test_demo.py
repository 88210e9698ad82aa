"""The main job end to end on a tiny configuration (`tfpack demo`)."""

import json
import os
import re

import pytest

from tfpack import demo
from tfpack.cli import main
from tfpack.errors import TfpackError

TINY = dict(documents=12, max_length=128, steps=4, batch_size=8, log_every=2,
            hidden_dim=16, num_layers=1, num_heads=2, intermediate_dim=32)


def test_demo_command_trains_both_runs_and_ends_with_one_json_line(tmp_path, capsys):
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    status = main(["demo", f"--output-dir={tmp_path / 'out'}",
                   f"--saved-model={tmp_path / 'model'}", *flags])
    assert status == 0
    lines = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(lines[-1])
    for key in ("efficiency", "packing_factor", "realized_speedup", "final_loss_packed",
                "final_loss_unpacked", "saved_model"):
        assert key in summary
    assert 0.5 < summary["efficiency"] <= 1.0
    assert summary["packing_factor"] > 1.0
    # The speed-up is the median of interleaved timed rounds, with its spread; a median
    # above the upper bound is labelled as noise and not reported as a result.
    low, high = summary["realized_speedup_spread"]
    assert 0 < low <= summary["realized_speedup_median"] <= high
    if summary["realized_speedup_median"] > summary["speedup_upper_bound"]:
        assert summary["realized_speedup"] is None
        assert summary["realized_speedup_label"].startswith("timing noise, not a result")
    else:
        assert summary["realized_speedup"] == summary["realized_speedup_median"]
        assert re.match(r"realized speed-up [\d.]+x \(median of 5 interleaved rounds, spread ",
                        summary["realized_speedup_label"])
    assert summary["realized_speedup_label"] in "\n".join(lines)
    # Both runs saw (about) the same number of sequences: the packed batch is
    # cut by the packing factor.
    seen = summary["sequences_seen_packed"] / summary["sequences_seen_unpacked"]
    assert 0.6 < seen < 1.6
    assert os.path.isfile(os.path.join(summary["saved_model"], "saved_model.pb"))
    for path in summary["plots"].values():
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.isfile(tmp_path / "out" / "packed.jsonl")


def test_packed_and_unpacked_start_from_the_same_weights():
    import tensorflow as tf

    config = demo.DemoConfig(**TINY)
    spec = {"input_ids": tf.TensorSpec([128], tf.int32)}
    packed_spec = dict(spec, **{
        "sequence_ids": tf.TensorSpec([128], tf.int32),
        "position_ids": tf.TensorSpec([128], tf.int32),
        "token_type_ids": tf.TensorSpec([128], tf.int32),
        "masked_lm_positions": tf.TensorSpec([6], tf.int32),
        "masked_lm_ids": tf.TensorSpec([6], tf.int32),
        "masked_lm_weights": tf.TensorSpec([6], tf.float32),
        "masked_lm_sequence_ids": tf.TensorSpec([6], tf.int32),
        "cls_positions": tf.TensorSpec([3], tf.int32),
        "sequence_mask": tf.TensorSpec([3], tf.float32),
        "next_sentence_labels": tf.TensorSpec([3], tf.int32),
    })
    unpacked_spec = {k: tf.TensorSpec([1] if s.shape[0] == 3 else
                                      ([2] if s.shape[0] == 6 else s.shape), s.dtype)
                     for k, s in packed_spec.items()}
    twins = demo._twin_models(config, 40, packed_spec, unpacked_spec)
    for a, b in zip(twins["packed"].get_weights(), twins["unpacked"].get_weights()):
        assert (a == b).all()


@pytest.mark.parametrize("field, value, pattern", [
    ("steps", 0, r"`steps` must be a positive integer. Received: steps=0"),
    ("learning_rate", -1.0, r"`learning_rate` must be positive"),
    ("max_length", 4, r"`max_length` must be at least 8"),
    ("num_heads", 3, r"`hidden_dim` must be a multiple of `num_heads`"),
])
def test_bad_config_is_one_clear_error(field, value, pattern):
    with pytest.raises(TfpackError, match=pattern):
        demo.DemoConfig(**dict(TINY, **{field: value}))
