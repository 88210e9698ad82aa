"""`from_keras_hub(..., attention_implementation=...)`: segmented encoders."""

import pytest

from tfpack.errors import TfpackError
from tfpack.models import from_keras_hub

from keras_hub_helpers import make_backbone

# Segmented == dense == keras-hub on each sequence alone: test_conformance.py.


def test_adapter_config_keeps_the_implementation_and_checks_it():
    adapter = from_keras_hub(make_backbone("bert"),
                             attention_implementation="segmented",
                             max_sequences_per_pack=4, segment_length=8)
    config = adapter.get_config()
    assert (config["attention_implementation"], config["max_sequences_per_pack"],
            config["segment_length"]) == ("segmented", 4, 8)
    clone = type(adapter).from_config(config)
    assert clone.attention_implementation == "segmented"
    assert from_keras_hub(make_backbone("llama")).attention_implementation \
        == "auto"
    with pytest.raises(TfpackError, match=r"needs `max_sequences_per_pack`.*"
                                          r"Received: max_sequences_per_pack"
                                          r"=None"):
        from_keras_hub(make_backbone("llama"),
                       attention_implementation="segmented")
    with pytest.raises(TfpackError, match=r"Received: attention_implementation"
                                          r"='fused'"):
        from_keras_hub(make_backbone("bert"), attention_implementation="fused")
