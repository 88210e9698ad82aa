"""Shared prompts under `attention_implementation="auto"`: the layers are
handed the branch mask, so they run it dense wherever the rule would skip
cross-sequence work (before, a rule choosing segmented or flash refused
`share_prompt=True`: a CPU at L >= 512, a GPU at L >= 4,096)."""

import numpy as np

from tfpack.layers import attention_implementation
from tfpack.models import PreferenceModel

from preference_helpers import (LOSS_OPTIONS, MAX_LENGTH, close, decoder_policy, items, make_pairs, pack,
                                per_pair, reference_scores, with_reference)


def test_auto_runs_shared_prompts_where_the_rule_would_segment(monkeypatch):
    # The rule picks segmented at this small L (thresholds lowered).
    monkeypatch.setitem(attention_implementation.MIN_LENGTH, "tensorflow", 1)
    monkeypatch.setitem(attention_implementation.MIN_WORK_RATIO, "tensorflow", 0.0)
    auto = decoder_policy(attention_implementation="auto", max_sequences_per_pack=6)
    assert auto.backbone.transformer_layers[0].attention.implementation_for(MAX_LENGTH) == "segmented"
    dense = decoder_policy(attention_implementation="dense")
    dense.set_weights(auto.get_weights())
    pairs, packs = make_pairs(seed=3), [[4, 1, 6], [2, 0], [5], [3]]
    batch = pack(with_reference(items(pairs, share_prompt=True), reference_scores()), packs,
                 max_pairs=3)
    outputs = [per_pair(PreferenceModel(policy, "precomputed", loss="sigmoid",
                                        share_prompt=True, **LOSS_OPTIONS)(batch),
                        packs, len(pairs)) for policy in (auto, dense)]
    for name in outputs[1]:
        assert np.isfinite(outputs[0][name]).all(), name
        assert close(outputs[0][name], outputs[1][name]), name
