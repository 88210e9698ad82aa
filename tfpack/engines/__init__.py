"""Engines of ``tfpack pack``: Google TFRecords in, a complete packed output out.

- `tfpack.engines.base`: the one interface (`Engine`), the shared setup
  checks (`Job`) and wrap-up (`finish`), the registry and `pack`.
- `tfpack.engines.local`: one machine, beyond host memory (`pack_records`).
- `tfpack.engines.beam`: Apache Beam, any runner (`pack_tfrecords`; also
  exported as `tfpack.beam`).
- `tfpack.engines.shards`: the one shard builder both engines use, so the same
  examples in the same packs give the same bytes.

Importing this package registers ``local`` and ``beam`` (Beam itself is
imported only when the Beam engine is used).

Example:

>>> from tfpack import engines
>>> engines.names()
['local', 'beam']
"""

from tfpack.engines import local  # noqa: F401  (imported to register, first)
from tfpack.engines import beam  # noqa: F401  (imported to register)
from tfpack.engines.base import Built, Engine, Job, finish, get, names, pack, register

__all__ = ["Built", "Engine", "Job", "finish", "get", "names", "pack", "register"]
