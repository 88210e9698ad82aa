"""Input pipelines for packed data: tf.data transforms, example builders, TFRecords.

Every pack has the DESIGN.md features (``input_ids``, ``sequence_ids``,
``position_ids``, ... with fixed shapes ``[L]``, ``[K]``, ``[M]``).

- `pack`: ``ds.apply(tfpack.data.pack(...))``, offline or streaming
  (``window=``), shuffled with a seed, sharded with an ``InputContext``;
  per host (``input_sharded=True``) over `host_files`, the hosts' counts
  agreed through `strategy_all_gather` or `jax_all_gather`.
- `flatten`: padding-free minibatch flattening (one row per minibatch).
- `FeatureRoles`: which feature is token-level, per-sequence or masked-LM.
- Builders: `bert_pretraining_examples` (raw text -> NSP + MLM examples),
  `causal_lm_examples`, `sft_examples` (prompt/response pairs),
  `classification_examples`, `embedding_examples`,
  `token_classification_examples` (+ `word_predictions`),
  `question_answering_examples` (+ `best_answers`).
- Files: `read_google_records` (Google BERT TFRecords), `read_packed`,
  `packed_output` (an output's metadata: shards, counts, features),
  `write_packed`, and `pack_records` (behind ``tfpack pack``).

Example:

>>> import tfpack
>>> docs = tfpack.datasets.stdlib_documents(max_documents=20)
>>> examples = tfpack.data.bert_pretraining_examples(docs, max_seq_length=128)
>>> packs = examples.apply(tfpack.data.pack(
...     max_length=128, max_sequences_per_pack=3, max_predictions_per_pack=24))
>>> packs.element_spec["masked_lm_positions"].shape
TensorShape([24])
"""

import importlib

from tfpack.data.assemble import assemble
from tfpack.data.features import packed_feature_spec
from tfpack.features import IGNORE_LABEL, FeatureRoles
from tfpack.data.flatten import flatten
from tfpack.data.hosts import host_files, jax_all_gather, strategy_all_gather
from tfpack.data.pack import Packer, PackReport, pack
from tfpack.packing.windows import streaming_metrics

# Names that live in the builders, formats and engines packages, exported here
# too. Resolved on first use: those packages import `tfpack.data` themselves.
_ELSEWHERE = {
    "bert_pretraining_examples": "tfpack.builders",
    "causal_lm_examples": "tfpack.builders",
    "classification_examples": "tfpack.builders",
    "compact_vocabulary": "tfpack.builders",
    "create_bert_examples": "tfpack.builders",
    "examples_to_dataset": "tfpack.builders",
    "load_vocab": "tfpack.builders",
    "sft_examples": "tfpack.builders",
    "preference_examples": "tfpack.builders",
    "tokenize_documents": "tfpack.builders",
    "embedding_examples": "tfpack.builders",
    "token_classification_examples": "tfpack.builders",
    "word_predictions": "tfpack.builders",
    "question_answering_examples": "tfpack.builders",
    "best_answers": "tfpack.builders",
    "google_example": "tfpack.formats",
    "read_google_records": "tfpack.formats",
    "read_packed": "tfpack.formats",
    "packed_output": "tfpack.formats",
    "PackedOutput": "tfpack.formats",
    "write_packed": "tfpack.formats",
    "pack_records": "tfpack.engines.local",
}

__all__ = sorted([
    "IGNORE_LABEL",
    "FeatureRoles",
    "PackReport",
    "Packer",
    "assemble",
    "flatten",
    "host_files",
    "jax_all_gather",
    "pack",
    "packed_feature_spec",
    "streaming_metrics",
    "strategy_all_gather",
    *_ELSEWHERE,
])


def __getattr__(name):
    if name in _ELSEWHERE:
        return getattr(importlib.import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module 'tfpack.data' has no attribute {name!r}")


def __dir__():
    return sorted(set(__all__) | set(globals()))
