"""Which attention computation a packed layer runs: the `"auto"` rule.

`"dense"` scores all `L x L` token pairs of a pack and masks the pairs of
different sequences; `"segmented"` (see `segmented_attention`) scores each
sequence alone in rows sized from `L`, `K` and `S`: `segment_work(L, K, S)`
scores per pack instead of `L^2`, plus gathers. `"auto"` picks one when the layer is traced, from
static facts only (backend, `L`, `K`, `S`), so a compiled step never
switches.

The rule, from `benchmarks/attention.py` (jit-compiled forward+backward
steps of a small encoder and decoder on real length distributions, dense and
segmented interleaved in one process) and, on TensorFlow,
`benchmarks/keras_hub_attention.py` (28 keras-hub families; numbers in
BENCHMARKS.md):

    segmented  when  K is known  and  L >= MIN_LENGTH[backend] (TF 512, JAX 1,024)
                     and  L^2 >= threshold * segment_work(L, K, S)
                          (CPU: MIN_WORK_RATIO[backend], TF 1.1, JAX 1.5;
                           GPU: GPU_MIN_WORK_RATIO, 4.0)
    dense      otherwise

`L^2 / segment_work` is the most the segmented path can save in attention
scores; below the threshold the gathers and the smaller, less efficient
matrix products eat the saving. A GPU runs dense attention's large matrix
products so much faster than the gathers that the saving pays only at
a work ratio of about 4 instead of 1.1-1.5 (`benchmarks/accelerator.py` on an
H200). Backends without measurements (torch) and devices without them (TPU)
get dense.

`"flash"` (JAX only, `tfpack.layers.flash_attention`) is a fused kernel
whose key loop visits only the key blocks of each query block's sequences.
`"auto"` picks it only on a (backend, device) with measurements in
`FLASH_MIN_LENGTH`, from the row length measured faster than dense and
segmented there, and only for a layer that can run it (no attention
dropout, no per-row relative-position bias, not a pair's cross-attention:
`flash=False`):

    flash      when  (backend, device) in FLASH_MIN_LENGTH  and  flash
                     and  L >= FLASH_MIN_LENGTH[(backend, device)]
                     (JAX on a GPU: 4,096)

On the CPU it runs in Pallas interpret mode (exact, slow: not its target),
so `"auto"` never picks it there; TPUs are unmeasured. The TensorFlow
backend refuses it (use `"segmented"`).
"""

from tfpack.errors import TfpackError
from tfpack.layers.segmented_attention import segment_work
from tfpack.params import Integer, IntegerPair, Options

IMPLEMENTATIONS = ("auto", "dense", "segmented", "flash")
# The declared arguments (`tfpack.params`) of every layer and backbone that
# takes them; `validate_implementation` checks what they imply together.
IMPLEMENTATION_PARAMETERS = {
    "attention_implementation": Options(*IMPLEMENTATIONS),
    "max_sequences_per_pack": [None, Integer(1)],
    "segment_length": [None, Integer(1)],
}
# An encoder-decoder's `segment_length`: one bound for inputs and targets, or
# `(inputs, targets)` (`tfpack.models.keras_hub.seq2seq`).
PAIR_SEGMENT_LENGTH = [None, Integer(1), IntegerPair(1)]
# Backends that run the flash kernel (Pallas).
FLASH_BACKENDS = ("jax",)
# (backend, device) -> the shortest row length `L` at which "flash" measured
# faster than both dense and segmented on that device (with the measurement
# that chose it). JAX on one NVIDIA H200 (`benchmarks/accelerator.py
# --attention`, bfloat16, BENCHMARKS.md "Flash attention on a GPU"): L=512,
# K=3 (BERT-base): whole step 1.01x of dense, attention alone 0.89x; L=4,096,
# K=32: 4.44x / 7.78x; L=8,192, K=64: 5.93x / 8.20x (segmented 1.30x). So
# 4,096 (between 512 and 4,096 unmeasured).
FLASH_MIN_LENGTH = {("jax", "gpu"): 4096}

# Measured on 2 CPU cores (see the module docstring and BENCHMARKS.md);
# the GPU's threshold is below.
# Speed-up of a whole step against the work ratio L^2 / segment_work:
#   ratio 0.53 (L=2048, S=L):   0.55-0.75x   ratio 0.67 (L=512, S=L): 0.75-0.8x
#   ratio 1.77 (L=2048, S=512): 1.4-1.6x     ratio 3.4 (L=8192): 2.1-2.8x
#   ratio 4.2 (L=2048, S=256):  2.3-2.9x     (TensorFlow and JAX alike)
#   ratio 4.8 (L=512, K=8, S=85):  2.4-3.0x  (TensorFlow; keras-hub GPT-OSS,
#   Gemma 4, Falcon: benchmarks/keras_hub_attention.py, issue 23)
#   ratio 0.53-0.55 (L=512, S=L):  0.53-0.66x (the same families)
# The keras-hub suite's threshold probes (TensorFlow, L=2048, K=16, 7
# families: documents cut into windows of L/N, S = L/N, issue 23):
#   ratio 0.89-0.98 (S=L/2, L=2048 and 4096): 0.81-1.08x
#   (all 28 keras-hub families, L=2048, K=8, S=1024, ratio 0.98: 0.77-1.07x)
#   ratio 1.16 (S=819):  1.02-1.77x   ratio 1.41 (S=682): 1.18-3.07x
#   ratio 1.77 (S=512):  1.43-2.64x
# so on TensorFlow break-even lies between 0.98 and 1.16: 1.1 (it was 1.5,
# which kept dense where segmented was 1.2-3.1x faster). JAX keeps 1.5
# (its ratio 1.16-1.41 is not measured). Below 512 (TensorFlow) and 1,024
# (JAX, not measured at 512) "auto" stays dense (unmeasured).
MIN_LENGTH = {"tensorflow": 512, "jax": 1024}
MIN_WORK_RATIO = {"tensorflow": 1.1, "jax": 1.5}
# GPU (JAX, bfloat16, one NVIDIA H200; `benchmarks/accelerator.py`: a
# 134M-parameter decoder, 12 layers, forward+backward, packs of stdlib
# windows of S=512): work ratio 0.67 (BERT-base, L=512, K=3): segmented
# 0.54x of dense; ratio 3.36 (L=4,096, K=32): 0.98x; ratio 6.55 (L=8,192,
# K=64): 1.28x. Break-even by interpolation near 3.6, so 4.0. TensorFlow on
# a GPU is not measured and gets the same rule (the cost is the device's).
GPU_MIN_WORK_RATIO = 4.0
# Encoder-decoders (pair packs; `tfpack.models.keras_hub.seq2seq`), on a CPU:
# a keras-hub T5 (2 layers, hidden 64) training step, all three attentions
# segmented against all dense (`benchmarks/seq2seq_attention.py`, TensorFlow,
# medians of 7 interleaved rounds, two runs): work ratios 1.23 (self) and
# 1.00 (cross) 0.56-0.78x; 2.67 1.25-1.26x; 3.6-3.8 2.0-2.3x; 5.33 2.5-2.7x;
# 10.7 5.1-5.2x. Break-even by interpolation near 1.9, so 2.0 for every kind
# of a pair adapter (T5's bias per row and the two rows' gathers cost more
# than one stream's 1.1); with it "auto" ran 0.99-1.01x of dense at 1.0-1.23.
PAIR_MIN_WORK_RATIO = 2.0


def validate_implementation(attention_implementation, max_sequences_per_pack,
                            segment_length):
    """Checks what the constructor arguments of an attention layer imply together,
    once (each is declared: `IMPLEMENTATION_PARAMETERS`)."""
    if attention_implementation == "flash":
        import keras

        backend = keras.backend.backend()
        if backend not in FLASH_BACKENDS:
            raise TfpackError(
                "`attention_implementation='flash'` runs on the JAX backend "
                "only (a Pallas kernel); on TensorFlow use 'segmented'. "
                f"Received: attention_implementation='flash', backend={backend!r}")
    if attention_implementation == "segmented" and max_sequences_per_pack is None:
        raise TfpackError(
            "`attention_implementation='segmented'` needs "
            "`max_sequences_per_pack` (rows per pack, fixed at trace time). "
            "Received: max_sequences_per_pack=None")


def default_device(backend):
    """`"gpu"`, `"tpu"` or `"cpu"`: where `backend` runs its computations by default.

    Example:

    >>> default_device("torch")
    'cpu'
    """
    if backend == "jax":
        import jax

        return jax.default_backend()
    if backend == "tensorflow":
        import tensorflow as tf

        for kind in ("GPU", "TPU"):
            if tf.config.list_logical_devices(kind):
                return kind.lower()
    return "cpu"


def choose_implementation(attention_implementation, *, backend, length,
                          max_sequences_per_pack, segment_length,
                          device="cpu", work_ratio=None, min_work_ratio=None,
                          flash=True):
    """`"dense"`, `"segmented"` or `"flash"` for a layer traced at row length `length`.

    Example:

    >>> choose_implementation("auto", backend="tensorflow", length=2048,
    ...                       max_sequences_per_pack=8, segment_length=512)
    'segmented'
    >>> choose_implementation("auto", backend="tensorflow", length=512,
    ...                       max_sequences_per_pack=3, segment_length=None)
    'dense'
    >>> choose_implementation("auto", backend="jax", length=4096,
    ...                       max_sequences_per_pack=32, segment_length=512,
    ...                       device="gpu")
    'flash'
    >>> choose_implementation("auto", backend="jax", length=4096,
    ...                       max_sequences_per_pack=32, segment_length=512,
    ...                       device="gpu", flash=False)
    'dense'

    Args:
        attention_implementation: `"auto"`, `"dense"`, `"segmented"` or
            `"flash"`.
        backend: `keras.backend.backend()`.
        length: static row length `L`, or None when unknown (gives dense).
        max_sequences_per_pack: `K`, or None (gives dense under `"auto"`).
        segment_length: `S`, or None for `L`.
        device: `"cpu"`, `"gpu"` or `"tpu"` (`default_device(backend)` in
            the layers): a GPU has its own threshold, a TPU gets dense.
        work_ratio: dense scores over segmented scores of the layer, if not
            `length**2 / segment_work(length, K, S)` (cross-attention of
            pairs: `Ld * Le / pair_work`).
        min_work_ratio: the CPU threshold, if not `MIN_WORK_RATIO[backend]`
            (pair adapters: `PAIR_MIN_WORK_RATIO`); a GPU keeps its own.
        flash: whether the layer can run the flash kernel (False: attention
            dropout, a per-row bias, a pair's cross-attention); `"auto"`
            then never picks it.
    """
    if attention_implementation != "auto":
        return attention_implementation
    flash_from = FLASH_MIN_LENGTH.get((backend, device))
    if (flash and flash_from is not None and length is not None
            and length >= flash_from):
        return "flash"
    if (max_sequences_per_pack is None or length is None
            or backend not in MIN_LENGTH or length < MIN_LENGTH[backend]
            or device not in ("cpu", "gpu")):
        return "dense"
    threshold = (GPU_MIN_WORK_RATIO if device == "gpu"
                 else min_work_ratio or MIN_WORK_RATIO[backend])
    if work_ratio is None:
        work_ratio = length ** 2 / segment_work(length, max_sequences_per_pack,
                                                segment_length)
    return "segmented" if work_ratio >= threshold else "dense"
