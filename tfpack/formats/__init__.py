"""Record formats: Google BERT TFRecords in, the packed-output format out.

- `records`: reading Google ``create_pretraining_data`` records
  (`read_google_records`), writing and reading packed TFRecords
  (`write_packed`, `read_packed`).
- `packed`: opening packed outputs in metadata time (`packed_output`) and
  reading them with each block checked as it is read (`read_packed`).
- `blocks`: the block digests writers record and readers check.
- `protos`: fast numpy serialization of `tf.train.Example` records.
- `validation`: every input record checked in one place.
- `rows`: ragged reads made dense (`dense_rows`).
- `manifest`: atomic shards and the manifest written last.
- `outputs`: output directories built beside and swapped in whole.

The public functions are also exported by `tfpack.data`.

Example:

>>> from tfpack.formats import manifest
>>> manifest.MANIFEST
'manifest.json'
"""

from tfpack import _tensorflow

_tensorflow.require("tfpack.formats (TFRecords)")

from tfpack.formats.records import (
    PackedOutput,
    google_example,
    packed_output,
    read_google_records,
    read_packed,
    write_packed,
)

__all__ = ["PackedOutput", "google_example", "packed_output", "read_google_records",
           "read_packed", "write_packed"]
