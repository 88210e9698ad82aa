"""Record formats: Google BERT TFRecords in, the packed-output format out.

- `records`: reading Google ``create_pretraining_data`` records
  (`read_google_records`), writing and reading packed TFRecords
  (`write_packed`, `read_packed`).
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

from tfpack.formats.records import (
    google_example,
    read_google_records,
    read_packed,
    write_packed,
)

__all__ = ["google_example", "read_google_records", "read_packed", "write_packed"]
