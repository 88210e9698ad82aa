"""Beam pipeline options for tfpack: checked by name, an in-process runner by default.

Beam's own default local runner (Prism) downloads a binary at run time; tfpack
never relies on that. Without options, pipelines run on the DirectRunner's
in-process Fn API runner in multi-process mode with 2 workers; options given
by the user come after the defaults, so they win (``--runner=DataflowRunner
--project=... --region=... --temp_location=gs://...``, ``--direct_num_workers=8``,
``--runner=apache_beam.runners.dask.dask_runner.DaskRunner
--dask_client_address=tcp://scheduler:8786``).

Beam itself ignores an option it does not know (a typo such as
``--direct_num_worker=8`` would silently do nothing) and fails late, with a
traceback, on an unknown runner. `pipeline_options` refuses both at once, by
name: the runner is looked up first (which also registers its own options,
e.g. the Dask runner's ``--dask_*``), then every option must be one that Beam
or that runner defines.

Example:

>>> opts = pipeline_options("--direct_num_workers=4")
>>> opts.get_all_options()["direct_num_workers"], opts.get_all_options()["runner"]
(4, 'DirectRunner')
>>> pipeline_options("--direct_num_worker=8")
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `beam_options` must be options of Beam or of its runner. Received: unknown option --direct_num_worker (did you mean --direct_num_workers?)
"""

from __future__ import annotations

import contextlib
import difflib
import io
import logging
import shlex
import sys

from tfpack.errors import TfpackError

__all__ = ["DEFAULT_OPTIONS", "pipeline_options"]

DEFAULT_OPTIONS = (
    "--runner=DirectRunner",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=2",
    # The SDK workers' INFO lines would drown the CLI's one-line output.
    "--default_sdk_harness_log_level=WARNING",
)


def pipeline_options(beam_options=None, *, partitions: int | None = None):
    """`PipelineOptions` from the defaults plus ``beam_options`` (a string or a list).

    ``partitions`` (the number of input files, when known): on Beam's Dask
    runner, without ``--dask_npartitions`` or ``--dask_partition_size``, the
    work is split into that many partitions. The runner's own default puts up
    to 128 elements in one partition, so a job of a few dozen input files
    would run on one worker however large the cluster.

    Raises:
        TfpackError: ``beam_options`` that do not parse, an unknown runner (or
            one whose extra is not installed), or an option that neither Beam
            nor the runner defines; each named.
    """
    import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    if beam_options is None:
        extra = []
    elif isinstance(beam_options, str):
        try:
            extra = shlex.split(beam_options)
        except ValueError as error:
            raise TfpackError(f"`beam_options` must parse like a command line. "
                              f"Received: beam_options={beam_options!r} ({error})") from None
    else:
        extra = [str(option) for option in beam_options]
    unknown = [o for o in extra if not o.startswith("--")]
    if unknown:
        raise TfpackError("`beam_options` must be --name=value options. "
                          f"Received: {unknown[0]!r} in beam_options={beam_options!r}")
    options = PipelineOptions(list(DEFAULT_OPTIONS) + extra)
    runner = options.view_as(StandardOptions).runner
    _check_runner(runner)
    known = _check_names(options)
    address = str(known.get("address") or "")
    if str(runner).endswith("DaskRunner") and address.startswith("inproc://"):
        # Beam's Dask runner computes side inputs inside tasks; on threads sharing one
        # process a global combine gets two values and fails with a bare AssertionError.
        raise TfpackError(
            "Beam's Dask runner must have worker processes (start the cluster with "
            "processes=True, the default). Received: --dask_client_address="
            f"{address} (an in-process, threads-only cluster)")
    if (partitions and str(runner).endswith("DaskRunner") and known.get("npartitions") is None
            and known.get("partition_size") is None):
        options = PipelineOptions(list(DEFAULT_OPTIONS) + extra
                                  + [f"--dask_npartitions={int(partitions)}"])
    return options


class _DropApitoolsWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("apitools not found")


def import_beam() -> None:
    """Imports Apache Beam without its import-time warning about GCP clients.

    ``import apache_beam`` logs "apitools not found, and bigquery client
    libraries are not available" on the root logger when the optional GCP
    clients are missing; tfpack does not use them, and the CLI promises one
    stderr line per error. The filter lives only for the import.
    """
    if "apache_beam" in sys.modules:
        return
    root, quiet = logging.getLogger(), _DropApitoolsWarning()
    root.addFilter(quiet)
    try:
        import apache_beam  # noqa: F401
    finally:
        root.removeFilter(quiet)


def _check_runner(name) -> None:
    """The runner must exist and import (its module also registers its own options)."""
    from apache_beam.runners.runner import create_runner

    root, quiet = logging.getLogger(), _DropApitoolsWarning()
    root.addFilter(quiet)  # a runner's modules may import Beam's GCP I/O (apitools warning)
    try:
        create_runner(name)
    except (ValueError, ImportError, AttributeError) as error:
        reason = str(error).split("\n")[0]
        if isinstance(error, ValueError):
            reason = "not a runner Beam knows; give a known name or module.path.RunnerClass"
        raise TfpackError(f"`--runner` must name an installed Beam runner. Received: "
                          f"--runner={name} ({type(error).__name__}: {reason})") from None
    finally:
        root.removeFilter(quiet)


def _check_names(options) -> dict:
    """Every option must be defined by Beam or by the runner; returns them all."""
    beam_log = logging.getLogger("apache_beam.options.pipeline_options")
    level = beam_log.level
    beam_log.setLevel(logging.ERROR)  # Beam warns "Discarding unparseable args"; we refuse.
    parsers = []  # Beam's parser, to suggest flags by their names (not their internal `dest`)
    usage = io.StringIO()
    try:  # a bad value: argparse prints the whole usage (100+ lines) and exits
        with contextlib.redirect_stderr(usage):
            known = options.get_all_options(add_extra_args_fn=parsers.append)
            given = options.get_all_options(retain_unknown_options=True)
    except SystemExit:
        lines = [l for l in usage.getvalue().splitlines() if l.strip()]
        why = lines[-1].split("error: ", 1)[-1] if lines else "unparseable"
        raise TfpackError(f"`beam_options` must hold valid values. Received: {why}") from None
    finally:
        beam_log.setLevel(level)
    unknown = sorted(set(given) - set(known))
    if unknown:
        name = unknown[0]
        flags = [flag[2:] for action in parsers[0]._actions for flag in action.option_strings
                 if flag.startswith("--")]
        close = difflib.get_close_matches(name, flags, n=1)
        hint = f" (did you mean --{close[0]}?)" if close else ""
        more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
        raise TfpackError("`beam_options` must be options of Beam or of its runner. "
                          f"Received: unknown option --{name}{hint}{more}")
    workers = known.get("direct_num_workers")
    if workers is not None and workers < 0:  # Beam fails late: "list index out of range"
        raise TfpackError("`--direct_num_workers` must be >= 0 (0: one per core). "
                          f"Received: --direct_num_workers={workers}")
    return known
