"""The common API test (issue 33): every public parameter declared, and bad values refused.

From the declarations alone (`tfpack.params`), without a test written per
function: every public callable of ``tfpack`` and its subpackages' ``__all__``
is declared with `validate_params` (or is on `NOT_DECLARED_YET`), and each
declared parameter refuses the bad values of its kind (wrong types, NaN, inf,
negatives, bools for integers, floats for ids, empty strings, paths with a
newline) with ONE `TfpackError` naming it. Every option of every CLI
subcommand has a declared type (or choices, or is a switch), and bad values
(a newline, an empty path, a FIFO or a directory where a file is expected) are
one stderr line, exit 2, nothing written.

`NOT_DECLARED_YET` and `CLI_NOT_DECLARED_YET` only shrink: a name that becomes
declared must leave them (the test says so), and a new public name that is not
declared fails here.
"""

import importlib
import inspect
import math
import os

import pytest

import tfpack
from tests.faults.inprocess import run_cli_here
from tfpack import params
from tfpack.errors import TfpackError

# Public callables not declared yet (issue 33): they check their input by hand. Declare one,
# then remove it from here. Nothing may be added.
NOT_DECLARED_YET = frozenset()

# Every CLI option is declared (issue 33); nothing may be added.
CLI_NOT_DECLARED_YET = frozenset()


def _public():
    """``{"subpackage.name": object}`` of every public class and function."""
    found = {}
    for package in tfpack.__all__:
        if package in ("__version__", "predict"):
            continue
        module = importlib.import_module(f"tfpack.{package}")
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                found[f"{package}.{name}"] = value
    found["predict"] = tfpack.predict
    return found


def _parameters(value) -> list[str]:
    """The parameters a declaration must cover (not self, *args, **kwargs)."""
    try:
        signature = inspect.signature(value)  # a class: its constructor's (namedtuples too)
    except (TypeError, ValueError):
        return ["?"]
    return [n for n, p in signature.parameters.items() if n != "self"
            and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


PUBLIC = _public()
DECLARED = {name: value for name, value in PUBLIC.items() if params.declared(value) is not None}
# Nothing to declare: no parameters (e.g. `tfpack.tasks.names()`).
WITHOUT_PARAMETERS = {name for name, value in PUBLIC.items()
                      if name not in DECLARED and not _parameters(value)}


def test_every_public_callable_is_declared_or_waits_on_the_shrinking_list():
    undeclared = {name for name in PUBLIC if name not in set(DECLARED) | WITHOUT_PARAMETERS}
    assert not undeclared - NOT_DECLARED_YET, (
        "public callables without a declaration (tfpack.params.validate_params): "
        f"{sorted(undeclared - NOT_DECLARED_YET)}")
    assert not NOT_DECLARED_YET - undeclared, (
        f"declared (or gone) now: remove from NOT_DECLARED_YET {sorted(NOT_DECLARED_YET - undeclared)}")
    assert {"predict", "builders.preference_examples", "models.PreferenceModel",
            "data.pack"} <= set(DECLARED)


def test_a_parameter_left_undeclared_is_refused_when_declared():
    with pytest.raises(TypeError, match=r"undeclared parameters \['b'\]"):
        params.validate_params({"a": params.Integer()})(lambda a, b: None)


def _good(constraint):
    """A value ``constraint`` accepts (or None when it cannot be made here)."""
    for kind in params._as_list(constraint):
        if kind is None:
            return None, True
        if isinstance(kind, params.Integer):
            return (kind.low if kind.low is not None else 1), True
        if isinstance(kind, params.Real):
            return (kind.low + 1 if kind.low is not None else 0.5), True
        if isinstance(kind, params.Options):
            return kind.choices[0], True
        if isinstance(kind, params.Boolean):
            return False, True
        if isinstance(kind, params.Anything):
            return object(), True
    return None, False


def _label(value) -> str:
    """A test id that is the same in every process (xdist workers compare
    them): an object without a value of its own is named by its type."""
    text = repr(value)
    return type(value).__name__ if " at 0x" in text else text


def _cases():
    for name, value in sorted(DECLARED.items()):
        for parameter, constraint in params.declared(value).items():
            for bad in (b for c in params._as_list(constraint) if c is not None
                        for b in c.bad_values()):
                if not params._accepts(params._as_list(constraint), bad):
                    yield pytest.param(name, parameter, bad, id=f"{name}-{parameter}-{_label(bad)}")


@pytest.mark.parametrize("name, parameter, bad", list(_cases()))
def test_each_declared_parameter_refuses_its_bad_values_in_one_error(name, parameter, bad):
    function = DECLARED[name]
    target = function.__init__ if inspect.isclass(function) else function
    signature = inspect.signature(target)
    arguments = {}
    for other, spec in signature.parameters.items():
        if other in ("self", parameter) or spec.kind in (spec.VAR_POSITIONAL, spec.VAR_KEYWORD):
            continue
        if spec.default is spec.empty:
            value, made = _good(params.declared(function)[other])
            if not made:
                pytest.skip(f"no value of {other} to make here")
            arguments[other] = value
    arguments[parameter] = bad
    positional = [arguments.pop(n) for n, s in signature.parameters.items()
                  if s.kind == s.POSITIONAL_ONLY and n in arguments]
    with pytest.raises(TfpackError) as error:
        function(*positional, **arguments)
    message = str(error.value)
    assert f"`{parameter}` must be" in message and f"Received: {parameter}=" in message, message
    assert "\n" not in message


# --- the command line ---------------------------------------------------------------------

def _subcommands():
    from tfpack.cli import build_parser

    parser = build_parser()
    (choices,) = [a.choices for a in parser._actions if a.choices and a.dest == "command"]
    return choices


_SWITCHES = ("_StoreTrueAction", "_StoreConstAction", "_HelpAction", "_VersionAction",
             "_StoreFalseAction")


def _options():
    for command, parser in sorted(_subcommands().items()):
        for action in parser._actions:
            if type(action).__name__ in _SWITCHES:
                continue
            flag = action.option_strings[0] if action.option_strings else action.dest
            yield command, flag, action


def test_every_cli_option_has_a_declared_type_or_choices():
    undeclared = {f"{command} {flag}" for command, flag, action in _options()
                  if action.choices is None
                  and getattr(action.type, "__tfpack_constraint__", None) is None}
    assert not undeclared - CLI_NOT_DECLARED_YET, sorted(undeclared - CLI_NOT_DECLARED_YET)
    assert not CLI_NOT_DECLARED_YET - undeclared, (
        f"declared now: remove from CLI_NOT_DECLARED_YET {sorted(CLI_NOT_DECLARED_YET - undeclared)}")


def _bad_texts(constraint, tmp_path):
    fifo = tmp_path / "fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir(exist_ok=True)
    texts = []
    for kind in params._as_list(constraint):
        if isinstance(kind, params.Integer):
            texts += ["1.5", "x", "", "nan", "true"] + (
                [str(kind.low - 1)] if kind.low is not None else [])
        elif isinstance(kind, params.Real):
            texts += ["nan", "inf", "-inf", "x", ""] + (
                [str(kind.low - 1)] if kind.low is not None else [])
        elif isinstance(kind, params.Text):
            texts += ["", "a\nb"]
        elif isinstance(kind, params.ExistingFile):
            texts += ["", "a\nb", str(fifo), str(folder), "/dev/zero", str(tmp_path / "none")]
        elif isinstance(kind, params.Directory):
            texts += ["", "a\nb", str(fifo), str(tmp_path / "none")]
        elif isinstance(kind, params.OutputPath):
            texts += ["", "out\nput", str(fifo), "/proc/tfpack-out"]
    return texts


def _declared_options():
    for command, flag, action in _options():
        constraint = getattr(action.type, "__tfpack_constraint__", None)
        if constraint is not None and flag.startswith("--"):
            yield command, flag, action.type, constraint


@pytest.mark.parametrize("command, flag, parse, constraint", [
    pytest.param(*option, id=f"{option[0]}{option[1]}") for option in _declared_options()])
def test_each_cli_option_refuses_bad_values_in_one_line_exit_2_nothing_written(
        command, flag, parse, constraint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text in _bad_texts(constraint, tmp_path):
        try:
            parse(text)
        except Exception:  # noqa: BLE001 - refused by the declared type: now the whole CLI
            pass
        else:
            continue  # accepted by the type itself (e.g. 'none'): not a bad value here
        before = sorted(os.listdir(tmp_path))
        result = run_cli_here(command, f"{flag}={text}")
        lines = result.stderr.splitlines()
        assert result.returncode == 2 and len(lines) == 1 and flag in lines[0], (text, result)
        assert "Traceback" not in result.stderr
        assert sorted(os.listdir(tmp_path)) == before


def test_nan_and_inf_are_refused_by_every_declared_real():
    for name, value in DECLARED.items():
        for parameter, constraint in params.declared(value).items():
            for kind in params._as_list(constraint):
                if isinstance(kind, params.Real):
                    for bad in (math.nan, math.inf):
                        assert not kind.holds(bad), (name, parameter, bad)
