"""Fault injection, preference pairs: careless input to the builder, the model and predict."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tfpack
from tests.faults.campaign import campaign
from tests.faults.outcomes import HELD, judge_call

PAIR = {"prompt": [1, 2], "chosen": [3], "rejected": [4, 5]}


@pytest.mark.parametrize("pairs, kwargs, match", [
    ("prompt chosen rejected", {}, "`pairs` must be a list"),
    ({"prompt": [1], "chosen": [2], "rejected": [3]}, {}, "`pairs` must be a list"),
    ([PAIR, ("a", "b", "c")], {}, "item 1"),
    ([PAIR, dict(PAIR, chosen=[])], {}, "Every chosen must have at least one token"),
    ([dict(PAIR, chosen=[3] * 40)], {"max_length": 16}, "pair 0 of"),
    ([PAIR], {"max_length": 16, "reference": {"chosen_log_likelihood": [np.nan],
                                             "rejected_log_likelihood": [-1.0]}}, "finite"),
    ([PAIR], {"max_length": 16, "reference": [1.0, 2.0]}, "`reference` must map"),
    ([PAIR], {"max_length": "16"}, "`max_length` must be an integer"),
    ([PAIR], {"max_length": 16, "truncation": None}, "`truncation` must be one of"),
    ([{"prompt": "some words", "chosen": [3], "rejected": [4]}],
     {"max_length": 16, "tokenizer": 42}, "`tokenizer` must be"),
])
def test_bad_pairs_are_refused_in_one_line(pairs, kwargs, match):
    kwargs = {"max_length": 16, **kwargs}
    verdict = judge_call(lambda: tfpack.builders.preference_examples(pairs, **kwargs),
                         refuse=True, match=match)
    assert verdict.outcome == HELD, verdict


def test_predict_without_the_reference_a_loss_needs_is_refused():
    policy = tfpack.models.CausalLM(tfpack.models.DecoderBackbone(
        vocabulary_size=20, num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16))
    model = tfpack.models.PreferenceModel(policy, "precomputed", loss="ipo")
    examples = tfpack.builders.preference_examples([PAIR], max_length=16)
    verdict = judge_call(lambda: tfpack.predict(model, examples, max_length=16,
                                                max_sequences_per_pack=2, jit_compile=False),
                         refuse=True, match="reference_chosen_log_likelihood")
    assert verdict.outcome == HELD, verdict


@campaign(25)
@given(prompt=st.integers(0, 12), chosen=st.integers(0, 12), rejected=st.integers(0, 12),
       max_length=st.integers(3, 24), share=st.booleans(),
       truncation=st.sampled_from(["prompt_start", "error"]))
def test_any_pair_fits_whole_or_is_refused_in_one_line(prompt, chosen, rejected, max_length,
                                                        share, truncation):
    pair = {"prompt": list(range(1, prompt + 1)), "chosen": list(range(50, 50 + chosen)),
            "rejected": list(range(80, 80 + rejected))}

    def check(dataset):
        (item,) = [{k: v.numpy().tolist() for k, v in x.items()} for x in dataset]
        ids, branch = np.array(item["input_ids"]), np.array(item["branch_ids"])
        # Fits, keeps both responses whole, and keeps the prompt's end.
        return (len(ids) <= max_length
                and ids[(branch == 1) & (np.array(item["response_mask"]) == 1)].tolist()
                == pair["chosen"]
                and ids[(branch == 2) & (np.array(item["response_mask"]) == 1)].tolist()
                == pair["rejected"] and ids[branch == 2][0 if share else -rejected - 1]
                == prompt)

    fits = (prompt + 1 if share else 2 * prompt) + chosen + rejected <= max_length
    possible = prompt and chosen and rejected and (
        fits or (truncation == "prompt_start"
                 and 2 + chosen + rejected <= max_length))  # a one-token prompt costs 2
    verdict = judge_call(lambda: tfpack.builders.preference_examples(
        [pair], max_length=max_length, share_prompt=share, truncation=truncation)
        if max_length >= 3 else None, refuse=not possible, check=check)
    assert verdict.outcome == HELD, verdict
