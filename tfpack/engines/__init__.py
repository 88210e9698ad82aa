"""Engines of ``tfpack pack``: Google TFRecords in, a complete packed output out.

- `tfpack.engines.local`: one machine, beyond host memory (`pack_records`).
- `tfpack.engines.beam`: Apache Beam, any runner (`pack_tfrecords`; also
  exported as `tfpack.beam`).
- `tfpack.engines.shards`: the one shard builder both engines use, so the same
  examples in the same packs give the same bytes.

Example:

>>> from tfpack.engines.local import pack_records
>>> callable(pack_records)
True
"""
