"""Input pipelines for packed data: tf.data transforms, example builders, TFRecords.

Every pack has the DESIGN.md features (``input_ids``, ``sequence_ids``,
``position_ids``, ... with fixed shapes ``[L]``, ``[K]``, ``[M]``).

- `pack`: ``ds.apply(tfpack.data.pack(...))``, offline or streaming
  (``window=``), shuffled with a seed, sharded with an ``InputContext``;
  per host (``input_sharded=True``) over `host_files`, the hosts' counts
  agreed through `strategy_all_gather` or `jax_all_gather`.
- `flatten`: padding-free minibatch flattening (one row per minibatch).
- `FeatureRoles` (from `tfpack.features`): which feature is token-level,
  per-sequence or masked-LM.

The examples it packs come from `tfpack.builders` (raw text or ids ->
unpacked examples); packed files are read and written by `tfpack.formats`
(`read_packed`, `write_packed`, `read_google_records`) and `tfpack pack`
(`tfpack.engines`).

Example:

>>> import tfpack
>>> docs = tfpack.datasets.stdlib_documents(max_documents=20)
>>> examples = tfpack.builders.bert_pretraining_examples(docs, max_seq_length=128)
>>> packs = examples.apply(tfpack.data.pack(
...     max_length=128, max_sequences_per_pack=3, max_predictions_per_pack=24))
>>> packs.element_spec["masked_lm_positions"].shape
TensorShape([24])
"""

from tfpack import _tensorflow

_tensorflow.require("tfpack.data (tf.data pipelines)")

from tfpack.data.assemble import assemble
from tfpack.data.features import packed_feature_spec
from tfpack.data.flatten import flatten
from tfpack.data.hosts import host_files, jax_all_gather, strategy_all_gather
from tfpack.data.pack import Packer, PackReport, pack
from tfpack.features import IGNORE_LABEL, FeatureRoles
from tfpack.packing.windows import streaming_metrics

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
])
