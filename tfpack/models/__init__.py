"""Keras 3 models for packed sequences.

Every model takes one dict of DESIGN.md features (batch first) and returns a
dict; labels travel in the same dict, so `model.fit(dataset)` needs no `y`.
`loss_statistics(x, y_pred)` gives the per-term sums and counts a
distributed loop all-reduces (see `PackedModel`).

Example:

>>> from tfpack.models import BertEncoder, BertPretrainer
>>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
...                       num_heads=2, intermediate_dim=16)
>>> BertPretrainer(encoder).loss_terms
('mlm', 'nsp')
"""

from tfpack.models.base import EncoderTask
from tfpack.models.base import PackedModel
from tfpack.models.bert_classifier import BertClassifier
from tfpack.models.bert_encoder import BertEncoder
from tfpack.models.bert_pretrainer import BertPretrainer
from tfpack.models.causal_lm import CausalLM
from tfpack.models.keras_hub import KerasHubBackbone
from tfpack.models.keras_hub import from_keras_hub

__all__ = [
    "BertClassifier",
    "BertEncoder",
    "BertPretrainer",
    "CausalLM",
    "EncoderTask",
    "KerasHubBackbone",
    "PackedModel",
    "from_keras_hub",
]
