"""Fixtures the campaign's files share."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    from tfpack import models

    model = models.CausalLM(vocabulary_size=11, num_layers=1, hidden_dim=8, num_heads=2,
                            intermediate_dim=16, max_sequence_length=8)
    model({"input_ids": np.ones((1, 8), np.int32), "sequence_ids": np.ones((1, 8), np.int32),
           "position_ids": np.arange(8, dtype=np.int32)[None]})
    path = tmp_path_factory.mktemp("model") / "m.keras"
    model.save(path)
    return path
