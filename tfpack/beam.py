"""``tfpack pack`` on Apache Beam (`tfpack.engines.beam`), under its public name.

Needs the ``beam`` extra (``pip install 'tfpack[beam]'``). See docs/beam.md.

Example:

>>> import tfpack.beam
>>> stats = tfpack.beam.pack_tfrecords(
...     "wiki_*.tfrecord", "packed", max_length=512, max_sequences_per_pack=3,
...     algorithm="lpfhp")  # doctest: +SKIP
"""

from tfpack.engines.beam import DEFAULT_OPTIONS, pack_tfrecords, pipeline_options

__all__ = ["DEFAULT_OPTIONS", "pack_tfrecords", "pipeline_options"]
