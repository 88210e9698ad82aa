"""Keras 3 backbones and tasks for packed sequences.

As in keras-hub, a *backbone* maps packed features (`tfpack.features`) to
`{"sequence_output": [B, L, H]}` and a *task* wraps any backbone with heads
and a loss. Every model takes one dict of features (batch first) and returns
a dict; labels travel in the same dict, so `model.fit(dataset)` needs no `y`.

- backbones: `BertEncoder`, `DecoderBackbone` (both on the shared
  `TransformerBackbone` trunk), or any object following the backbone protocol
  (`tfpack.models.backbone`);
- tasks (`Task`): `BertPretrainer`, `BertClassifier`, `CausalLM`,
  `TextEmbedder`, `TokenClassifier`, `QuestionAnswerer`; `CausalLMScorer`
  scores sequences (log-likelihoods) with a `CausalLM`; `PreferenceModel`
  trains one on preference pairs (DPO, IPO, SimPO, ORPO).

Example:

>>> from tfpack.models import BertEncoder, BertPretrainer
>>> encoder = BertEncoder(vocabulary_size=50, num_layers=1, hidden_dim=8,
...                       num_heads=2, intermediate_dim=16)
>>> BertPretrainer(encoder).loss_terms
('mlm', 'nsp')
"""

from tfpack.models.backbone import Backbone
from tfpack.models.backbone import check_backbone
from tfpack.models.bert_classifier import BertClassifier
from tfpack.models.bert_encoder import BertEncoder
from tfpack.models.bert_pretrainer import BertPretrainer
from tfpack.models.causal_lm import CausalLM
from tfpack.models.decoder import DecoderBackbone
from tfpack.models.keras_hub import KerasHubBackbone
from tfpack.models.keras_hub import from_keras_hub
from tfpack.models.legacy import upgrade_keras_file
from tfpack.models.lm_scorer import CausalLMScorer
from tfpack.models.preference import PreferenceModel
from tfpack.models.question_answerer import QuestionAnswerer
from tfpack.models.task import Task
from tfpack.models.text_embedder import TextEmbedder
from tfpack.models.token_classifier import TokenClassifier
from tfpack.models.trunk import TransformerBackbone

# Names before the backbone/task split (docs/model.md, "Migration").
PackedModel = Task
EncoderTask = Task

__all__ = [
    "Backbone",
    "BertClassifier",
    "BertEncoder",
    "BertPretrainer",
    "CausalLM",
    "CausalLMScorer",
    "DecoderBackbone",
    "EncoderTask",
    "KerasHubBackbone",
    "PackedModel",
    "PreferenceModel",
    "QuestionAnswerer",
    "Task",
    "TextEmbedder",
    "TokenClassifier",
    "TransformerBackbone",
    "check_backbone",
    "from_keras_hub",
    "upgrade_keras_file",
]
