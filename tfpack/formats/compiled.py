"""The compiled part of tfpack (`tfpack/formats/_wire.c`), or one clear error when it is not built.

`tfpack.formats.protos` (serialization, TFRecord framing),
`tfpack.formats.validation` (the scan of Google records) and
`tfpack.engines.spill` (the local engine's spill: examples written with
``writev``, read back with ``pread``) call it; nothing else imports ``_wire``
directly.
"""

from tfpack import _extension

wire = _extension.load("tfpack.formats._wire", "tfpack/formats/_wire.c", "record serialization and scan")

__all__ = ["wire"]
