"""The compiled part of tfpack (`tfpack/formats/_wire.c`), or one clear error when it is not built.

`tfpack.formats.protos` (serialization, TFRecord framing) and
`tfpack.formats.validation` (the scan of Google records) call it; nothing
else imports ``_wire`` directly.
"""

from tfpack.errors import TfpackError

try:
    from tfpack.formats import _wire as wire
except ImportError as error:  # a source tree whose C extension was never built
    raise TfpackError("tfpack's compiled part (tfpack/formats/_wire.c) is not built: install "
                      "tfpack with `pip install -e .` (or run `python setup.py build_ext "
                      f"--inplace`). Received: {error}") from None

__all__ = ["wire"]
