import keras
import pytest
from keras import ops

from tfpack.errors import TfpackError
from tfpack.models import BertEncoder
from tfpack.testing import assert_no_cross_contamination
from tfpack.testing import assert_packed_equals_unpacked
from tfpack.testing import pack_examples

EXAMPLES = [{"input_ids": ids} for ids in ([3, 4, 5], [6, 7], [8, 9, 10, 11])]


class LeakyModel(keras.Model):
    """Deliberately broken: every token sees the mean of the whole pack."""

    vocabulary_size = 20

    def __init__(self):
        super().__init__()
        self.embedding = keras.layers.Embedding(20, 4)

    def call(self, inputs, training=None):
        x = self.embedding(inputs["input_ids"])
        return {"hidden": x + ops.mean(x, axis=1, keepdims=True)}


class BlindModel(keras.Model):
    """Ignores its tokens: proves nothing, must not pass silently."""

    def call(self, inputs, training=None):
        return {"hidden": ops.cast(inputs["sequence_ids"], "float32")}


def _encoder(**kwargs):
    return BertEncoder(vocabulary_size=20, num_layers=1, hidden_dim=8,
                       num_heads=2, intermediate_dim=16, **kwargs)


def test_clean_encoder_passes_both_checks():
    packed = pack_examples(EXAMPLES, max_length=6)
    result = assert_no_cross_contamination(_encoder(), packed)
    assert result.max_output_difference["sequence_output"] <= 1e-5
    result = assert_packed_equals_unpacked(_encoder(), EXAMPLES, max_length=7)
    assert result.sequences_checked == 3 and result.max_loss_difference is None


def test_catches_a_leaky_user_model():
    packed = pack_examples(EXAMPLES, max_length=6)
    with pytest.raises(AssertionError, match=r"Cross-contamination: .* output "
                                             r"'hidden' of sequence"):
        assert_no_cross_contamination(LeakyModel(), packed,
                                      output_kinds={"hidden": "token"})
    with pytest.raises(AssertionError, match="Packed and unpacked differ"):
        assert_packed_equals_unpacked(LeakyModel(), EXAMPLES, max_length=6)


def test_catches_the_mask_ablation_at_float32_tolerance():
    packed = pack_examples(EXAMPLES, max_length=6)
    with pytest.raises(AssertionError, match="Cross-contamination"):
        assert_no_cross_contamination(_encoder(block_diagonal_mask=False),
                                      packed)


def test_model_that_ignores_tokens_is_inconclusive():
    packed = pack_examples(EXAMPLES, max_length=6)
    with pytest.raises(AssertionError, match="Inconclusive"):
        assert_no_cross_contamination(BlindModel(), packed,
                                      vocabulary_size=20)


def test_input_errors():
    single = pack_examples(EXAMPLES[:1], max_length=6)
    with pytest.raises(TfpackError, match="at least two sequences"):
        assert_no_cross_contamination(_encoder(), single)
    # L == K == 3: the output kind of a [B, 3, ...] output is ambiguous.
    ambiguous = pack_examples([{"input_ids": [1]}, {"input_ids": [2]},
                               {"input_ids": [3]}], max_length=3)
    with pytest.raises(TfpackError, match="pass `output_kinds`"):
        assert_no_cross_contamination(LeakyModel(), ambiguous)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_catches_a_leak_in_small_untrained_logits(seed):
    # Without the mask, an untrained classifier's logits (of order 1e-2) move by
    # only 2e-6..1.5e-5 when another sequence changes: an absolute tolerance of
    # 1e-5 misses some seeds, the scale-relative default catches every one.
    import keras

    from tfpack.models import BertClassifier

    keras.utils.set_random_seed(seed)
    model = BertClassifier(_encoder(block_diagonal_mask=False), num_classes=3)
    with pytest.raises(AssertionError, match="Cross-contamination: .* output 'logits'"):
        assert_no_cross_contamination(model, pack_examples(EXAMPLES, max_length=6))


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_packed_equals_unpacked_catches_small_scale_mask_ablation(seed):
    # The same small-logits leak, seen as packed != unpacked (2.7e-6..1.3e-5).
    import keras

    from tfpack.models import BertClassifier

    keras.utils.set_random_seed(seed)
    model = BertClassifier(_encoder(block_diagonal_mask=False), num_classes=3)
    examples = [dict(e, labels=1) for e in EXAMPLES]
    with pytest.raises(AssertionError, match="Packed and unpacked differ: output 'logits'"):
        assert_packed_equals_unpacked(model, examples, max_length=8)
