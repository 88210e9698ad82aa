"""Preference pairs -> one packable item per pair -> packs (hand-computed and a property)."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfpack
from tfpack.builders.preference import pair_length
from tfpack.errors import TfpackError


def _lists(dataset):
    return [{k: v.numpy().tolist() for k, v in x.items()} for x in dataset]


def test_hand_computed_items():
    pairs = [{"prompt": [1, 2], "chosen": [7], "rejected": [8, 9]},
             {"prompt": [3], "chosen": [4, 5], "rejected": [6]}]
    assert _lists(tfpack.data.preference_examples(pairs, max_length=8)) == [
        {"input_ids": [1, 2, 7, 1, 2, 8, 9], "branch_ids": [1, 1, 1, 2, 2, 2, 2],
         "response_mask": [0, 0, 1, 0, 0, 1, 1]},
        {"input_ids": [3, 4, 5, 3, 6], "branch_ids": [1, 1, 1, 2, 2],
         "response_mask": [0, 1, 1, 0, 1]},
    ]
    shared = tfpack.data.preference_examples(pairs, max_length=8, share_prompt=True)
    assert _lists(shared) == [
        {"input_ids": [1, 2, 7, 2, 8, 9], "branch_ids": [0, 1, 1, 2, 2, 2],
         "response_mask": [0, 0, 1, 0, 1, 1]},
        # A one-token prompt: nothing shared, its token repeated in each branch.
        {"input_ids": [3, 4, 5, 3, 6], "branch_ids": [1, 1, 1, 2, 2],
         "response_mask": [0, 1, 1, 0, 1]},
    ]


def test_hand_computed_packs():
    pairs = [{"prompt": [1, 2], "chosen": [7], "rejected": [8, 9]},   # 7 tokens
             {"prompt": [3], "chosen": [4, 5], "rejected": [6]},      # 5 tokens
             {"prompt": [10], "chosen": [11], "rejected": [12]}]      # 4 tokens
    dataset = tfpack.data.preference_examples(
        pairs, max_length=12, reference={"chosen_log_likelihood": [-1.0, -2.0, -3.0],
                                         "rejected_log_likelihood": [-4.0, -5.0, -6.0]})
    assert tfpack.data.FeatureRoles.infer(dataset.element_spec).name == "preference"
    packs = _lists(dataset.apply(tfpack.data.pack(max_length=12, max_sequences_per_pack=2,
                                                  algorithm="ffd", shuffle=False)))
    # ffd on the pairs' lengths: 7 + 5 = 12, then 4 alone.
    assert packs[0] == {
        "input_ids": [1, 2, 7, 1, 2, 8, 9, 3, 4, 5, 3, 6],
        "branch_ids": [1, 1, 1, 2, 2, 2, 2, 1, 1, 1, 2, 2],
        "response_mask": [0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1],
        "sequence_ids": [1] * 7 + [2] * 5,
        "position_ids": list(range(7)) + list(range(5)),
        "cls_positions": [0, 7], "sequence_mask": [1.0, 1.0], "example_ids": [0, 1],
        "reference_chosen_log_likelihood": [-1.0, -2.0],
        "reference_rejected_log_likelihood": [-4.0, -5.0],
    }
    assert packs[1]["input_ids"] == [10, 11, 10, 12] + [0] * 8
    assert packs[1]["example_ids"] == [2, -1]
    assert packs[1]["reference_chosen_log_likelihood"] == [-3.0, 0.0]


def test_a_long_pair_loses_its_prompt_start_and_keeps_its_responses():
    pair = {"prompt": [1, 2, 3, 4, 5], "chosen": [7, 8], "rejected": [9]}
    # 2 * 5 + 2 + 1 = 13 > 9: the prompt keeps its last (9 - 3) // 2 = 3 tokens.
    (item,) = _lists(tfpack.data.preference_examples([pair], max_length=9))
    assert item["input_ids"] == [3, 4, 5, 7, 8, 3, 4, 5, 9]
    # Shared: 5 + 1 + 3 = 9 fits; at 8 the prompt keeps 4.
    (item,) = _lists(tfpack.data.preference_examples([pair], max_length=8, share_prompt=True))
    assert item["input_ids"] == [2, 3, 4, 5, 7, 8, 5, 9]
    with pytest.raises(TfpackError, match=r"Every pair must fit in max_length=9\. "
                                          r"Received: pair 0 of 13 tokens"):
        tfpack.data.preference_examples([pair], max_length=9, truncation="error")
    # Responses of 2 + 1 with at least one prompt token twice: 5 tokens at least.
    with pytest.raises(TfpackError, match="with its responses whole. Received: pair 1"):
        tfpack.data.preference_examples([pair, dict(pair, chosen=[7] * 3)], max_length=5)


def test_tokenizer_frames_prompt_and_responses_and_the_cut_keeps_the_start_ids():
    words = {"a": 5, "b": 6, "c": 7, "d": 8}
    tokenizer = tfpack.builders.text_tokenizer(
        lambda s: [words[w] for w in s.split()], start_ids=1, end_ids=2)
    pair = {"prompt": "a b c", "chosen": "d", "rejected": "a a"}
    (item,) = _lists(tfpack.data.preference_examples([pair], max_length=32, tokenizer=tokenizer))
    assert item["input_ids"] == [1, 5, 6, 7, 8, 2, 1, 5, 6, 7, 5, 5, 2]
    assert item["response_mask"] == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1]
    # max_length 11: the prompt keeps (11 - 5) // 2 = 3 tokens, <bos> first.
    (item,) = _lists(tfpack.data.preference_examples([pair], max_length=11, tokenizer=tokenizer))
    assert item["input_ids"] == [1, 6, 7, 8, 2, 1, 6, 7, 5, 5, 2]


def test_a_dataset_of_pairs_is_read_like_a_list():
    pairs = tf.data.Dataset.from_tensor_slices(
        {"prompt": [[1, 2]], "chosen": [[3, 4]], "rejected": [[5, 6]]})
    (item,) = _lists(tfpack.data.preference_examples(pairs, max_length=8))
    assert item["input_ids"] == [1, 2, 3, 4, 1, 2, 5, 6]


@pytest.mark.parametrize("pairs, kwargs, message", [
    ([], {}, r"`pairs` must be a non-empty list .* Received: no pairs"),
    ([{"prompt": [1], "chosen": [2]}], {}, r"Received: item 0"),
    ([{"prompt": [], "chosen": [2], "rejected": [3]}], {}, r"Every prompt must have at least"),
    ([{"prompt": [1], "chosen": [2], "rejected": []}], {}, r"Every rejected must have at least"),
    ([{"prompt": [1], "chosen": [2], "rejected": [3]}], {"max_length": 2},
     r"`max_length` must be an integer of at least 3. Received: max_length=2"),
    ([{"prompt": [1], "chosen": [2], "rejected": [3]}], {"truncation": "end"},
     r"`truncation` must be one of"),
    ([{"prompt": [1], "chosen": [2], "rejected": [3]}],
     {"reference": {"chosen_log_likelihood": [1.0, 2.0], "rejected_log_likelihood": [1.0]}},
     r"reference\['chosen_log_likelihood'\]` must hold one finite value per pair \(1\)"),
    ([{"prompt": [1], "chosen": [2], "rejected": [3]}], {"reference": {"x": 1}},
     r"`reference` must map 'chosen_log_likelihood'"),
])
def test_bad_input_gets_one_clear_error(pairs, kwargs, message):
    kwargs = {"max_length": 8, **kwargs}
    with pytest.raises(TfpackError, match=message):
        tfpack.data.preference_examples(pairs, **kwargs)


def _check_packs(packs, pairs, share_prompt):
    """Every pair in exactly one slot, its item whole, chosen then rejected recoverable."""
    seen = {}
    for pack in packs:
        for slot, index in enumerate(pack["example_ids"]):
            if index < 0:
                continue
            assert index not in seen, f"pair {index} packed twice"
            seen[index] = True
            tokens = np.asarray(pack["sequence_ids"]) == slot + 1
            ids = np.asarray(pack["input_ids"])[tokens]
            branch = np.asarray(pack["branch_ids"])[tokens]
            response = np.asarray(pack["response_mask"])[tokens]
            prompt, chosen, rejected = (pairs[index][k] for k in ("prompt", "chosen", "rejected"))
            # The branches come in order (shared prompt, chosen, rejected) ...
            assert (np.diff(branch) >= 0).all()
            # ... and give back the two sequences.
            shared = ids[branch == 0].tolist()
            assert shared + ids[branch == 1].tolist() == prompt + chosen
            assert shared + ids[branch == 2].tolist() == prompt + rejected
            assert ids[(branch == 1) & (response == 1)].tolist() == chosen
            assert ids[(branch == 2) & (response == 1)].tolist() == rejected
            assert len(ids) == pair_length(len(prompt), len(chosen), len(rejected), share_prompt)
    assert sorted(seen) == list(range(len(pairs)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lengths=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 5), st.integers(1, 5)),
                        min_size=1, max_size=12),
       share_prompt=st.booleans(),
       algorithm=st.sampled_from(["ffd", "lpfhp", "greedy"]),
       window=st.sampled_from([None, 4]))
def test_every_pair_lands_whole_in_exactly_one_pack(lengths, share_prompt, algorithm, window):
    counter = iter(range(1, 10_000))  # distinct tokens: any mix-up shows
    pairs = [{k: [next(counter) for _ in range(n)] for k, n in
              zip(("prompt", "chosen", "rejected"), sizes)} for sizes in lengths]
    L = 24
    dataset = tfpack.data.preference_examples(pairs, max_length=L, share_prompt=share_prompt)
    packs = _lists(dataset.apply(tfpack.data.pack(
        max_length=L, max_sequences_per_pack=3, algorithm=algorithm, window=window, seed=1)))
    _check_packs(packs, pairs, share_prompt)
