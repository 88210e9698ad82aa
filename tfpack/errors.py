"""The one error type tfpack raises for bad input.

Every message follows one pattern: what must hold, then what was received::

    `max_length` must be a positive integer. Received: max_length=0

`TfpackError` subclasses `ValueError`, so callers that already catch
`ValueError` keep working; the command line turns it into a message on stderr
and exit status 2.
"""


class TfpackError(ValueError):
    """Bad input to tfpack: a plan, a histogram, a dataset, a file or a flag.

    Example:

    >>> from tfpack.errors import TfpackError
    >>> try:
    ...     raise TfpackError("`max_length` must be positive. Received: max_length=0")
    ... except ValueError as error:
    ...     print(error)
    `max_length` must be positive. Received: max_length=0
    """
