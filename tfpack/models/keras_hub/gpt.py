"""keras-hub GPT-2 and OPT decoders, packed.

Both stack keras-hub `TransformerDecoder` layers (pre-norm, no cross
attention) on learned position embeddings, and end in a layer norm. Packing
changes two things (seed 002): the `PositionEmbedding` looks positions up by
`position_ids`, which restart for every sequence, and self-attention gets
the causal block-diagonal mask of `sequence_ids` instead of keras-hub's
causal padding mask. A `TransformerDecoder` without cross attention runs the
same steps as a `TransformerEncoder`, so the blocks are the encoders'
`encoder_block` (and its segmented attention, causal here).
"""

from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import register
from tfpack.models.keras_hub.encoders import encoder_block


@register
class KerasHubGPT(KerasHubCausalBackbone):
    """A keras-hub GPT-2 or OPT backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and
    `KerasHubCausalBackbone` (`logits`: the tied output projection).

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.GPT2Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> decoder = KerasHubGPT(backbone)
    >>> decoder(example_pack())["sequence_output"].shape
    TensorShape([1, 5, 8])

    Args:
        backbone: a keras-hub `GPT2Backbone` or `OPTBackbone`.
        **kwargs: passed on to `KerasHubBackbone`, including
            `attention_implementation` (`"segmented"` stays causal inside
            each sequence), `max_sequences_per_pack` and `segment_length`.

    Call arguments and returns: those of `KerasHubBackbone`.
    """

    backbone_names = ("GPT2Backbone", "OPTBackbone")
    family = "gpt"

    def embed(self, context):
        """keras-hub's token plus learned position embeddings, per token."""
        b = self.backbone
        input_ids, position_ids = context.input_ids, context.position_ids
        if hasattr(b, "embeddings"):  # OPT: one TokenAndPositionEmbedding.
            return b.embeddings(input_ids, positions=position_ids)
        tokens = b.token_embedding(input_ids)
        x = b.embeddings_add(
            (tokens, b.position_embedding(tokens, positions=position_ids)))
        return b.embeddings_dropout(x, training=context.training)

    def block(self, layer, x, context):
        return encoder_block(layer, x, context)

    def final_norm(self, x, context):
        return self.backbone.layer_norm(x)
