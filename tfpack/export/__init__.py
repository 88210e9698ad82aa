"""SavedModels that serve packed features and unpacked sequences in every TF loader.

- `export_saved_model(model, path=None, *, element_spec=None, max_length=None,
  max_sequences_per_pack=None, max_predictions_per_pack=None, padding_id=None,
  overwrite=True)` (default path ``saved_models/<model.name>``): signatures
  ``serving_default`` (packed features), ``serve_sequences`` (token ids and
  lengths, packed inside the graph, outputs in the caller's order),
  ``serve_sequences_with_token_types`` and, with a ``padding_id``,
  ``serve_padded_sequences``. Loads in `tf.saved_model.load`, the TF1
  session loader, ``saved_model_cli run`` and TensorFlow Serving.
- `serving_lengths`: the L/K/M an export serves at (stated or trained at,
  never guessed).
- `pack_sequences`: the in-graph best-fit-decreasing packer behind
  ``serve_sequences``.

Example:

>>> from tfpack.export import export_saved_model
>>> path = export_saved_model(model, max_length=128)  # doctest: +SKIP
"""

from tfpack import _tensorflow

_tensorflow.require("tfpack.export (SavedModels)")

from tfpack.export.graph_packing import pack_sequences
from tfpack.export.saved_model import DEFAULT_EXPORT_DIR, export_saved_model
from tfpack.export.shapes import serving_lengths

__all__ = ["DEFAULT_EXPORT_DIR", "export_saved_model", "pack_sequences", "serving_lengths"]
