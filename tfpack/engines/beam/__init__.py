"""``tfpack pack`` on Apache Beam: same packs as the local engine, on any runner.

Needs the ``beam`` extra (``pip install 'tfpack[beam]'``). `pack_tfrecords`
runs the pipeline of `tfpack.engines.beam.pipeline` on the runner chosen by the
options (default: the in-process DirectRunner with 2 worker processes; see
`tfpack.engines.beam.options`). See docs/beam.md for Dask, Dataflow, Flink
and Spark. Importing this package does not import Beam (the engine registers
itself without it).

Example:

>>> import tfpack.beam
>>> stats = tfpack.beam.pack_tfrecords(
...     "wiki_*.tfrecord", "packed", max_length=512, max_sequences_per_pack=3,
...     algorithm="lpfhp")  # doctest: +SKIP
"""

from tfpack.engines.beam.engine import BeamEngine, pack_tfrecords
from tfpack.engines.beam.options import DEFAULT_OPTIONS, pipeline_options

__all__ = ["BeamEngine", "DEFAULT_OPTIONS", "pack_tfrecords", "pipeline_options"]
