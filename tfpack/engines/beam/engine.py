"""The Beam engine: stages 1-4 of `tfpack.engines.base` as one Beam pipeline.

`BeamEngine` checks its options when it is created (an unknown option or
runner fails before the output is touched) and imports Beam only then;
`pack_tfrecords` is ``tfpack pack --engine beam`` in Python.

Example:

>>> from tfpack.engines import base
>>> base.get("beam").name
'beam'
"""

from __future__ import annotations

import argparse
import contextlib

from tfpack.engines import base
from tfpack.errors import TfpackError
from tfpack.params import Text, argument

# ``--beam-options``: a string (declared here), whose options Beam parses (`pipeline_options`).
_BEAM_OPTIONS = argument(Text("Beam pipeline options (--name=value ...)"))

__all__ = ["BeamEngine", "pack_tfrecords"]


def pack_tfrecords(
    input_pattern,
    output_dir: str,
    *,
    max_length: int,
    max_sequences_per_pack: int | None,
    algorithm: str | None = None,
    plan=None,
    max_predictions_per_pack: int | None = None,
    packs_per_shard: int = 16384,
    seed: int = 0,
    shuffle: bool = True,
    overwrite: bool = False,
    beam_options=None,
    batch_size: int | None = None,
    balance=False,
) -> dict:
    """Pack Google-format TFRecords into packed shards on Apache Beam; returns the stats.

    Arguments as `tfpack.engines.local.pack_records` (the output directory is
    checked, built beside and swapped in the same way, `tfpack.formats.outputs`),
    plus ``beam_options``: Beam pipeline options (a string as on a command
    line, or a list), added after the default in-process runner
    (`tfpack.beam.DEFAULT_OPTIONS`). The output directory must be on a file
    system every worker can write.

    Raises:
        TfpackError: as the local engine does, for the same bad input; an
            unknown option or runner; a failure inside the runner, naming the
            step. Nothing is written under ``output_dir`` in any of these cases.
    """
    job = {k: v for k, v in locals().items() if k in base.JOB_FIELDS}
    return base.pack("beam", input_pattern, output_dir, overwrite=overwrite,
                     engine_options={"beam_options": beam_options}, **job)


@base.register("beam")
class BeamEngine(base.Engine):
    """Stages 1-4 on Apache Beam (`tfpack.engines.beam.pipeline`), any runner.

    Args:
        beam_options: Beam pipeline options, a string as on a command line or
            a list, after `tfpack.beam.DEFAULT_OPTIONS`; checked here
            (`tfpack.beam.pipeline_options`).
        quiet: while the pipeline runs, send what is written to fd 2 (the
            worker processes' TensorFlow start-up and Beam log lines) to a
            discarded file: the CLI's one line is all stderr shows. The
            failure itself still comes back as one `TfpackError`.
    """

    def __init__(self, *, beam_options=None, quiet: bool = False):
        try:
            from tfpack.engines.beam.options import import_beam, pipeline_options

            import_beam()
        except ImportError as error:
            raise TfpackError("`--engine beam` needs Apache Beam (pip install 'tfpack[beam]'). "
                              f"Received: {error}") from None
        self.beam_options = beam_options
        self.quiet = quiet
        self.options = pipeline_options(beam_options)  # checked before any work

    def build(self, job: base.Job, staging: str) -> base.Built:
        import time

        from tfpack.engines.beam.options import pipeline_options
        from tfpack.engines.beam.pipeline import run_pipeline
        from tfpack.formats.records import GOOGLE_FEATURES, list_files

        started = time.perf_counter()
        files = list_files(job.input_pattern, required=GOOGLE_FEATURES)
        options = pipeline_options(self.beam_options, partitions=len(files))
        with _quiet_stderr() if self.quiet else contextlib.nullcontext():
            built = run_pipeline(options, job, files, staging)
        built.seconds["pipeline"] = time.perf_counter() - started
        return built

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--beam-options", default=None, type=_BEAM_OPTIONS,
                            help="Beam pipeline options for --engine beam, written with '=': "
                                 "--beam-options=\"--runner=DataflowRunner --project=P\" "
                                 "(default: in-process DirectRunner, 2 worker processes)")

    @classmethod
    def options_from(cls, args: argparse.Namespace) -> dict:
        import logging
        import os

        # Beam's and Dask's INFO/WARNING lines would drown the CLI's one-line output
        # (Dask reads its level when imported, here and in the workers it starts).
        logging.getLogger("apache_beam").setLevel(logging.ERROR)
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "error")
        return {"beam_options": args.beam_options, "quiet": True}

    @classmethod
    def flags_given(cls, args: argparse.Namespace) -> list[str]:
        return ["--beam-options"] if args.beam_options is not None else []


@contextlib.contextmanager
def _quiet_stderr():
    """fd 2 (inherited by the runner's worker processes) pointed at a discarded file."""
    import sys
    import tempfile

    from tfpack._fds import redirect_fd

    sys.stderr.flush()
    with tempfile.TemporaryFile() as discarded, redirect_fd(2, discarded.fileno()):
        yield
