"""What every keras-hub adapter shares: the wrapped backbone, its config, its mask.

An adapter holds a keras-hub backbone and runs that backbone's own layers in
its own forward pass, so it owns no variables: `adapter.weights` are the
backbone's variable objects, and training either one trains both. It reads
the packed features of DESIGN.md instead of keras-hub's padding mask.
"""

import dataclasses
import warnings

import keras
import numpy as np
from keras import ops

from tfpack.errors import TfpackError
from tfpack.layers.attention_implementation import choose_implementation
from tfpack.layers.attention_implementation import default_device
from tfpack.layers.attention_implementation import IMPLEMENTATION_PARAMETERS
from tfpack.layers.attention_implementation import validate_implementation
from tfpack.layers.attention_mask import PackedAttentionMask
from tfpack.layers.attention_mask import isolate_tokens
from tfpack.layers.packed_attention import flash
from tfpack.layers.segmented_attention import attend_in_rows
from tfpack.models.keras_hub import internals
from tfpack.models.keras_hub.declarations import TESTED_KERAS_HUB_VERSIONS
from tfpack.params import Anything, Boolean, validate_params
from tfpack.models.backbone import Backbone


# The adapters read keras-hub layers' internals, so a release other than
# TESTED_KERAS_HUB_VERSIONS warns once (and one that renamed a name they
# read is refused, `internals.check`).
_warned_versions = set()
# The adapters `from_keras_hub` chooses from, in registration order.
_ADAPTERS = []


def register(cls):
    """Class decorator: `cls` (a `KerasHubBackbone`) adapts its
    `backbone_names` in `from_keras_hub`, and is Keras-serializable under
    the package name "tfpack".

    An adapter is one module with this decorator, imported by
    `tfpack.models.keras_hub`; no list is edited.

    Example:

    >>> import tfpack.models.keras_hub
    >>> "KerasHubDecoder" in [cls.__name__ for cls in adapters()]
    True

    Raises:
        ValueError: another registered adapter claims one of the names.
    """
    for other in _ADAPTERS:
        shared = set(other.backbone_names) & set(cls.backbone_names)
        if other is not cls and shared:
            raise ValueError(
                f"{cls.__name__} and {other.__name__} both adapt "
                f"{sorted(shared)}")
    if cls not in _ADAPTERS:
        _ADAPTERS.append(cls)
    return keras.saving.register_keras_serializable(package="tfpack")(cls)


def adapters():
    """The registered adapter classes, in registration order."""
    return tuple(_ADAPTERS)


def backbone_classes(names):
    """The `keras_hub.models` classes of `names` that this keras-hub has
    (imports keras-hub)."""
    import keras_hub

    return tuple(getattr(keras_hub.models, name) for name in names
                 if hasattr(keras_hub.models, name))


def warn_untested_version():
    """Warns once per process if keras-hub is not a tested release."""
    import keras_hub

    version = keras_hub.__version__
    if version in TESTED_KERAS_HUB_VERSIONS or version in _warned_versions:
        return
    _warned_versions.add(version)
    warnings.warn(
        f"tfpack's keras-hub adapters were tested with keras-hub "
        f"{', '.join(TESTED_KERAS_HUB_VERSIONS)}; this is keras-hub "
        f"{version}. They read keras-hub's layers, so check packed == "
        "unpacked on your model (tfpack.testing).", stacklevel=3)



def attend_segmented(query, key, value, options, *, scale=1.0,
                     dropout_layer=None, training=None, **extras):
    """The adapters' one segmented attention call.

    `query` `[B, L, heads, d]` is multiplied by the layer's `scale` here;
    `options` are `KerasHubBackbone.segmented_options` (the layer's window
    included); `dropout_layer` is the layer's attention-probability
    `keras.layers.Dropout` (its rate and seed generator), if any; `extras`
    go to `tfpack.layers.segmented_attention.attend_in_rows`
    (`logit_soft_cap`, `sinks`, `bias`, `row_features`).
    """
    query = query * ops.cast(scale, query.dtype)
    return attend_in_rows(
        query, key, value, dropout=getattr(dropout_layer, "rate", 0.0) or 0.0,
        training=training,
        seed_generator=getattr(dropout_layer, "seed_generator", None),
        **options, **extras)


def attend(context, project, dense, *, scale=1.0, dropout_layer=None,
           **extras):
    """One layer's attention in the implementation `context` chose: THE
    dispatch every family calls (a new implementation is added here).

    `dense(mask)` is the family's dense attention (keras-hub's own, or its
    steps written out) under the layer's boolean `[B, L, L]` packed mask
    `context.mask`; `project()` gives the layer's `(query, key, value)`
    `[B, L, heads, d]` (keys and values may have fewer heads), rotated,
    which segmented attention (`attend_segmented`, with the layer's
    `scale`, attention-probability `dropout_layer` and `extras`) runs on
    in rows of `context.options`.

    >>> import numpy as np
    >>> context = Context(None, None, None, None, None, mask="m")
    >>> attend(context, project=None, dense=lambda mask: mask)
    'm'
    """
    if context.options is None:
        return dense(context.mask)
    query, key, value = project()
    if context.implementation == "flash":
        return attend_flash(query, key, value, context.options, scale=scale,
                            dropout_layer=dropout_layer,
                            training=context.training, **extras)
    extras.pop("alibi_slopes", None)  # the segmented rows take `bias`
    return attend_segmented(query, key, value, context.options, scale=scale,
                            dropout_layer=dropout_layer,
                            training=context.training, **extras)


def attend_flash(query, key, value, options, *, scale=1.0, dropout_layer=None,
                 training=None, logit_soft_cap=None, sinks=None, bias=None,
                 row_features=None, alibi_slopes=None):
    """The adapters' one flash attention call (`tfpack.layers.flash_attention`).

    Takes what `attend_segmented` takes: soft caps and sink logits run in
    the kernel, and ALiBi where the family gives its `alibi_slopes`; any
    other per-row `bias` (DeBERTa's and XLNet's relative positions) and
    active attention dropout are refused by name.
    """
    del row_features  # read by `bias` only
    if bias is not None and alibi_slopes is None:
        raise TfpackError(
            "`attention_implementation='flash'` runs ALiBi, soft caps and "
            "sink logits in its kernel, not this family's per-row attention "
            "bias (relative positions); use 'segmented'. Received: a `bias` "
            "callable without `alibi_slopes`")
    rate = getattr(dropout_layer, "rate", 0.0) or 0.0
    query = query * ops.cast(scale, query.dtype)
    return flash(query, key, value, sequence_ids=options["sequence_ids"],
                 causal=options["causal"], window=options["window"],
                 logit_soft_cap=logit_soft_cap, sinks=sinks,
                 alibi_slopes=alibi_slopes, dropout=rate if training else 0.0)


def example_pack():
    """A pack of two sequences of 2 tokens and one padding token, for the
    adapters' examples.

    >>> example_pack()["sequence_ids"].tolist()
    [[1, 1, 2, 2, 0]]
    """
    return {"input_ids": np.array([[5, 6, 7, 8, 0]]),
            "sequence_ids": np.array([[1, 1, 2, 2, 0]]),
            "position_ids": np.array([[0, 1, 0, 1, 0]])}


def isolated(x, mask):
    """`(clean_x, show)` around one dense layer of an adapter (`isolate_tokens`).

    keras-hub's attention adds its mask to the scores, so a NaN key would
    reach every query of the pack (NaN + -1e9 is NaN). The adapters run each
    layer on `clean_x` and pass its output through `show`: a non-finite
    token then reaches only the tokens `mask` (the boolean `[B, L, L]`
    packed mask the layer's window narrows, if any) lets see it, and those
    outputs are NaN. With `mask` None (segmented attention, which isolates
    inside its rows) both are the identity.
    """
    if mask is None:
        return x, lambda output: output
    return isolate_tokens(x, mask)


@dataclasses.dataclass(frozen=True)
class Context:
    """What one call of `KerasHubBackbone.forward` gives each hook.

    `input_ids`, `sequence_ids`, `position_ids` are the int32 packed
    features (`inputs` the whole dict, e.g. for `token_type_ids`);
    `training` the call's flag; `segmented` whether the call runs
    segmented attention; `mask` the layer's boolean `[B, L, L]` packed mask
    (dense; its window applied by `dense_mask`) or None; `options` the
    layer's `segmented_options` (segmented) or None; `extras` the family's
    per-call values (`KerasHubBackbone.extras`); `index` the layer's place
    in `layers()`.

    >>> Context({}, 1, 2, 3, False).options is None
    True
    """

    inputs: object
    input_ids: object
    sequence_ids: object
    position_ids: object
    training: object
    segmented: bool = False
    implementation: str = "dense"
    mask: object = None
    options: object = None
    extras: dict = dataclasses.field(default_factory=dict)
    index: int = 0


class KerasHubBackbone(Backbone):
    """Base of the adapters returned by `tfpack.models.from_keras_hub`.

    Subclasses name the keras-hub classes they accept (`backbone_names`, in
    `keras_hub.models`; keras-hub is imported on first use only; subclasses
    of those classes are accepted too, e.g. `Llama3Backbone` of
    `LlamaBackbone`, as long as they keep the parent's layers), say
    whether attention is causal (`is_causal(backbone)`) and implement
    `call`. The wrapped backbone is serialized inside the adapter's config,
    as keras-hub tasks serialize theirs, so `.keras` files rebuild it and
    then restore its weights.

    Example:

    >>> import keras_hub
    >>> from tfpack.models import from_keras_hub
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> adapter = from_keras_hub(backbone)
    >>> isinstance(adapter, KerasHubBackbone), adapter.hidden_dim
    (True, 8)
    >>> adapter.weights[0] is backbone.weights[0]
    True

    Args:
        backbone: a keras-hub backbone of one of `backbone_names`.
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"` (JAX: decoders keep causality, windows, soft caps,
            sinks and ALiBi in the kernel; relative-position families refuse it)
            (docs/model.md, "Attention implementations"), for every
            adapter: segmented decoders stay causal inside each sequence
            and keep their sliding windows, soft caps and query scaling.
        max_sequences_per_pack: `K` of the packs (for segmented attention).
        segment_length: longest sequence of the packs, if below `L`.
        trust_subclass: deprecated, no effect (kept in the config so that
            older `.keras` files load): a user's subclass is accepted or
            refused by `from_keras_hub`'s exactness check, by its numbers.
        **kwargs: passed on to `tfpack.models.Backbone` (the dtype policy
            defaults to the backbone's).

    Call arguments:
        inputs: dict with `input_ids`, `sequence_ids`, `position_ids` (and
            `token_type_ids` where `input_features` lists them).
        training: whether dropout is active.

    Returns:
        `{"sequence_output": [batch, length, hidden_dim]}`, what the
        keras-hub backbone returns for each sequence alone (after its final
        norm where it has one).

    Attributes:
        backbone: the wrapped keras-hub backbone.
        hidden_dim: width of `sequence_output`.
        vocabulary_size: rows of the token embedding.
        token_embedding: the backbone's token embedding (a
            `keras.layers.Embedding`), for tied output heads.
        max_sequence_length: the longest pack learned positions allow, or
            None.
    """

    backbone_names = ()
    # The key of the adapter's private keras-hub names in
    # `declarations.FAMILIES` (checked by `internals.check`).
    family = None
    # Whether `"auto"` may pick the flash kernel where it is measured faster
    # (`FLASH_MIN_LENGTH`): the decoder families whose flash path is checked
    # equal to dense (tests/models/keras_hub/test_keras_hub_flash.py).
    # `"flash"` by name is each family's own to accept or refuse.
    flash_kernel = False

    @validate_params({"backbone": Anything("a keras-hub backbone of its classes, checked below"),
                      **IMPLEMENTATION_PARAMETERS, "trust_subclass": Boolean()})
    def __init__(self, backbone, attention_implementation="auto",
                 max_sequences_per_pack=None, segment_length=None,
                 trust_subclass=False, **kwargs):
        if self.match(backbone) is None:
            raise TfpackError(
                f"`{type(self).__name__}` wraps "
                f"{', '.join(self.backbone_names)}. "
                f"Received: backbone of type {type(backbone).__name__}")
        # A user's subclass is not refused by name: `from_keras_hub`'s
        # exactness check compares the adapter with the subclass itself.
        validate_implementation(attention_implementation,
                                max_sequences_per_pack, segment_length)
        warn_untested_version()
        kwargs.setdefault("dtype", backbone.dtype_policy)
        kwargs.setdefault("name", f"packed_{backbone.name}")
        super().__init__(**kwargs)
        self.backbone = backbone
        self.attention_implementation = attention_implementation
        self.max_sequences_per_pack = max_sequences_per_pack
        self.segment_length = segment_length
        self.trust_subclass = trust_subclass
        self.causal = self.is_causal(backbone)
        self.attention_mask = PackedAttentionMask(
            causal=self.causal, mask_type="boolean", dtype=self.dtype_policy,
            name="attention_mask")
        # The backbone arrives built; the adapter has no variables of its own.
        self.built = True
        if self.family is not None:
            internals.check(self.family, backbone, self.layers())

    @classmethod
    def match(cls, backbone):
        """How far up `backbone`'s class hierarchy one of `backbone_names`
        is (0: exactly one of them), or None if none is.

        `from_keras_hub` picks the adapter with the closest match, so an
        adapter for a subclass wins over its parent's.
        """
        classes = backbone_classes(cls.backbone_names)
        distances = [i for i, parent in enumerate(type(backbone).__mro__)
                     if parent in classes]
        return min(distances, default=None)

    @classmethod
    def adapted_class(cls, backbone):
        """The class of `backbone_names` closest up `backbone`'s MRO, or
        None."""
        classes = backbone_classes(cls.backbone_names)
        return next((parent for parent in type(backbone).__mro__
                     if parent in classes), None)

    @classmethod
    def accepts(cls, backbone):
        """Whether `backbone` is one of `backbone_names` or a subclass."""
        return cls.match(backbone) is not None

    @classmethod
    def is_causal(cls, backbone):
        """Whether `backbone` masks attention causally (decoders)."""
        return False

    @property
    def hidden_dim(self):
        return self.backbone.hidden_dim

    @property
    def vocabulary_size(self):
        return self.backbone.token_embedding.input_dim

    @property
    def token_embedding(self):
        return self.backbone.token_embedding

    @property
    def max_sequence_length(self):
        """Rows of a learned position table, or None (rotary: no limit)."""
        return getattr(self.backbone, "max_sequence_length", None)

    def implementation(self, length):
        """`"dense"`, `"segmented"` or `"flash"` at row length `length` (the `"auto"`
        rule of `tfpack.layers.attention_implementation`)."""
        return choose_implementation(
            self.attention_implementation, backend=keras.backend.backend(),
            length=length, max_sequences_per_pack=self.max_sequences_per_pack,
            segment_length=self.segment_length,
            device=default_device(keras.backend.backend()),
            flash=self.flash_kernel and not self._attention_dropout())

    def _attention_dropout(self):
        """Whether the backbone may drop attention weights (the kernel has
        no dropout): its `dropout` or `attention_dropout` is not zero."""
        return any(getattr(self.backbone, name, 0) or 0
                   for name in ("dropout", "attention_dropout"))

    def segmented_options(self, sequence_ids, window=None):
        """`attend_segmented` options of one layer's segmented attention.

        `window` is the layer's `(before, after)` band (`band_mask`), or
        None. A batch the rows cannot hold runs the same scores over the
        whole pack under the packed mask (causal for decoders, banded).
        """
        return dict(sequence_ids=sequence_ids, causal=self.causal,
                    window=window,
                    max_sequences_per_pack=self.max_sequences_per_pack,
                    segment_length=self.segment_length)

    # The skeleton: `call` runs `forward`, which owns the features, the
    # implementation choice, the masks and windows, `isolated` around each
    # block and the layer loop; a family overrides the hooks below.

    def embed(self, context):
        """Hook: the hidden states `[B, L, H]` entering the first layer."""
        return self.backbone.token_embedding(context.input_ids)

    def extras(self, context, x):
        """Hook: the family's per-call values (`context.extras`), computed
        once from the embedded `x` (e.g. relative position tables)."""
        return {}

    def layers(self):
        """Hook: the keras-hub blocks in the order the backbone calls them."""
        return list(self.backbone.transformer_layers)

    def window(self, layer):
        """Hook: the `(before, after)` band of `layer`'s sliding window for
        segmented attention, or None."""
        return None

    def dense_mask(self, layer, mask):
        """Hook: `layer`'s dense mask: the packed `mask`, narrowed by the
        layer's window where keras-hub's attention does not apply it."""
        return mask

    def block(self, layer, x, context):
        """Hook: keras-hub's block `layer` on `x` under `context`."""
        raise NotImplementedError(type(self).__name__)

    def final_norm(self, x, context):
        """Hook: the backbone's output from the last layer's `x`."""
        return x

    def call(self, inputs, training=None):
        return {"sequence_output": self.forward(inputs, training)[0]}

    def layer_outputs(self, inputs, training=None):
        """Each transformer layer's output `[B, L, H]`, in `layers()`
        order (before the final norm): compare two runs layer by layer to
        name the first layer that differs.

        >>> import keras_hub, numpy as np
        >>> from tfpack.models import from_keras_hub
        >>> backbone = keras_hub.models.BertBackbone(
        ...     vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        ...     intermediate_dim=16, max_sequence_length=16)
        >>> outputs = from_keras_hub(backbone).layer_outputs(
        ...     {"input_ids": np.array([[2, 5, 6, 0]]),
        ...      "sequence_ids": np.array([[1, 1, 2, 0]]),
        ...      "position_ids": np.array([[0, 1, 0, 0]])})
        >>> len(outputs), tuple(outputs[-1].shape)
        (2, (1, 4, 8))
        """
        return self.forward(inputs, training, keep_layers=True)[1]

    def forward(self, inputs, training=None, keep_layers=False):
        """`(sequence_output, layer_outputs)` (the second empty unless
        `keep_layers`): the one layer loop of every family."""
        input_ids, sequence_ids, position_ids = self._features(inputs)
        context = Context(inputs, input_ids, sequence_ids, position_ids,
                          training)
        x = self.embed(context)
        implementation = self.implementation(x.shape[1])
        # Segmented and flash both run on the layer's own projections.
        segmented = implementation in ("segmented", "flash")
        mask = None if segmented else self.attention_mask(sequence_ids)
        context = dataclasses.replace(context, segmented=segmented,
                                      implementation=implementation)
        context = dataclasses.replace(context,
                                      extras=self.extras(context, x))
        outputs = []
        for index, layer in enumerate(self.layers()):
            if segmented:
                this = dataclasses.replace(
                    context, index=index, options=self.segmented_options(
                        sequence_ids, self.window(layer)))
            else:
                this = dataclasses.replace(
                    context, index=index, mask=self.dense_mask(layer, mask))
            x, show = isolated(x, this.mask)
            x = show(self.block(layer, x, this))
            if keep_layers:
                outputs.append(x)
        return self.final_norm(x, context), outputs

    def _features(self, inputs):
        """`(input_ids, sequence_ids, position_ids)` as int32, checked once."""
        missing = [n for n in self.input_features[:3] if n not in inputs]
        if missing:
            raise TfpackError(
                f"`{type(self).__name__}` needs the packed features "
                f"{list(self.input_features[:3])}; missing {missing}. "
                f"Received: keys={sorted(inputs)}")
        return tuple(keras.ops.cast(inputs[n], "int32")
                     for n in self.input_features[:3])

    @staticmethod
    def _token_type_ids(inputs, input_ids):
        """`inputs["token_type_ids"]` as int32, or zeros like `input_ids`."""
        token_type_ids = inputs.get("token_type_ids")
        if token_type_ids is None:
            return ops.zeros_like(input_ids)
        return ops.cast(token_type_ids, "int32")

    def get_config(self):
        config = super().get_config()
        config["backbone"] = keras.saving.serialize_keras_object(self.backbone)
        config.update({
            "attention_implementation": self.attention_implementation,
            "max_sequences_per_pack": self.max_sequences_per_pack,
            "segment_length": self.segment_length,
            "trust_subclass": self.trust_subclass,
        })
        return config

    @classmethod
    def from_config(cls, config):
        import keras_hub  # noqa: F401  (registers the backbone classes)

        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(
            config["backbone"])
        return cls(**config)


class KerasHubCausalBackbone(KerasHubBackbone):
    """A `KerasHubBackbone` of a decoder: causal, with `logits`.

    `logits(sequence_output)` is the keras-hub backbone's own output
    projection (`token_embedding(x, reverse=True)`: tied or not, as
    configured), so `tfpack.models.CausalLM` trains keras-hub's head.

    Example:

    >>> import keras_hub
    >>> from tfpack.models import from_keras_hub
    >>> backbone = keras_hub.models.GPT2Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> decoder = from_keras_hub(backbone)
    >>> isinstance(decoder, KerasHubCausalBackbone), decoder.causal
    (True, True)
    >>> decoder.logits(keras.ops.ones((1, 3, 8))).shape
    TensorShape([1, 3, 30])
    """

    flash_kernel = True

    @classmethod
    def is_causal(cls, backbone):
        return True

    def logits(self, sequence_output):
        """Next-token logits `[B, L, vocabulary_size]`, float32."""
        return ops.cast(self.backbone.token_embedding(sequence_output,
                                                      reverse=True), "float32")
