"""The one door to keras-hub's private names, checked before they are read.

The adapters replay keras-hub's layers, so they read names keras-hub does
not promise to keep (`layer._self_attention_layer`,
`attention._compute_attention(...)`, `keras_hub.src...` functions). Every
such name is declared here, per family (`FAMILIES`: the keras-hub class by
its module, the private attributes its instances have, the private methods
with the arguments tfpack passes them), and read through `private` or
`function`, never inline. `check` runs when an adapter is built: the first
time per family it imports the declared classes and checks every method
(present, and callable with those arguments) and module function; every
time it checks the instance attributes on the backbone's own layers (they
only exist on built layers). A keras-hub that renamed or reshaped one of
them is refused in one line that names the family, the keras-hub version
and the tested ones, instead of failing deep in a trace or, worse,
computing something else. keras-hub is imported by `check` only, so
`import tfpack` does not import it.

Example:

>>> import keras_hub
>>> from tfpack.models import from_keras_hub
>>> adapter = from_keras_hub(keras_hub.models.DistilBertBackbone(
...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
...     intermediate_dim=16, max_sequence_length=16))  # checked here
>>> block = adapter.layers()[0]
>>> type(private(block, "_self_attention_layer")).__name__
'MultiHeadAttention'
"""

import importlib
import inspect

from tfpack.errors import TfpackError
from tfpack.models.keras_hub.declarations import FAMILIES
from tfpack.models.keras_hub.declarations import TESTED_KERAS_HUB_VERSIONS

# Families whose classes and functions this process checked already.
_CHECKED = set()


def _declared():
    """Every private name some family declares (attributes, methods)."""
    names = set()
    for family in FAMILIES.values():
        for hub in family.classes.values():
            for name in hub.attributes:  # "a|b": one of them.
                names.update(name.split("|"))
            names.update(hub.methods)
    return frozenset(names)


_DECLARED = _declared()


def private(obj, name, *default):
    """`getattr(obj, name, *default)` for a private keras-hub `name` that
    a family in `FAMILIES` declares.

    Raises:
        TfpackError: `name` is declared by no family (tfpack's own
            mistake: declare it, so `check` guards it).
    """
    if name not in _DECLARED:
        raise TfpackError(
            f"tfpack reads keras-hub's private `{name}` without declaring "
            "it in tfpack.models.keras_hub.declarations. Received: "
            f"name={name!r}")
    return getattr(obj, name, *default)


def function(module, name):
    """The private function `name` of keras-hub's `module`, as declared
    by a family's `functions` (imports keras-hub)."""
    if not any(name in family.functions.get(module, ())
               for family in FAMILIES.values()):
        raise TfpackError(
            f"tfpack reads keras-hub's private `{module}.{name}` without "
            "declaring it in tfpack.models.keras_hub.declarations. "
            f"Received: name={name!r}")
    return getattr(importlib.import_module(module), name)


def _refuse(family, problem):
    import keras_hub

    label = FAMILIES[family].label
    raise TfpackError(
        f"tfpack's {label} adapter cannot read keras-hub "
        f"{keras_hub.__version__}: {problem} (tested with keras-hub "
        f"{', '.join(TESTED_KERAS_HUB_VERSIONS)})")


def _method_problem(cls, name, arguments):
    """Why `cls.name` cannot be called with `arguments`, or None."""
    method = inspect.getattr_static(cls, name, None)
    if method is None:
        return f"{cls.__name__} has no `{name}`"
    method = getattr(cls, name)
    if not callable(method):
        return f"{cls.__name__}.{name} is not a method"
    positional = [a for a in arguments if not a.endswith("=")]
    keywords = {a[:-1]: None for a in arguments if a.endswith("=")}
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return None  # A builtin without a signature: cannot tell.
    try:
        signature.bind(None, *positional, **keywords)
    except TypeError:
        return (f"{cls.__name__}.{name}{signature} no longer takes "
                f"({', '.join(arguments)})")
    return None


def _class_problems(family):
    """The first problem with `family`'s classes and functions, or None."""
    declared = FAMILIES[family]
    for class_name, hub in declared.classes.items():
        try:
            module = importlib.import_module(hub.module)
        except ImportError:
            return f"there is no module {hub.module} (of {class_name})"
        cls = getattr(module, class_name, None)
        if cls is None:
            return f"{hub.module} has no class {class_name}"
        for name, arguments in hub.methods.items():
            problem = _method_problem(cls, name, arguments)
            if problem is not None:
                return problem
    for module_name, names in declared.functions.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            return f"there is no module {module_name}"
        for name in names:
            if not callable(getattr(module, name, None)):
                return f"{module_name} has no function `{name}`"
    return None


def _sublayers(roots):
    """`roots` and the keras layers among their attributes, two levels
    down (a block's attention layer, and that layer's sublayers)."""
    import keras

    seen, found, level = set(), [], list(roots)
    for _ in range(3):
        following = []
        for obj in level:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            found.append(obj)
            following.extend(v for v in vars(obj).values()
                             if isinstance(v, keras.layers.Layer))
        level = following
    return found


def check(family, backbone, layers):
    """Refuses, in one `TfpackError` line, a keras-hub whose private names
    differ from what `family` declares: its classes' methods and module
    functions (once per process) and its layers' attributes (on
    `backbone` and its `layers`, every time).

    >>> import keras_hub
    >>> backbone = keras_hub.models.GPT2Backbone(
    ...     vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
    ...     intermediate_dim=16, max_sequence_length=16)
    >>> check("gpt", backbone, backbone.transformer_layers) is None
    True
    """
    if family not in _CHECKED:
        problem = _class_problems(family)
        if problem is not None:
            _refuse(family, problem)
        _CHECKED.add(family)
    classes = FAMILIES[family].classes
    for obj in _sublayers([backbone, *layers]):
        for cls in type(obj).__mro__:
            hub = classes.get(cls.__name__)
            if hub is None:
                continue
            missing = [name for name in hub.attributes if not any(
                hasattr(obj, one) for one in name.split("|"))]
            if missing:
                _refuse(family, f"{cls.__name__} has no `{missing[0]}`")


__all__ = ["check", "function", "private"]
