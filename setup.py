"""tfpack: sequence packing without cross-contamination for TensorFlow and Keras."""

import pathlib
import re

import setuptools

HERE = pathlib.Path(__file__).parent
VERSION = {}
exec((HERE / "tfpack" / "version.py").read_text(), VERSION)


def keras_hub_requirement():
    """`keras-hub>=A.B,<A.C` over the minor releases the keras-hub adapters
    were tested with: `TESTED_KERAS_HUB_VERSIONS` of
    tfpack/models/keras_hub/declarations.py, the one list the adapters'
    untested-version warning and their refusal message read. The adapters
    read keras-hub's private names (checked when an adapter is built), so
    a later minor release is declared only once the conformance suite
    passed on it."""
    text = (HERE / "tfpack" / "models" / "keras_hub" / "declarations.py"
            ).read_text()
    tested = re.search(r"TESTED_KERAS_HUB_VERSIONS = \(([^)]*)\)", text)
    minors = sorted({tuple(int(part) for part in version.split(".")[:2])
                     for version in re.findall(r'"([0-9.]+)"',
                                               tested.group(1))})
    low, high = minors[0], minors[-1]
    return f"keras-hub>={low[0]}.{low[1]},<{high[0]}.{high[1] + 1}"


KERAS_HUB = keras_hub_requirement()

setuptools.setup(
    name="tfpack",
    version=VERSION["__version__"],
    description=(
        "Pack variable-length sequences near-optimally and train/serve "
        "TensorFlow and Keras transformers on packed data without "
        "cross-contamination."
    ),
    long_description=(HERE / "README.md").read_text(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=setuptools.find_packages(include=["tfpack", "tfpack.*"]),
    # tf.train.Example serialization and TFRecord framing in C (the packer's
    # serialization was about its whole time budget in numpy); plain C API,
    # no numpy headers, so it builds with only a C compiler and Python's headers.
    # The `optimal` planner's pricing knapsack and best fit decreasing in C too
    # (tfpack/packing/_kernels.c: their Python loops were most of its 1 s budget).
    ext_modules=[setuptools.Extension("tfpack.formats._wire", ["tfpack/formats/_wire.c"],
                                      extra_compile_args=["-O3", "-std=c99"]),
                 setuptools.Extension("tfpack.packing._kernels", ["tfpack/packing/_kernels.c"],
                                      extra_compile_args=["-O3", "-std=c99"])],
    package_data={"tfpack.datasets": ["data/*.txt", "vocab/*.txt"]},
    install_requires=[
        # TensorFlow 2.21 era: it ships Keras 3 and tensorflow-text matches it.
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.12,<4",
        "numpy>=1.26",
        # NNLS (nnlshp) and linprog for the planners.
        "scipy>=1.11",
        # HiGHS's own Python API: the `optimal` planner re-solves its LP warm
        # through it (public, unlike scipy's private binding of the same solver).
        "highspy>=1.7",
        "matplotlib>=3.7",
        # Reading Hugging Face checkpoints without torch.
        "safetensors>=0.4",
        "tqdm>=4.60",
    ],
    extras_require={
        # The Keras JAX backend: segmented attention through
        # jax.nn.dot_product_attention (cuDNN on GPUs) and
        # benchmarks/accelerator.py, which runs without TensorFlow. `make test`
        # installs it (CPU wheels) so the JAX-backend tests run in CI.
        "jax": ["jax>=0.4.36"],
        # Packed training of keras-hub backbones (`tfpack.models.from_keras_hub`).
        # The releases tested (`keras_hub_requirement`): 0.32.x today.
        "keras-hub": [KERAS_HUB],
        "test": [
            "pytest>=8",
            "pytest-xdist>=3.5",
            "hypothesis>=6.100",
            # Reference implementation for the real-weights BERT comparison, and
            # the backbones `from_keras_hub` adapts (the tested releases).
            KERAS_HUB,
            # Trainers of the small SentencePiece and byte-level BPE vocabularies
            # the tokenizer= tests build offline (keras-hub depends on both too).
            "sentencepiece>=0.2",
            "tokenizers>=0.20",
            # The reference the entity-F1 docs cite: `entity_f1` and `EntityF1`
            # are tested equal to seqeval's default mode on generated tags.
            "seqeval>=1.2",
            # One MultiWorkerMirroredStrategy pair serves three training test files
            # (tests/training/multiworker.py): the first pytest worker to ask starts
            # it, the others wait on a lock file in the session's basetemp.
            "filelock>=3.12",
        ],
        # `tfpack pack --engine beam` / `tfpack.beam`: the packing pipeline on
        # Apache Beam. Beam 2.77 needs protobuf<7 and TensorFlow 2.21 needs
        # protobuf>=6.31.1, so pip settles on protobuf 6.x. tfpack reads and
        # writes TFRecords with TensorFlow, not Beam's tfrecordio, so no crc
        # package (crcmod / google-crc32c) is needed. Beam's `dask` extra brings
        # dask and distributed (2024.4.2 or later; 2026.8 tested with TF 2.21's
        # protobuf 6.x) for the Dask runner on a `distributed` cluster.
        "beam": [
            "apache-beam[dask]>=2.77,<3",
            "protobuf>=6.31.1,<7",
        ],
    },
    entry_points={"console_scripts": ["tfpack=tfpack.cli:_console_main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
