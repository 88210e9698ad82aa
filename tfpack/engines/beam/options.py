"""Beam pipeline options for tfpack: an explicit in-process runner by default.

Beam's own default local runner (Prism) downloads a binary at run time; tfpack
never relies on that. Without options, pipelines run on the DirectRunner's
in-process Fn API runner in multi-process mode with 2 workers; options given
by the user come after the defaults, so they win (``--runner=DataflowRunner
--project=... --region=... --temp_location=gs://...``, ``--direct_num_workers=8``).

Example:

>>> opts = pipeline_options("--direct_num_workers=4")
>>> opts.get_all_options()["direct_num_workers"], opts.get_all_options()["runner"]
(4, 'DirectRunner')
"""

from __future__ import annotations

import shlex

from tfpack.errors import TfpackError

__all__ = ["DEFAULT_OPTIONS", "pipeline_options"]

DEFAULT_OPTIONS = (
    "--runner=DirectRunner",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=2",
    # The SDK workers' INFO lines would drown the CLI's one-line output.
    "--default_sdk_harness_log_level=WARNING",
)


def pipeline_options(beam_options=None):
    """`PipelineOptions` from the defaults plus ``beam_options`` (a string or a list)."""
    from apache_beam.options.pipeline_options import PipelineOptions

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
    return PipelineOptions(list(DEFAULT_OPTIONS) + extra)
