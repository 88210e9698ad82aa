import json

import numpy as np
import pytest

from tfpack.errors import TfpackError
from tfpack.packing import PackingPlan, algorithm_names, plan
from tfpack.packing.metrics import METRIC_NAMES

# Two 6s, three 4s, four 2s, max length 8.
HISTOGRAM = np.array([0, 4, 0, 3, 0, 2, 0, 0])


def test_plan_metrics_by_hand():
    p = plan(HISTOGRAM, 8, None, algorithm="lpfhp")
    assert p.strategies == [(6, 2), (4, 4), (4, 2, 2)]
    assert p.counts.tolist() == [2, 1, 1]
    assert p.metrics == {
        "packs": 4,
        "sequences": 9,
        "tokens": 32,
        "padding_tokens": 0,
        "efficiency": 1.0,
        "packing_factor": 9 / 4,
        "speedup_upper_bound": 9 * 8 / 32,
        "strategies_used": 3,
        "max_depth_used": 3,
        "solve_seconds": p.metrics["solve_seconds"],
        "lower_bound_packs": 4,
        "lower_bound_kind": "tokens",  # 32 tokens in packs of 8
    }
    assert list(p.metrics) == list(METRIC_NAMES)


def test_spfhp_plan_has_padding():
    p = plan(HISTOGRAM, 8, None, algorithm="spfhp")
    assert p.metrics["packs"] == 5 and p.metrics["padding_tokens"] == 8
    assert p.metrics["efficiency"] == 32 / 40


def test_most_used_strategy_first():
    p = plan(np.array([0, 4, 0, 0, 0, 0, 0, 5]), 8, None, algorithm="none")
    assert p.strategies == [(8,), (2,)] and p.counts.tolist() == [5, 4]


def test_json_round_trip(tmp_path):
    p = plan(HISTOGRAM, 8, 3, algorithm="spfhp")
    data = json.loads(p.to_json())
    assert data["format"] == "tfpack-plan" and data["version"] == 1
    assert data["max_sequences_per_pack"] == 3 and data["algorithm"] == "spfhp"
    assert data["histogram"] == HISTOGRAM.tolist()
    assert data["strategies"] == [list(s) for s in p.strategies]
    assert set(data["metrics"]) == set(METRIC_NAMES)
    back = PackingPlan.from_json(p.to_json())
    assert back.strategies == p.strategies and back.metrics == p.metrics
    assert np.array_equal(back.counts, p.counts) and np.array_equal(back.histogram, p.histogram)
    path = tmp_path / "plan.json"
    p.save(path)
    assert PackingPlan.load(path).to_json() == p.to_json()


def test_save_replaces_an_earlier_plan_and_keeps_any_other_file(tmp_path):
    first, second = plan(HISTOGRAM, 8, 3, algorithm="spfhp"), plan(HISTOGRAM, 8, 2, algorithm="ffd")
    path = tmp_path / "plan.json"
    first.save(path)
    second.save(path)  # a second run into the same place replaces its plan
    assert PackingPlan.load(path).to_json() == second.to_json()
    histogram = tmp_path / "lengths.txt"
    histogram.write_text("0\n2\n1\n")
    for other in (histogram, tmp_path / "notes.json"):
        if other.suffix == ".json":
            other.write_text('{"format": "something-else"}')
        before = other.read_bytes()
        with pytest.raises(TfpackError, match="holds another file, kept as it is"):
            second.save(other)
        assert other.read_bytes() == before
    with pytest.raises(TfpackError, match="must not be a directory"):
        second.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lengths.txt", "notes.json", "plan.json"]


def test_a_save_that_fails_before_its_rename_leaves_the_earlier_plan(tmp_path, monkeypatch):
    path = tmp_path / "plan.json"
    plan(HISTOGRAM, 8, 3, algorithm="spfhp").save(path)
    before = path.read_bytes()

    def killed(*args):
        raise OSError("killed before the rename")

    monkeypatch.setattr("os.replace", killed)
    with pytest.raises(OSError, match="killed"):
        plan(HISTOGRAM, 8, 2, algorithm="ffd").save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary file left


def test_json_round_trip_without_depth_limit():
    p = plan(HISTOGRAM, 8, None, algorithm="ffd")
    assert json.loads(p.to_json())["max_sequences_per_pack"] is None
    assert PackingPlan.from_json(p.to_json()).max_sequences_per_pack is None


def _edited(**changes):
    data = json.loads(plan(HISTOGRAM, 8, 3, algorithm="spfhp").to_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("{not json", r"valid JSON"),
        ("[1, 2]", r"format='tfpack-plan'. Received: format='list'"),
        (_edited(format="other"), r"format='tfpack-plan'. Received: format='other'"),
        (_edited(version=2), r"plan files of version 1. Received: version=2"),
        (_edited(histogram=[1, 2]), r"8 entries. Received: histogram with 2 entries"),
        (_edited(max_length=0), r"max_length=0"),
        (_edited(max_sequences_per_pack=0), r"max_sequences_per_pack=0"),
        (_edited(counts=[1]), r"one count per strategy"),
        (_edited(strategies=[[9], [4, 2], [4, 2, 2]]), r"between 1 and max_length=8. Received: strategies\[0\]=\[9\]"),
        (_edited(strategies=[[6, 2, 2], [4, 2], [4, 2, 2]]), r"sum to at most max_length=8"),
        (_edited(strategies=[[6], [2, 4], [4, 2, 2]]), r"longest first. Received: strategies\[1\]=\[2, 4\]"),
        (_edited(strategies=[[6], [], [4, 2, 2]]), r"at least one length"),
        (_edited(strategies="abc"), r"list of lists"),
        (_edited(strategies=[[6.5], [4, 2], [4, 2, 2]]), r"integer lengths. Received: strategies\[0\]=\[6.5\]"),
        (_edited(strategies=[["6"], [4, 2], [4, 2, 2]]), r"integer lengths. Received: strategies\[0\]=\['6'\]"),
        (_edited(strategies=[[True], [4, 2], [4, 2, 2]]), r"integer lengths"),
        (_edited(counts=[1.0, 2, 1]), r"list of integers"),
        (_edited(metrics={"solve_seconds": "fast"}), r"metrics.solve_seconds must be a number. Received: solve_seconds='fast'"),
        (_edited(counts=[0, 2, 1]), r"positive integer"),
        (_edited(counts=["a", 2, 1]), r"list of integers"),
    ],
)
def test_corrupt_plan_files_give_clear_errors(text, pattern):
    with pytest.raises(TfpackError, match=pattern):
        PackingPlan.from_json(text)


def test_plan_missing_slots_is_rejected():
    data = json.loads(plan(HISTOGRAM, 8, None, algorithm="lpfhp").to_json())
    data["counts"][0] -= 1
    with pytest.raises(TfpackError, match=r"slot for every sequence.*2 sequences without a slot"):
        PackingPlan.from_json(json.dumps(data))


def test_plan_depth_over_limit_is_rejected():
    data = json.loads(plan(HISTOGRAM, 8, None, algorithm="lpfhp").to_json())
    data["max_sequences_per_pack"] = 2
    with pytest.raises(TfpackError, match=r"at most max_sequences_per_pack=2"):
        PackingPlan.from_json(json.dumps(data))


def test_load_missing_file(tmp_path):
    with pytest.raises(TfpackError, match=r"readable. Received: path=.*nope.json"):
        PackingPlan.load(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(max_sequences_per_pack=0), r"positive integer or None.*Received: max_sequences_per_pack=0"),
        (dict(max_sequences_per_pack=-2), r"Received: max_sequences_per_pack=-2"),
        (dict(max_length=7), r"i.e. 7 entries. Received: histogram with 8 entries"),
        (dict(algorithm="magic"), r"`algorithm` must be one of .*Received: algorithm='magic'"),
    ],
)
def test_plan_rejects_bad_arguments(kwargs, pattern):
    arguments = dict(histogram=HISTOGRAM, max_length=8, max_sequences_per_pack=3, algorithm="spfhp")
    arguments.update(kwargs)
    with pytest.raises(TfpackError, match=pattern):
        plan(**arguments)


def test_plan_rejects_empty_dataset_and_negative_counts():
    with pytest.raises(TfpackError, match=r"at least one sequence \(the dataset is empty\)"):
        plan(np.zeros(8, dtype=np.int64), 8, 3, algorithm="spfhp")
    with pytest.raises(TfpackError, match=r"non-negative. Received: histogram\[2\]=-1"):
        plan(np.array([0, 0, -1, 1]), 4, 3, algorithm="spfhp")


def test_summary_mentions_the_key_numbers():
    text = plan(HISTOGRAM, 8, 3, algorithm="spfhp").summary()
    assert "algorithm='spfhp'" in text and "efficiency 80.000%" in text
    assert "9 sequences" in text and "5 packs" in text


@pytest.mark.parametrize("name", algorithm_names())
def test_every_algorithm_is_deterministic_per_seed(name):
    a = plan(HISTOGRAM, 8, 3, algorithm=name, seed=5)
    b = plan(HISTOGRAM, 8, 3, algorithm=name, seed=5)
    assert a.strategies == b.strategies and np.array_equal(a.counts, b.counts)


def test_load_binary_file(tmp_path):
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(TfpackError, match=r"readable|valid JSON"):
        PackingPlan.load(path)
