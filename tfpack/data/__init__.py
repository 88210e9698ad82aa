"""Input pipelines for packed data: tf.data transforms, example builders, TFRecords.

Every pack has the DESIGN.md features (``input_ids``, ``sequence_ids``,
``position_ids``, ... with fixed shapes ``[L]``, ``[K]``, ``[M]``).

- `pack`: ``ds.apply(tfpack.data.pack(...))``, offline or streaming
  (``window=``), shuffled with a seed, sharded with an ``InputContext``.
- `flatten`: padding-free minibatch flattening (one row per minibatch).
- `FeatureRoles`: which feature is token-level, per-sequence or masked-LM.
- Builders: `bert_pretraining_examples` (raw text -> NSP + MLM examples),
  `causal_lm_examples`, `sft_examples` (prompt/response pairs),
  `classification_examples`.
- Files: `read_google_records` (Google BERT TFRecords), `read_packed`,
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

from tfpack.data.assemble import assemble
from tfpack.data.bert import (
    bert_pretraining_examples,
    compact_vocabulary,
    create_bert_examples,
    examples_to_dataset,
    load_vocab,
    tokenize_documents,
)
from tfpack.data.causal_lm import causal_lm_examples, sft_examples
from tfpack.data.classification import classification_examples
from tfpack.data.features import IGNORE_LABEL, FeatureRoles, packed_feature_spec
from tfpack.data.flatten import flatten
from tfpack.data.offline import pack_records
from tfpack.data.pack import Packer, PackReport, pack
from tfpack.data.records import (
    google_example,
    read_google_records,
    read_packed,
    write_packed,
)
from tfpack.data.windows import streaming_metrics

__all__ = [
    "IGNORE_LABEL",
    "FeatureRoles",
    "PackReport",
    "Packer",
    "assemble",
    "bert_pretraining_examples",
    "causal_lm_examples",
    "classification_examples",
    "compact_vocabulary",
    "create_bert_examples",
    "examples_to_dataset",
    "flatten",
    "google_example",
    "load_vocab",
    "pack",
    "pack_records",
    "packed_feature_spec",
    "read_google_records",
    "read_packed",
    "sft_examples",
    "streaming_metrics",
    "tokenize_documents",
    "write_packed",
]
