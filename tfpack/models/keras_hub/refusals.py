"""keras-hub text backbones that packing cannot make exact, and why.

`from_keras_hub` raises `TfpackError` with the reason below for these
classes (matched by name along the class's MRO, so subclasses are refused
too), instead of the generic list of supported backbones. Each reason names
what the model computes across the row that a pack would have to cut at
every sequence boundary (Fourier mixing), or the second
input a pack would have to carry for every sequence (an encoder-decoder's
other side, a multimodal model's images), and so what tfpack would need.
"""

from tfpack.errors import TfpackError

_SEQ2SEQ = ("is an encoder-decoder without a pair adapter: tfpack packs "
            "T5, BART, T5Gemma, T5Gemma 2 and EdRec in pair packs (tfpack.tasks.seq2seq), and "
            "this family would need its own adapter of them")
_IMAGES = ("reads images (or video) with its text: packing it needs each "
           "packed sequence paired with its own image features, which "
           "tfpack's packed features do not carry")
_CONTRASTIVE = (f"{_IMAGES}; its output scores every text against every "
                "image of the batch")

REASONS = {
    "FNetBackbone": "FNet mixes tokens with a Fourier transform over the "
                    "whole row: every output depends on every token of the "
                    "pack, and a per-sequence transform would need "
                    "sequence-sized FFTs inside each row",
    "WhisperBackbone": "Whisper reads audio features, not token packs, and "
                       f"{_SEQ2SEQ}",
    "MoonshineBackbone": "Moonshine reads audio, not token packs, and "
                         f"{_SEQ2SEQ}",
    "PaliGemmaBackbone": f"PaliGemma {_IMAGES} (image tokens before the "
                         "text under a prefix-LM mask)",
    "BLIP2Backbone": f"BLIP-2 {_IMAGES} (Q-Former query embeddings before "
                     "the text)",
    "CLIPBackbone": f"CLIP {_CONTRASTIVE}",
    "SigLIPBackbone": f"SigLIP {_CONTRASTIVE}",
    "MetaCLIP2Backbone": f"MetaCLIP 2 {_CONTRASTIVE}",
    "VideoPrismBackbone": f"VideoPrism {_CONTRASTIVE}",
}


def refusal(backbone):
    """The `TfpackError` for a refused `backbone`, or None.

    >>> class FNetBackbone:  # Stands in for keras_hub.models.FNetBackbone.
    ...     pass
    >>> print(refusal(FNetBackbone()))  # doctest: +ELLIPSIS
    tfpack cannot pack FNetBackbone: FNet mixes tokens with a Fourier transform ...
    >>> refusal(object()) is None
    True
    """
    for cls in type(backbone).__mro__:
        if cls.__name__ in REASONS:
            return TfpackError(
                f"tfpack cannot pack {type(backbone).__name__}: "
                f"{REASONS[cls.__name__]}. Received: backbone of type "
                f"{type(backbone).__name__}")
    return None
