"""A system failure while tfpack builds an output names its cause, not always a full disk.

Before: every OSError inside the build (an input removed mid-run, memory a
mapping could not get) read "`output` must be on a file system with room".
"""

import errno
import os

import pytest

from tfpack.errors import TfpackError
from tfpack.formats.outputs import replacing_output


@pytest.mark.parametrize("error, says, not_says", [
    (OSError(errno.ENOSPC, "No space left on device"), "with room for the whole output", "job failed"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), "with room for the whole output", "job failed"),
    (OSError(errno.ENOMEM, "Cannot allocate memory"), "job failed with OSError: Cannot allocate memory",
     "room"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/part-3.tfrecord"),
     "No such file or directory: /data/part-3.tfrecord", "room"),
    (PermissionError(errno.EACCES, "Permission denied", "/data/spill"), "Permission denied: /data/spill",
     "room"),
], ids=["full", "quota", "memory", "input-removed", "permission"])
def test_a_failure_inside_the_build_is_one_line_naming_its_cause(tmp_path, error, says, not_says):
    output = tmp_path / "packed"
    with pytest.raises(TfpackError) as raised:
        with replacing_output(str(output)) as staging:
            open(os.path.join(staging, "part-00000"), "wb").close()
            raise error
    message = str(raised.value)
    assert says in message and not_says not in message, message
    assert f"Received: output={str(output)!r}" in message and "\n" not in message
    assert os.listdir(tmp_path) == []  # no output, no staging folder


def test_tensorflows_resource_exhausted_is_a_full_disk_and_other_op_errors_are_not(tmp_path):
    tf = pytest.importorskip("tensorflow")
    for error, says in ((tf.errors.ResourceExhaustedError(None, None, "disk full"), "with room"),
                        (tf.errors.NotFoundError(None, None, "gone.tfrecord"), "NotFoundError: gone")):
        with pytest.raises(TfpackError, match=says):
            with replacing_output(str(tmp_path / "packed")):
                raise error
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("error, says", [
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/data/a\nb.tfrecord"),
     "/data/a\\nb.tfrecord"),
    (OSError("the store said:\nconnection reset\r\nretry later"), "the store said:\\nconnection"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/x\ty"), "with room"),
], ids=["newline-in-a-file-name", "a-library's-multi-line-OSError", "tab-in-a-full-disk's-name"])
def test_a_failure_whose_text_holds_line_breaks_is_still_one_line(tmp_path, error, says):
    """A file name with a newline (legal on Linux), or a library's OSError of several lines:
    the API's TfpackError must still be one line (the CLI joins lines; an API caller does not)."""
    with pytest.raises(TfpackError) as raised:
        with replacing_output(str(tmp_path / "packed")):
            raise error
    message = str(raised.value)
    assert says in message and "\n" not in message and "\r" not in message, message
