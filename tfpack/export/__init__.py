"""SavedModels that serve packed features and unpacked sequences.

- `export_saved_model(model, path=None, *, element_spec=None, overwrite=True)`
  (default path ``saved_models/<model.name>``):
  signatures ``serving_default`` (packed features) and ``serve_sequences``
  (padded token ids, packed inside the graph, outputs in the caller's order).
- `pack_sequences`: the in-graph next-fit packer behind ``serve_sequences``.

Example:

>>> from tfpack.export import export_saved_model
>>> path = export_saved_model(model)  # doctest: +SKIP
"""

from tfpack.export.graph_packing import pack_sequences
from tfpack.export.saved_model import DEFAULT_EXPORT_DIR, export_saved_model

__all__ = ["DEFAULT_EXPORT_DIR", "export_saved_model", "pack_sequences"]
