"""Back to keras-hub after packed training: keras-hub's own CausalLM generates with the
packed-trained backbone, directly and after a `.keras` round trip of the tfpack model.

Text -> the model's tokenizer (trained here on stdlib docstrings) -> packed causal-LM
examples -> `from_keras_hub` -> a few `fit` steps -> `Llama3CausalLM` / `Gemma3CausalLM`
built on the same backbone object: its logits are the packed model's on each
sequence, and its greedy `generate` continues a prompt with the tokens the packed
model predicts.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfpack
from tfpack import models

import tokenizer_helpers as th

keras_hub = th.keras_hub

L, K = 32, 4
NEW_TOKENS = 5
_DECODER = dict(num_layers=1, num_query_heads=2, num_key_value_heads=1, hidden_dim=16,
                intermediate_dim=32)


def _llama3(vocabulary_size):
    return keras_hub.models.Llama3Backbone(vocabulary_size=vocabulary_size, **_DECODER)


def _gemma3(vocabulary_size):
    return keras_hub.models.Gemma3Backbone(
        vocabulary_size=vocabulary_size, head_dim=8, image_size=16, vision_encoder=None,
        use_sliding_window_attention=True, sliding_window_size=4, **_DECODER)


# family: (tokenizer, backbone, keras-hub task, its preprocessor)
FAMILIES = {
    "gemma3": (th.gemma3_tokenizer, _gemma3, "Gemma3CausalLM", "Gemma3CausalLMPreprocessor"),
    "llama3": (th.llama3_tokenizer, _llama3, "Llama3CausalLM", "Llama3CausalLMPreprocessor"),
}


def _packed_logits(model, ids, other=(3, 1, 4, 1, 5, 9, 2)):
    """The tfpack model's logits of `ids`, packed after another sequence."""
    packed = tfpack.testing.pack_examples([{"input_ids": list(other)}, {"input_ids": ids}],
                                          L, packs=[[0, 1]], max_sequences_per_pack=K)
    logits = np.asarray(model({k: v for k, v in packed.items() if k != "labels"})["logits"])
    return logits[0, len(other):len(other) + len(ids)]


def _keras_hub_logits(causal_lm, ids):
    out = causal_lm({"token_ids": np.asarray([ids], "int32"),
                     "padding_mask": np.ones((1, len(ids)), "int32")})
    return np.asarray(out)[0]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_keras_hub_generates_with_the_packed_trained_backbone(family, tmp_path):
    make_tokenizer, make_backbone, task, preprocessor_class = FAMILIES[family]
    tokenizer = make_tokenizer()
    keras.utils.set_random_seed(0)
    backbone = make_backbone(tokenizer.vocabulary_size())
    adapter = models.from_keras_hub(backbone)  # Llama 3: a LlamaBackbone subclass
    texts = list(th.sentences()[:48])
    pieces = tfpack.builders.causal_lm_examples(texts, max_length=L, tokenizer=tokenizer,
                                            min_length=2)
    packs = pieces.apply(tfpack.data.pack(max_length=L, max_sequences_per_pack=K,
                                          algorithm="ffd", seed=0))
    model = models.CausalLM(adapter)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    before = [np.array(w) for w in backbone.weights]
    model.fit(packs.batch(4, drop_remainder=True).take(3), epochs=1, verbose=0)
    changed = [not np.array_equal(b, np.asarray(w)) for b, w in zip(before, backbone.weights)]
    assert all(changed), "packed training must train every backbone variable"

    preprocessor = getattr(keras_hub.models, preprocessor_class)(tokenizer,
                                                                  sequence_length=L)
    causal_lm = getattr(keras_hub.models, task)(backbone=backbone, preprocessor=preprocessor)
    causal_lm.compile(sampler="greedy", jit_compile=False)
    sequence = next(iter(pieces))["input_ids"].numpy().tolist()[:20]
    # keras-hub's forward pass is the packed model's on the same sequence.
    np.testing.assert_allclose(_keras_hub_logits(causal_lm, sequence),
                               _packed_logits(model, sequence), rtol=0, atol=2e-5)

    # Greedy generation from a prompt: the tokens the packed model predicts.
    prompt = sequence[:6]
    expected = list(prompt)
    for _ in range(NEW_TOKENS):
        expected.append(int(_packed_logits(model, expected)[-1].argmax()))
    length = len(prompt) + NEW_TOKENS
    token_ids = np.zeros((1, length), "int32")
    token_ids[0, :len(prompt)] = prompt
    padding_mask = (np.arange(length) < len(prompt))[None].astype("int32")
    # The generation step behind `generate`, on ids (keras-hub 0.32's text-only Gemma 3
    # `generate` without a preprocessor fails normalizing its `images: None` output).
    generated = causal_lm.generate_step({"token_ids": token_ids, "padding_mask": padding_mask},
                                        stop_token_ids=None)
    assert np.asarray(generated["token_ids"])[0].tolist() == expected

    # A .keras file of the packed model: keras-hub rebuilds on its backbone.
    path = str(tmp_path / f"{family}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    restored = getattr(keras_hub.models, task)(backbone=loaded.backbone.backbone,
                                               preprocessor=preprocessor)
    np.testing.assert_allclose(_keras_hub_logits(restored, sequence),
                               _keras_hub_logits(causal_lm, sequence), rtol=0, atol=1e-6)
    restored.compile(sampler="greedy", jit_compile=False)
    text = restored.generate([th.sentences()[0][:20]], max_length=L)
    assert isinstance(text[0], str) and text[0].startswith(th.sentences()[0][:20].strip()[:5])
