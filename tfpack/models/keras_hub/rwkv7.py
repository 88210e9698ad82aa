"""keras-hub RWKV-7, packed: the time-mix state and token shifts reset per sequence.

RWKV-7 has no attention. Each block's time mixing mixes every token with
the one before it (token shift) and runs a generalized delta rule whose
`[head, N, N]` state runs along the row; its channel mixing shifts tokens
too. Packed, a sequence's first token shifts in zeros, as it does alone,
and the rule's state is zeroed at its first token
(`tfpack.layers.recurrence.shift_within`, `generalized_delta_rule`); the
rule runs one token at a time, as keras-hub's own Keras implementation does,
so a row of `L` tokens costs `L` steps whatever the sequences in it. The
value of layer 0 that keras-hub hands to later layers (`v_first`) is per
token and needs nothing.

keras-hub's `RWKV7Backbone` returns logits (its `head` after the output
norm); the adapter returns the normed hidden states as `sequence_output` and
`logits(sequence_output)` applies the backbone's `head`.
"""

from keras import ops

from tfpack.layers.recurrence import generalized_delta_rule
from tfpack.layers.recurrence import isolate_in_sequences
from tfpack.layers.recurrence import segments_of
from tfpack.layers.recurrence import shift_within
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.base import register


def _lora(x, down, up, inner=None):
    x = ops.matmul(x, down)
    return ops.matmul(x if inner is None else inner(x), up)


def time_mix(att, x, v_first, segments):
    """keras-hub's `RWKV7TimeMix.call` (no cache, no padding), per sequence."""
    batch, length, channels = ops.shape(x)[0], x.shape[1], x.shape[2]
    heads = (batch, length, att.n_head, att.head_size)
    xx = shift_within(x, segments) - x
    xr, xw, xk, xv, xa, xg = (x + xx * m for m in (
        att.x_r, att.x_w, att.x_k, att.x_v, att.x_a, att.x_g))
    r = att.receptance(xr)
    w = -ops.softplus(-(att.w0 + _lora(xw, att.w1, att.w2, ops.tanh))) - 0.5
    k = att.key(xk)
    v = att.value(xv)
    if v_first is None or not att.add_v_first:
        v_first = v
    else:
        v = v + (v_first - v) * ops.sigmoid(att.v0 + _lora(xv, att.v1, att.v2))
    a = ops.sigmoid(att.a0 + _lora(xa, att.a1, att.a2))
    g = _lora(xg, att.g1, att.g2, ops.sigmoid)
    kk = ops.reshape(att.normalize(ops.reshape(k * att.k_k, heads)),
                     (batch, length, channels))
    k = k * (1 + (a - 1) * att.k_a)
    x = generalized_delta_rule(*(ops.reshape(t, heads) for t in (
        r, w, k, v, -kk, kk * a)), segments)
    x = ops.reshape(att.ln_x(ops.reshape(x, (-1, channels))),
                    (batch, length, channels))
    bonus = ops.sum(ops.reshape(r, heads) * ops.reshape(k, heads) * att.r_k,
                    axis=-1, keepdims=True) * ops.reshape(v, heads)
    x = x + ops.reshape(bonus, (batch, length, channels))
    return att.output_layer(x * g), v_first


def channel_mix(ffn, x, segments):
    """keras-hub's `RWKV7ChannelMix.call` (no cache), per sequence."""
    k = x + (shift_within(x, segments) - x) * ffn.x_k
    return ffn.value(ops.relu(ffn.key(k)) ** 2)


def rwkv_block(layer, x, v_first, segments):
    """keras-hub's `RWKV7_Block.call`: `(x, v_first)`."""
    if layer.use_initial_norm:
        x = layer.ln0(x)
    mixed, v_first = time_mix(layer.att, layer.ln1(x), v_first, segments)
    x = ops.cast(x, mixed.dtype) + mixed
    return x + channel_mix(layer.ffn, layer.ln2(x), segments), v_first


@register
class KerasHubRWKV7(KerasHubCausalBackbone):
    """A keras-hub RWKV-7 backbone that reads packed features.

    Built by `tfpack.models.from_keras_hub`; see `KerasHubBackbone` and the
    module docstring.

    Example:

    >>> import keras_hub
    >>> from tfpack.models.keras_hub.base import example_pack
    >>> backbone = keras_hub.models.RWKV7Backbone(
    ...     hidden_size=8, head_size=4, num_layers=2, vocabulary_size=30,
    ...     intermediate_dim=16, gate_lora=4, mv_lora=4, aaa_lora=4,
    ...     decay_lora=4)
    >>> decoder = KerasHubRWKV7(backbone)
    >>> out = decoder(example_pack())
    >>> out["sequence_output"].shape, decoder.logits(out["sequence_output"]).shape
    (TensorShape([1, 5, 8]), TensorShape([1, 5, 30]))

    Args:
        backbone: a keras-hub `RWKV7Backbone`.
        **kwargs: passed on to `KerasHubBackbone` (RWKV-7 has no attention:
            the implementation options change nothing).

    Call arguments and returns: those of `KerasHubBackbone`;
    `sequence_output` is the hidden states after the output norm, before
    keras-hub's `head`.
    """

    flash_kernel = False  # its flash path is not checked

    backbone_names = ("RWKV7Backbone",)

    @property
    def hidden_dim(self):
        return self.backbone.hidden_size

    def logits(self, sequence_output):
        """Next-token logits `[B, L, vocabulary_size]`: the backbone's
        `head`, float32."""
        return ops.cast(self.backbone.head(sequence_output), "float32")

    def layers(self):
        return list(self.backbone.rwkv_layers)

    @property
    def keras_hub_output_layer(self):
        """The keras-hub layer whose output is `sequence_output` (the
        backbone itself returns logits): what the exactness check compares."""
        return self.backbone.output_layer_norm

    def extras(self, context, x):
        # `v_first` (layer 0's values) is handed from block to block.
        return {"segments": segments_of(context.sequence_ids),
                "v_first": [None]}

    def block(self, layer, x, context):
        # Dense: `forward` isolates each block under the causal packed mask,
        # which bounds what a block mixes (earlier tokens of its sequence);
        # without that mask (segmented), the block is isolated per sequence.
        carried, segments = context.extras["v_first"], context.extras["segments"]
        clean, show = (x, lambda out: out) if context.mask is not None \
            else isolate_in_sequences(x, segments)
        x, carried[0] = rwkv_block(layer, clean, carried[0], segments)
        return show(self.backbone.dropout(x, training=context.training))

    def final_norm(self, x, context):
        return self.backbone.output_layer_norm(x)
