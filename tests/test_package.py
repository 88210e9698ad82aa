"""The package front door: lazy subpackages, bundled data, version, CLI entry."""

import subprocess
import sys

import numpy as np
import pytest

import tfpack
from tfpack import datasets
from tfpack.errors import TfpackError


def test_import_tfpack_and_packing_does_not_import_tensorflow():
    code = (
        "import sys, tfpack, tfpack.packing, tfpack.datasets;"
        "tfpack.datasets.histogram('wikipedia_512');"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "False"


def test_bundled_wikipedia_histogram_matches_the_paper():
    counts = datasets.histogram("wikipedia_512")
    assert counts.dtype == np.int64
    assert counts.shape == (512,)
    assert int(counts.sum()) == 16_279_552
    # The paper: samples of length 512 are 23.5% of the dataset.
    assert counts[511] / counts.sum() == pytest.approx(0.235, abs=0.001)
    assert "wikipedia_512" in datasets.histogram_names()


def test_unknown_histogram_name_is_a_clear_error():
    with pytest.raises(TfpackError, match=r"Received: name='wiki'"):
        datasets.histogram("wiki")


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfpack.nope  # noqa: B018


def test_version_flag_and_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "tfpack.cli", "--version"],
        check=True, capture_output=True, text=True,
    ).stdout
    assert out.strip() == f"tfpack {tfpack.__version__}"
