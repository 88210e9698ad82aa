"""from_keras_hub on subclasses of adapted classes, the keras-hub version check,
and the mixture-of-experts router loss (real tokens only).

Adapters are built with `check_exact=False`: the run-time check of every
family, dense and segmented, is in test_keras_hub_exactness.py, and of a
user's subclass there and in tests/faults/test_keras_hub.py.
"""

import warnings
from unittest import mock

import numpy as np
import pytest

from keras_hub_helpers import MAX_LENGTH, examples, keras_hub, make_backbone
from tfpack.models import from_keras_hub
from tfpack.models.keras_hub import KerasHubDecoder, KerasHubGemma
from tfpack.models.keras_hub import base
from tfpack.testing import pack_examples


def test_subclasses_of_adapted_classes_are_adapted():
    # keras-hub's own (Llama3Backbone is a LlamaBackbone) and a user's.
    assert isinstance(from_keras_hub(make_backbone("llama3"), check_exact=False),
                      KerasHubDecoder)

    class MyGemma(keras_hub.models.Gemma3Backbone):
        pass

    backbone = MyGemma(**make_backbone("gemma3").get_config())
    assert isinstance(from_keras_hub(backbone, check_exact=False), KerasHubGemma)
    assert KerasHubGemma.match(backbone) == 1
    assert KerasHubDecoder.match(backbone) is None


def test_the_closest_adapted_class_wins():
    # An adapter for a subclass is chosen over its parent's.
    class Llama3Adapter(KerasHubDecoder):
        backbone_names = ("Llama3Backbone",)

    backbone = make_backbone("llama3")
    assert (Llama3Adapter.match(backbone), KerasHubDecoder.match(backbone)) \
        == (0, 1)
    with mock.patch.object(base, "_ADAPTERS", [KerasHubDecoder]):
        base.register(Llama3Adapter)  # One module and a decorator.
        assert type(from_keras_hub(backbone, check_exact=False)) is Llama3Adapter
        assert type(from_keras_hub(make_backbone("llama"), check_exact=False)
                    ) is KerasHubDecoder


def test_adapters_register_themselves_and_claim_names_once():
    from tfpack.models import keras_hub as adapters

    assert KerasHubDecoder in base.adapters()
    assert len(adapters.supported_backbones()) == len(set(
        adapters.supported_backbones()))

    class SecondLlama(KerasHubDecoder):
        backbone_names = ("LlamaBackbone",)

    with pytest.raises(ValueError, match=r"SecondLlama and KerasHubDecoder "
                                         r"both adapt \['LlamaBackbone'\]"):
        base.register(SecondLlama)
    assert SecondLlama not in base.adapters()


def test_untested_keras_hub_version_warns_once():
    backbone = make_backbone("llama")
    with mock.patch.object(keras_hub, "__version__", "0.0.1"), \
            mock.patch.object(base, "_warned_versions", set()):
        with pytest.warns(UserWarning, match=r"tested with keras-hub 0\.32"
                                              r".*this is keras-hub 0\.0\.1"):
            from_keras_hub(backbone, check_exact=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            from_keras_hub(backbone, check_exact=False)
    with warnings.catch_warnings():  # The tested version: silent.
        warnings.simplefilter("error")
        from_keras_hub(backbone, check_exact=False)


def _router_loss(adapter, packed):
    adapter(packed, training=True)
    return float(sum(np.asarray(loss) for loss in adapter.losses))


@pytest.mark.parametrize("family", ["mixtral", "qwen_moe", "qwen3_moe"])
def test_router_loss_counts_real_tokens_only(family):
    # The load-balancing loss is a statistic of the batch's real tokens:
    # the same sequences packed, one per row, or with more padding give the
    # same loss (routing is per token, so the router logits are the same).
    adapter = from_keras_hub(make_backbone(family), check_exact=False)
    data = examples(family)
    packed = _router_loss(adapter, pack_examples(data, MAX_LENGTH))
    alone = _router_loss(adapter, pack_examples(
        data, MAX_LENGTH, packs=[[i] for i in range(len(data))]))
    padded = _router_loss(adapter, pack_examples(data, 2 * MAX_LENGTH))
    assert packed > 0
    np.testing.assert_allclose([alone, padded], packed, rtol=1e-5)
    adapter(pack_examples(data, MAX_LENGTH), training=False)
    assert not adapter.losses  # Only when training.


def test_phi3_su_angles_are_each_sequences_own():
    # Rotating a pack per token equals keras-hub's rotary layer on each
    # sequence alone: absolute angles from restarted positions, and the
    # long factor only for the sequences longer than 4 (5, 7 and 6 tokens).
    from tfpack.models.keras_hub.phi3 import sequence_lengths, su_rotate

    backbone = make_backbone("phi3_su")
    rope = backbone.transformer_layers[0].attention.rotary_embedding_layer
    packed = pack_examples(examples("phi3_su"), MAX_LENGTH,
                           packs=[[0, 1, 2], [3, 4]])
    x = np.random.default_rng(0).normal(size=(2, MAX_LENGTH, 2, 4)).astype(
        "float32")
    rotated = np.asarray(su_rotate(rope, x, packed["position_ids"],
                                   sequence_lengths(packed["sequence_ids"])))
    checked = set()
    for row, ids in enumerate(packed["sequence_ids"]):
        for sequence in range(1, ids.max() + 1):
            tokens = ids == sequence
            alone = np.asarray(rope(x[row][tokens][None]))[0]
            np.testing.assert_allclose(rotated[row][tokens], alone,
                                       rtol=0, atol=1e-5)
            checked.add(int(tokens.sum()))
    assert checked == {5, 3, 7, 2, 6}


@pytest.mark.parametrize("family", ["gpt_oss", "gemma4", "bloom", "falcon",
                                    "deberta_v3", "xlnet"])
def test_auto_picks_segmented_for_the_families_that_ran_dense(family):
    # Sinks, local/global layers, ALiBi, relative buckets and XLNet's
    # relative attention all run in the segmented rows now.
    adapter = from_keras_hub(make_backbone(family), max_sequences_per_pack=16,
                             segment_length=256, check_exact=False)
    assert adapter.implementation(2048) == "segmented"
    assert adapter.implementation(512) == "dense"


def test_smollm3_angles_are_each_sequences_own():
    # SmolLM3's own rotary tables at restarted positions: rotating a pack
    # equals keras-hub's rotary embedding of each sequence alone.
    from keras_hub.src.models.smollm3.smollm3_utils import (
        apply_rotary_pos_single)
    from tfpack.models.keras_hub.smollm3 import rotate

    attention = make_backbone("smollm3").transformer_layers[0].self_attn
    packed = pack_examples(examples("smollm3"), MAX_LENGTH,
                           packs=[[0, 1, 2], [3, 4]])
    x = np.random.default_rng(0).normal(size=(2, MAX_LENGTH, 2, 4)).astype(
        "float32")
    rotated = np.asarray(rotate(attention, x, packed["position_ids"]))
    for row, ids in enumerate(packed["sequence_ids"]):
        for sequence in range(1, ids.max() + 1):
            alone = x[row][ids == sequence][None]
            cos, sin = attention.rotary_embedding(alone)
            np.testing.assert_allclose(
                rotated[row][ids == sequence],
                np.asarray(apply_rotary_pos_single(alone, cos, sin, 2))[0],
                rtol=0, atol=1e-5)
