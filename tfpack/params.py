"""Declared parameters: each public parameter's constraint, written once and checked by one validator.

In the style of scikit-learn's ``_parameter_constraints`` / ``validate_params``:
a public function (or a class's ``__init__``) declares every parameter with
`validate_params`; the validator binds the call with `inspect.signature` and
raises ONE `TfpackError` naming the parameter, what must hold and the value::

    `beta` must be a finite number > 0. Received: beta=inf

A constraint is a `Constraint` instance, ``None`` (the value may be None) or a
list of them (any may hold). The declarations are kept on the function
(``__tfpack_params__``), so `tests/test_api_params.py` tries bad values on
every public parameter from the declarations alone; a parameter without a
declaration is refused when the decorator is applied. The command line uses the
same constraints as argparse types (`argument`): a bad flag is argparse's one
stderr line, exit 2.

Token ids are one declared kind (`TokenIds`, `token_ids`): integers (never
bools, floats or strings, not even digit strings), inside int32 and, when the
vocabulary is known, below its size.

Example:

>>> from tfpack.params import Integer, Options, validate_params
>>> @validate_params({"max_length": Integer(1), "truncation": Options("error", "cut")})
... def fit(max_length, truncation="error"):
...     return max_length
>>> fit(8)
8
>>> fit(True)
Traceback (most recent call last):
...
tfpack.errors.TfpackError: `max_length` must be a positive integer. Received: max_length=True
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import math
import numbers
import os
import stat
import tempfile
from collections.abc import Callable, Mapping

import numpy as np

from tfpack.errors import TfpackError

__all__ = [
    "Anything", "Boolean", "Constraint", "Directory", "ExistingFile", "InstanceOf", "Integer",
    "OutputPath", "Options", "Real", "Text", "TokenIds", "argument", "check", "declared", "token_ids",
    "validate_params", "writable_folder", "IntegerPair", "declare_fields",
]

INT32_MAX = 2**31 - 1


class Constraint:
    """One kind of value. ``description`` completes "`name` must be ..."."""

    description = "valid"

    def holds(self, value) -> bool:
        raise NotImplementedError

    def reason(self, value) -> str | None:
        """Why ``value`` is refused, beyond the description (None: nothing to add)."""
        return None

    def bad_values(self) -> list:
        """Values every declared parameter of this kind must refuse (the common API test)."""
        return []


class Anything(Constraint):
    """Not checked here: ``why`` says where it is checked (a nested structure, a model)."""

    def __init__(self, why: str):
        self.description = f"anything ({why})"

    def holds(self, value) -> bool:
        return True


class InstanceOf(Constraint):
    """An instance of ``types`` (never a bool unless ``bool`` is named)."""

    def __init__(self, *types: type, description: str | None = None):
        self.types = types
        self.description = description or "a " + " or ".join(t.__name__ for t in types)

    def holds(self, value) -> bool:
        if isinstance(value, bool) and bool not in self.types:
            return False
        return isinstance(value, self.types)

    def bad_values(self) -> list:
        return [object()]


def _within(value, low, high, closed: str) -> bool:
    above = low is None or (value >= low if closed in ("both", "left") else value > low)
    below = high is None or (value <= high if closed in ("both", "right") else value < high)
    return above and below


def _interval(low, high, closed: str) -> str:
    if low is not None and high is not None:
        left = "[" if closed in ("both", "left") else "("
        right = "]" if closed in ("both", "right") else ")"
        return f" in {left}{low}, {high}{right}"
    if low is not None:
        return f" >= {low}" if closed in ("both", "left") else f" > {low}"
    if high is not None:
        return f" <= {high}" if closed in ("both", "right") else f" < {high}"
    return ""


class Integer(Constraint):
    """An integral number (Python or numpy), never a bool or a float, in ``[low, high]``."""

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high
        words = {None: "an integer", 0: "a non-negative integer", 1: "a positive integer"}
        if high is None and low in words:
            self.description = words[low]
        elif high is None:
            self.description = f"an integer of at least {low}"
        else:
            self.description = "an integer" + _interval(low, high, "both")

    def holds(self, value) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            return False
        return _within(int(value), self.low, self.high, "both")

    def bad_values(self) -> list:
        bad = [True, 2.0, "3", None, float("nan")]
        if self.low is not None:
            bad.append(self.low - 1)
        return bad


class IntegerPair(Constraint):
    """Two integers, each `Integer(low)`: an encoder-decoder's ``(Le, Ld)``.

    >>> IntegerPair(1).holds((128, 32)), IntegerPair(1).holds((128, 0))
    (True, False)
    """

    def __init__(self, low: int | None = None):
        self.each = Integer(low)
        self.description = f"a pair of {self.each.description.split(' ', 1)[1]}s"  # "a pair of positive integers"

    def holds(self, value) -> bool:
        return (isinstance(value, (tuple, list)) and len(value) == 2
                and all(self.each.holds(v) for v in value))

    def bad_values(self) -> list:
        return [(1,), (1, 2, 3), (1.0, 2), (True, 2), [1, None]]


class Real(Constraint):
    """A finite real number (integers too, never a bool) in an interval."""

    def __init__(self, low: float | None = None, high: float | None = None, *,
                 closed: str = "both"):
        self.low, self.high, self.closed = low, high, closed
        self.description = "a finite number" + _interval(low, high, closed)

    def holds(self, value) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            return False
        value = float(value)
        return math.isfinite(value) and _within(value, self.low, self.high, self.closed)

    def bad_values(self) -> list:
        bad = [float("nan"), float("inf"), -float("inf"), True, "1.0", None]
        if self.low is not None:
            bad.append(self.low - 1)
        return bad


class Options(Constraint):
    """One of a fixed set of strings."""

    def __init__(self, *choices: str):
        self.choices = choices
        self.description = f"one of {choices}"

    def holds(self, value) -> bool:
        return isinstance(value, str) and value in self.choices

    def bad_values(self) -> list:
        return ["no-such-option", "", 1, None]


class Boolean(Constraint):
    """True or False (numpy bools too); never 0/1 or a string."""

    description = "a bool (True or False)"

    def holds(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))

    def bad_values(self) -> list:
        return [1, "False", None]


def _path_text(value) -> str | None:
    """The path as a str, or None for what is not a path (ints are file descriptors to
    `open`; a bool would be one too)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _plain(path: str | None) -> bool:
    """A non-empty path without control characters (a newline, a NUL)."""
    return bool(path) and not any(ord(c) < 32 or ord(c) == 127 for c in path)


class Text(Constraint):
    """A non-empty string without control characters (a name, a glob)."""

    def __init__(self, description: str = "a non-empty text without control characters"):
        self.description = description

    def holds(self, value) -> bool:
        return isinstance(value, str) and _plain(value)

    def bad_values(self) -> list:
        return ["", "a\nb", 3, None]


def _remote(path: str) -> bool:
    return "://" in path


class _Path(Constraint):
    """A path (str, bytes or os.PathLike; never an int, which `open` takes as a file
    descriptor) without control characters; remote paths (``gs://``) are not stat'ed."""

    def holds(self, value) -> bool:
        return self.reason(value) is None

    def reason(self, value) -> str | None:
        path = _path_text(value)
        if not _plain(path):
            return "not a non-empty path without control characters"
        return None if _remote(path) else self._local(path)

    def _local(self, path: str) -> str | None:
        raise NotImplementedError


class ExistingFile(_Path):
    """A path to an existing regular file: never a directory, a FIFO or a device such
    as /dev/zero (reading those hangs or never ends)."""

    description = "a path to an existing regular file"

    def _local(self, path: str) -> str | None:
        try:
            mode = os.stat(path).st_mode
        except (OSError, ValueError) as error:
            return type(error).__name__ if not isinstance(error, OSError) else error.strerror
        return None if stat.S_ISREG(mode) else "not a regular file"

    def bad_values(self) -> list:
        return ["", "a\nb", 3, True, "/dev/zero", "/"]


class Directory(_Path):
    """A path to an existing directory."""

    description = "a path to an existing directory"

    def _local(self, path: str) -> str | None:
        return None if os.path.isdir(path) else "not a directory"

    def bad_values(self) -> list:
        return ["", "a\nb", 3, "/dev/zero"]


def writable_folder(folder: str) -> bool:
    """Whether a file can be made in ``folder``: tried (a probe made and removed at once),
    since permission bits say nothing for root or on /proc."""
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".tfpack-probe-", dir=folder)
    except OSError:
        return False
    os.close(descriptor)
    os.unlink(probe)
    return True


class OutputPath(_Path):
    """A path to write: non-empty, no control characters, not an existing entry of the
    other kind, and inside a writable folder (the nearest existing one) - checked before
    any work, so a bad output never costs a planning run."""

    def __init__(self, kind: str = "file"):
        assert kind in ("file", "directory")
        self.kind = kind
        self.description = (f"a new or replaceable {kind} path, without control characters, "
                            "in a writable folder")

    def _local(self, path: str) -> str | None:
        if os.path.exists(path):  # through links: a dangling one names a new path
            is_dir = os.path.isdir(path)
            if is_dir != (self.kind == "directory") or not (is_dir or os.path.isfile(path)):
                return "an existing entry of another kind"
        folder = os.path.dirname(os.path.abspath(path))
        while not os.path.lexists(folder):
            folder = os.path.dirname(folder)
        if not writable_folder(folder):
            return f"{folder} is not a writable folder"
        return None

    def bad_values(self) -> list:
        return ["", "out\nput", 3, True]


class TokenIds(Constraint):
    """A list (or 1-D array) of token ids: integers, never bools, floats or strings,
    in ``[0, vocabulary_size)`` (int32 when the vocabulary is not known)."""

    def __init__(self, vocabulary_size: int | None = None):
        self.vocabulary_size = vocabulary_size
        high = INT32_MAX if vocabulary_size is None else vocabulary_size - 1
        self.description = f"a list of integer token ids in [0, {high}]"

    def holds(self, value) -> bool:
        try:
            token_ids(value, "value", vocabulary_size=self.vocabulary_size)
        except TfpackError:
            return False
        return True

    def bad_values(self) -> list:
        return [[1.7, 2.9], [True, False], ["5", "6"], [2**31 + 5], [-1], "5 6"]


def token_ids(values, name: str, *, vocabulary_size: int | None = None,
              where: str = "") -> np.ndarray:
    """``values`` as int32 ``[n]`` token ids, or one `TfpackError` naming the first bad one
    (``where`` says whose they are: ``"in example 3"``).

    >>> token_ids([3, np.int64(4)], "chosen").tolist()
    [3, 4]
    >>> token_ids([5, 1.7], "chosen", where="in pair 0")
    Traceback (most recent call last):
    ...
    tfpack.errors.TfpackError: `chosen` must be a list of integer token ids in [0, 2147483647]. Received: chosen=1.7 (a float) in pair 0 at token 1
    """
    high = INT32_MAX if vocabulary_size is None else int(vocabulary_size) - 1
    rule = f"`{name}` must be a list of integer token ids in [0, {high}]. Received: {name}="
    where = f" {where}" if where else ""
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise TfpackError(f"{rule}{values!r}"[:300] + where)
    array = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise TfpackError(f"{rule}an array of shape {array.shape}{where}")
    if array.dtype.kind in "iu":  # Already integers: checked at once.
        outside = np.flatnonzero((array < 0) | (array > high))
        if outside.size:
            at = int(outside[0])
            raise TfpackError(f"{rule}{array[at].item()}{where} at token {at}")
        return array.astype(np.int32)
    items = array.tolist()
    for at, value in enumerate(items):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TfpackError(f"{rule}{value!r} (a {type(value).__name__}){where} at token {at}")
        if not 0 <= value <= high:
            raise TfpackError(f"{rule}{value}{where} at token {at}")
    return np.asarray(items, np.int32).reshape(-1)


def _accepts(constraints, value) -> bool:
    return any(value is None if c is None else c.holds(value) for c in constraints)


def _as_list(constraint) -> list:
    return list(constraint) if isinstance(constraint, (list, tuple)) else [constraint]


def describe(constraint) -> str:
    """"a positive integer or None": what a declaration accepts, in words."""
    kinds = _as_list(constraint)
    parts = [c.description for c in kinds if c is not None]
    return " or ".join(parts + ["None"] * (None in kinds))


def check(name: str, value, constraint, *, label: str | None = None) -> None:
    """Raise one `TfpackError` unless ``value`` meets ``constraint`` (a `Constraint`,
    None or a list of them). ``label`` is how the message names it (``--output``)."""
    constraints = _as_list(constraint)
    if _accepts(constraints, value):
        return
    label = label or name
    reasons = [r for c in constraints if c is not None for r in [c.reason(value)] if r]
    shown = os.fspath(value) if isinstance(value, os.PathLike) else value
    text = repr(shown)[:200]
    raise TfpackError(f"`{label}` must be {describe(constraint)}. Received: {label}={text}"
                      + (f" ({reasons[0]})" if reasons else ""))


def validate_params(constraints: dict) -> Callable:
    """Declare and check a callable's parameters (every one must be declared).

    ``self``, ``*args`` and ``**kwargs`` are not declared (``**kwargs`` go on to
    Keras, which checks its own). A missing declaration is an error when the module
    is imported, so no public parameter ships unchecked.
    """
    def decorate(function):
        signature = inspect.signature(function)
        names = [n for n, p in signature.parameters.items() if n != "self"
                 and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        missing = sorted(set(names) - set(constraints))
        extra = sorted(set(constraints) - set(names))
        if missing or extra:
            raise TypeError(f"{function.__qualname__}: undeclared parameters {missing}, "
                            f"declared but absent {extra}")

        @functools.wraps(function)
        def checked(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as error:
                raise TfpackError(f"{function.__qualname__} must be called with its "
                                  f"parameters. Received: {error}") from None
            bound.apply_defaults()
            for name in names:
                check(name, bound.arguments[name], constraints[name])
            return function(*args, **kwargs)

        checked.__tfpack_params__ = dict(constraints)
        # What `inspect.getfullargspec` reads (it does not follow __wrapped__): Keras's
        # `Operation.__new__` names a layer's arguments from it.
        checked.__signature__ = signature
        return checked

    return decorate


def declare_fields(constraints: dict) -> Callable:
    """Declare a dataclass's or NamedTuple's fields: its generated constructor is checked.

    Put it above ``@dataclasses.dataclass`` (a ``default_factory`` field's default is
    checked as the factory makes it); on a NamedTuple, ``__new__`` builds the tuple and
    an ``__init__`` of the same parameters checks them.

    >>> from typing import NamedTuple
    >>> @declare_fields({"count": Integer(0)})
    ... class Result(NamedTuple):
    ...     count: int
    >>> Result(-1)
    Traceback (most recent call last):
    ...
    tfpack.errors.TfpackError: `count` must be a non-negative integer. Received: count=-1
    """
    def decorate(cls):
        if issubclass(cls, tuple):
            original = None
            parameters = list(inspect.signature(cls.__new__).parameters.values())[1:]
            parameters.insert(0, inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY))
        else:
            original = cls.__init__
            factories = {f.name: f.default_factory for f in dataclasses.fields(cls)
                         if f.default_factory is not dataclasses.MISSING}
            parameters = [p.replace(default=factories[p.name]()) if p.name in factories else p
                          for p in inspect.signature(original).parameters.values()]

        def fields(self, *args, **kwargs):
            if original is not None:
                original(self, *args, **kwargs)

        fields.__signature__ = inspect.Signature(parameters)
        fields.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = validate_params(constraints)(fields)
        return cls

    return decorate


def declared(function) -> dict | None:
    """The declaration of a callable (a class: its ``__init__``), or None."""
    if inspect.isclass(function):
        function = function.__init__
    return getattr(function, "__tfpack_params__", None)


def argument(constraint, *, convert: Callable = str) -> Callable:
    """An argparse ``type=``: ``convert`` the text, then check ``constraint``; a bad value
    is argparse's one-line usage error (exit 2).

    >>> positive = argument(Integer(1), convert=int)
    >>> positive("3")
    3
    >>> positive("0")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be a positive integer. Received: 0
    """
    def parse(text: str):
        try:
            value = convert(text)
        except (TypeError, ValueError):
            value = text
        if not _accepts(_as_list(constraint), value):
            reasons = [r for c in _as_list(constraint) if c is not None
                       for r in [c.reason(value)] if r]
            shown = text if _plain(text) else repr(text)
            raise argparse.ArgumentTypeError(
                f"must be {describe(constraint)}. Received: {shown}"
                + (f" ({reasons[0]})" if reasons else ""))
        return value

    parse.__tfpack_constraint__ = constraint
    parse.__name__ = getattr(convert, "__name__", "value")
    return parse
