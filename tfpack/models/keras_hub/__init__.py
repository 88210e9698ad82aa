"""Packed training for keras-hub backbones: `from_keras_hub(backbone)`.

The adapter runs the keras-hub backbone's own layers on the packed features
of DESIGN.md (`input_ids`, `sequence_ids`, `position_ids`, and
`token_type_ids` where the backbone has token types) and returns
`{"sequence_output": [B, L, H]}`. Positions restart for every packed
sequence and attention stays inside a sequence (and is causal for
decoders), so each sequence's outputs are those of the keras-hub backbone
run on that sequence alone. The adapter owns no variables: presets and
checkpoints load into the keras-hub backbone as usual, and training the
adapter trains the backbone. Subclasses of these classes are adapted as
their closest adapted parent: the adapter replays the parent's layers, so
`from_keras_hub` checks the adapter against the subclass itself, on each
sequence of a probe pack alone (`tfpack.testing.check_packing_exact`), and
refuses one whose numbers differ (one that overrides `call` to compute
something else, or swaps a layer after building). Every family runs dense
or segmented attention (docs/model.md,
"Attention implementations").

An adapter is one module here whose class is decorated with
`base.register` (and imported below, which registers it). It supplies only
hooks (`embed`, `block`, `final_norm`, `window`, `extras`, ...) of the one
skeleton, `base.KerasHubBackbone.forward`, which owns the features, the
masks, the layer loop and the choice of attention (`base.attend`), and
gives every layer's output (`layer_outputs`). The adapters read keras-hub's
private names only through `internals` (`private`, `function`), as declared
per family in `declarations.FAMILIES`; `internals.check` verifies them when
an adapter is built and refuses, in one line naming the family and the
keras-hub version, a release that renamed one. The releases they were
tested on are `declarations.TESTED_KERAS_HUB_VERSIONS` (setup.py declares
that range), and another release warns once. docs/model.md, "Adding a
keras-hub family", walks through a new family.

| family | keras-hub backbones | adapter |
| --- | --- | --- |
| BERT-style encoders | `BertBackbone`, `ElectraBackbone`, `RobertaBackbone` (`XLMRobertaBackbone`), `DistilBertBackbone`, `AlbertBackbone` | `KerasHubEncoder` |
| DeBERTa-v3 (relative positions inside each sequence) | `DebertaV3Backbone` | `KerasHubDeberta` |
| RoFormer-V2 | `RoformerV2Backbone` | `KerasHubRoformerV2` |
| XLNet (relative attention) | `XLNetBackbone` | `KerasHubXLNet` |
| ESM protein models (rotary ESM-2, absolute ESM-1) | `ESMBackbone` (= `ESM2Backbone`) | `KerasHubESM` |
| Llama-style decoders | `LlamaBackbone` (`Llama3Backbone`), `MistralBackbone`, `Qwen2Backbone`, `Qwen3Backbone` | `KerasHubDecoder` |
| mixtures of experts | `MixtralBackbone`, `QwenMoeBackbone`, `Qwen3MoeBackbone` | `KerasHubDecoder` |
| Phi-3 (with "su" / LongRoPE scaling per sequence) | `Phi3Backbone` | `KerasHubPhi3` |
| GPT-OSS (sinks, sliding windows, experts) | `GptOssBackbone` | `KerasHubGptOss` |
| SmolLM3 (rotary and NoPE layers) | `SmolLM3Backbone` | `KerasHubSmolLM3` |
| Gemma decoders | `GemmaBackbone`, `Gemma3Backbone` (text) | `KerasHubGemma` |
| Gemma 4 (text; local/global layers, shared KV, experts) | `Gemma4Backbone` | `KerasHubGemma4` |
| GPT-2 and OPT | `GPT2Backbone`, `OPTBackbone` | `KerasHubGPT` |
| GPT-NeoX | `GPTNeoXBackbone` | `KerasHubGPTNeoX` |
| ALiBi decoders (ALiBi from positions inside each sequence) | `BloomBackbone`, `FalconBackbone` | `KerasHubAlibiDecoder` |
| T5 encoder-decoders (pair packs; relative buckets per sequence) | `T5Backbone` | `KerasHubT5` |
| BART (pair packs; learned positions per sequence) | `BartBackbone` | `KerasHubBart` |
| T5Gemma (pair packs; rotary angles and the decoder's sliding windows per sequence) | `T5GemmaBackbone` | `KerasHubT5Gemma` |
| T5Gemma 2 (text; pair packs; merged self- and cross-attention, windows per sequence) | `T5Gemma2Backbone` | `KerasHubT5Gemma2` |
| EdRec (pair packs; no positions; outputs only, its LM head is the task's) | `EdRecBackbone` | `KerasHubEdRec` |
| Qwen3.5 hybrids (text; gated DeltaNet with the state and convolution reset per sequence, gated attention, experts) | `Qwen3_5Backbone`, `Qwen3_5MoeBackbone` | `KerasHubQwen3_5` |
| RWKV-7 (token shifts and time-mix state reset per sequence) | `RWKV7Backbone` | `KerasHubRWKV7` |

Recurrent layers reset their state at every sequence start inside the
recurrence (`tfpack.layers.recurrence`). Backbones whose computation
crosses sequence boundaries in a way tfpack cannot cut (Fourier mixing),
audio encoder-decoders and image-text models are refused with the reason
(`tfpack.models.keras_hub.refusals`).

Example:

>>> import keras_hub
>>> from tfpack.models import from_keras_hub
>>> backbone = keras_hub.models.LlamaBackbone(
...     vocabulary_size=30, num_layers=1, num_query_heads=2,
...     num_key_value_heads=1, hidden_dim=8, intermediate_dim=16)
>>> type(from_keras_hub(backbone)).__name__
'KerasHubDecoder'
"""

from tfpack.errors import TfpackError
from tfpack.layers.attention_implementation import IMPLEMENTATION_PARAMETERS
from tfpack.layers.attention_implementation import PAIR_SEGMENT_LENGTH
# Each adapter module registers its class (`base.register`) when imported.
from tfpack.models.keras_hub.alibi import KerasHubAlibiDecoder
from tfpack.models.keras_hub.base import KerasHubBackbone
from tfpack.models.keras_hub.base import KerasHubCausalBackbone
from tfpack.models.keras_hub.bart import KerasHubBart
from tfpack.models.keras_hub.base import adapters
from tfpack.models.keras_hub.deberta import KerasHubDeberta
from tfpack.models.keras_hub.decoders import KerasHubDecoder
from tfpack.models.keras_hub.edrec import KerasHubEdRec
from tfpack.models.keras_hub.encoders import KerasHubEncoder
from tfpack.models.keras_hub.esm import KerasHubESM
from tfpack.models.keras_hub.gemma import KerasHubGemma
from tfpack.models.keras_hub.gemma4 import KerasHubGemma4
from tfpack.models.keras_hub.gpt import KerasHubGPT
from tfpack.models.keras_hub.gpt_neo_x import KerasHubGPTNeoX
from tfpack.models.keras_hub.gpt_oss import KerasHubGptOss
from tfpack.models.keras_hub.phi3 import KerasHubPhi3
from tfpack.models.keras_hub.qwen3_5 import KerasHubQwen3_5
from tfpack.models.keras_hub.refusals import refusal
from tfpack.models.keras_hub.roformer import KerasHubRoformerV2
from tfpack.models.keras_hub.rwkv7 import KerasHubRWKV7
from tfpack.models.keras_hub.seq2seq import KerasHubSeq2SeqBackbone
from tfpack.models.keras_hub.smollm3 import KerasHubSmolLM3
from tfpack.models.keras_hub.t5 import KerasHubT5
from tfpack.models.keras_hub.t5gemma import KerasHubT5Gemma
from tfpack.models.keras_hub.t5gemma2 import KerasHubT5Gemma2
from tfpack.models.keras_hub.xlnet import KerasHubXLNet
from tfpack.testing.exactness import check_packing_exact
from tfpack.testing.exactness import unchecked_reason
from tfpack.params import Anything, Boolean, validate_params


def supported_backbones():
    """Names of the keras-hub backbone classes `from_keras_hub` accepts.

    >>> supported_backbones()[:3]
    ['AlbertBackbone', 'BartBackbone', 'BertBackbone']
    """
    return sorted(name for adapter in adapters()
                  for name in adapter.backbone_names)


@validate_params({"backbone": Anything("a keras-hub backbone, checked below"),
                  **IMPLEMENTATION_PARAMETERS, "trust_subclass": Boolean(),
                  "check_exact": Boolean(),
                  # An encoder-decoder takes one per side; the others refuse a pair.
                  "segment_length": PAIR_SEGMENT_LENGTH})
def from_keras_hub(backbone, *, attention_implementation="auto",
                   max_sequences_per_pack=None, segment_length=None,
                   trust_subclass=False, check_exact=True):
    """The tfpack backbone of a keras-hub backbone: packed features in.

    Example:

    >>> import keras_hub, numpy as np
    >>> backbone = keras_hub.models.BertBackbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> packed = from_keras_hub(backbone)
    >>> packed({"input_ids": np.array([[2, 5, 6, 2, 7, 0]]),
    ...         "sequence_ids": np.array([[1, 1, 1, 2, 2, 0]]),
    ...         "position_ids": np.array([[0, 1, 2, 0, 1, 0]])},
    ...        )["sequence_output"].shape
    TensorShape([1, 6, 8])

    Args:
        backbone: a keras-hub backbone of a supported class or a subclass
            of one (see the module docstring); the adapter of the closest
            class in its hierarchy is used.
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"` (JAX),
            for encoders and decoders alike (decoders stay causal and keep
            their sliding windows, soft caps and query scaling); see
            docs/model.md, "Attention implementations".
        max_sequences_per_pack: `K` of the packs, for segmented attention.
        segment_length: longest sequence of the packs, if below `L`
            (encoder-decoders: one number for inputs and targets, or
            `(inputs, targets)`).
        trust_subclass: deprecated, no effect: a user's subclass is
            accepted or refused by the exactness check (`check_exact`), by
            its numbers.
        check_exact: run `tfpack.testing.check_packing_exact` on the
            adapter before returning it: one probe pack against the
            keras-hub backbone (`backbone` itself, whatever its class) on
            each of its sequences alone, outputs and gradients (about a
            second on a CPU for a small model). `False` skips it. An
            encoder-decoder (two token streams) is not probed.

    Returns:
        A `KerasHubBackbone` sharing `backbone`'s layers and variables.

    Raises:
        TfpackError: `backbone` is of another class; for a class packing
            cannot make exact (`tfpack.models.keras_hub.refusals`) the
            error says why.
        tfpack.testing.PackingNotExactError: the adapter does not compute
            what `backbone` computes on each sequence alone (with
            `check_exact`), naming the first layer or output that differs:
            a user's subclass that changes the computation, or an adapter
            that a keras-hub release broke.
    """
    error = refusal(backbone)
    if error is not None:
        raise error
    candidates = adapters()
    matches = [(adapter.match(backbone), i) for i, adapter in
               enumerate(candidates) if adapter.accepts(backbone)]
    if matches:
        adapter = candidates[min(matches)[1]](
            backbone, attention_implementation=attention_implementation,
            max_sequences_per_pack=max_sequences_per_pack,
            segment_length=segment_length, trust_subclass=trust_subclass)
        # Encoder-decoders (two streams) are not probed: their own suite checks them.
        if check_exact and unchecked_reason(adapter) is None:
            check_packing_exact(adapter)
        return adapter
    raise TfpackError(
        "`from_keras_hub` supports the keras-hub backbones "
        f"{', '.join(supported_backbones())}. "
        f"Received: backbone of type {type(backbone).__name__}")


__all__ = [
    "KerasHubAlibiDecoder",
    "KerasHubBackbone",
    "KerasHubBart",
    "KerasHubCausalBackbone",
    "KerasHubDeberta",
    "KerasHubEdRec",
    "KerasHubESM",
    "KerasHubDecoder",
    "KerasHubEncoder",
    "KerasHubGPT",
    "KerasHubGPTNeoX",
    "KerasHubGemma",
    "KerasHubGemma4",
    "KerasHubGptOss",
    "KerasHubPhi3",
    "KerasHubQwen3_5",
    "KerasHubRWKV7",
    "KerasHubRoformerV2",
    "KerasHubSeq2SeqBackbone",
    "KerasHubSmolLM3",
    "KerasHubT5",
    "KerasHubT5Gemma",
    "KerasHubT5Gemma2",
    "KerasHubXLNet",
    "adapters",
    "from_keras_hub",
    "supported_backbones",
]
