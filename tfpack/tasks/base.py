"""The task contract: each task declares its features and outputs, and registers.

A *task declaration* (`TaskSpec`) says, in one file under `tfpack/tasks/`,
which label and head-input features a task adds to a pack, which outputs its
model returns, and how each of them packs. Everything else derives from the
registered declarations: the contract table (`tfpack.features`), the tf.data
specs and packing (`tfpack.data`), the input validation, the export
signatures and the reference packer (`tfpack.testing.pack_examples`).

How a feature packs (its ``packing``):

- ``"token"`` (``[L]``): the example holds ``[n]`` values, one per token;
  concatenated pack by pack and padded.
- ``"sequence"`` (``[K]``): the example holds a scalar; stacked per slot.
- ``"prediction"`` (``[M]``): the example holds ``[m]`` values (prediction
  slots such as masked-LM targets); concatenated and padded. All prediction
  features of a task share one partition; the first one read counts them.
- ``"encoder_token"`` (``[Le]``) and ``"decoder_token"`` (``[Ld]``): the two
  rows of a pair pack (an encoder-decoder's input and target sides, each
  with its own length; `tfpack.tasks.seq2seq`): token features of one side.
- ``shift=True`` (``"sequence"`` or ``"prediction"``): the values are
  positions inside the example and get the sequence's offset in the pack
  added (``masked_lm_positions``; extractive-QA start/end positions).

Where its values come from (its ``source``):

- ``"read"``: read from the example, required;
- ``"optional"``: read when present, else left out of the packs;
- ``"ones"``: read when present, else 1.0 (``masked_lm_weights``);
- ``"next_token"``: computed: the next token of the same sequence,
  `IGNORE_LABEL` at its end (causal-LM ``labels``);
- ``"slot"``: computed: the sequence (1..K) of each prediction slot;
- ``"packer"``: computed by the packer for every task (the core features:
  ``sequence_ids``, ``position_ids``, ``cls_positions``, ``sequence_mask``,
  ``example_ids``).

Example: a task tagging every token with a class (one file, then one import
line in `tfpack/tasks/__init__.py`):

>>> from tfpack.tasks import base
>>> spec = base.TaskSpec(
...     name="my_tagging",
...     features=(base.Feature("labels", "int32", "token", "label",
...                            padding=base.IGNORE_LABEL, doc="class of each token"),),
...     outputs={"logits": "token"},
...     detect=(("labels", 1),),
...     reads=("token_type_ids",))
>>> spec.feature("labels").dimension
'L'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tfpack.errors import TfpackError
from tfpack.params import (Boolean, InstanceOf, Options, Real, Text, declare_fields,
                           validate_params)

__all__ = [
    "IGNORE_LABEL", "PACKINGS", "TOKEN_PACKINGS", "SOURCES", "Feature", "Preset",
    "TaskSpec",
    "CORE_FEATURES", "BACKBONE_OUTPUTS", "register", "get", "names", "specs",
    "preset", "preset_names", "detect",
]

# Label value of positions without a target (the Keras / Hugging Face
# convention); the ONE definition of -100 in tfpack.
IGNORE_LABEL = -100

# How a feature packs -> the dimension of its packed form.
PACKINGS = {"token": "L", "sequence": "K", "prediction": "M",
            "encoder_token": "Le", "decoder_token": "Ld"}
# The packings that hold one value per token (of a row or of one side of a pair).
TOKEN_PACKINGS = ("token", "encoder_token", "decoder_token")
SOURCES = ("read", "optional", "ones", "next_token", "slot", "packer")

_NAMES = InstanceOf(tuple, list, description="a tuple of names")
_DETECT = [None, InstanceOf(tuple, list, description="(feature, rank) pairs")]
_DOC = InstanceOf(str, description="a string")


@declare_fields({
    "name": Text(), "dtype": Options("int32", "float32"), "packing": Options(*PACKINGS),
    "role": Options("input", "label", "index"), "padding": Real(), "doc": _DOC,
    "shift": Boolean(), "source": Options(*SOURCES), "tasks": [None, _NAMES],
})
@dataclasses.dataclass(frozen=True)
class Feature:
    """One packed feature and how it packs (see the module docstring).

    Attributes:
        name: the dict key.
        dtype: ``"int32"`` or ``"float32"``.
        packing: ``"token"`` ([L]), ``"sequence"`` ([K]), ``"prediction"`` ([M]),
            or a side of a pair pack: ``"encoder_token"`` ([Le]),
            ``"decoder_token"`` ([Ld]).
        role: ``"input"`` (read by the forward pass), ``"label"`` (read by a
            loss only) or ``"index"`` (carried, read by neither: bookkeeping
            such as ``example_ids``).
        padding: the value of padding slots.
        doc: one line of meaning.
        shift: positions inside the example: add the sequence's offset.
        source: where the values come from (`SOURCES`).
        tasks: filled in by `register`: the task declaring it (``None`` for
            the core features every task has).
    """

    name: str
    dtype: str
    packing: str
    role: str
    padding: int | float = 0
    doc: str = ""
    shift: bool = False
    source: str = "read"
    tasks: tuple[str, ...] | None = None

    def __post_init__(self):
        # Each field is declared (`declare_fields`); here what they imply together.
        if self.shift and (self.packing in TOKEN_PACKINGS or self.dtype != "int32"):
            raise TfpackError(f"Feature {self.name!r} must be declared with valid fields. "
                              "Received: shift=True (only int32 sequence or prediction "
                              "positions shift)")

    @property
    def dimension(self) -> str:
        """``"L"``, ``"K"``, ``"M"``, ``"Le"`` or ``"Ld"``: the packed dimension of
        ``packing``."""
        return PACKINGS[self.packing]

    @property
    def read(self) -> bool:
        """Whether the values come from the example (possibly optional)."""
        return self.source in ("read", "optional", "ones")


@declare_fields({"name": Text(), "require": _NAMES, "omit": _NAMES, "detect": _DETECT})
@dataclasses.dataclass(frozen=True)
class Preset:
    """A named way to pack a task's data (``tfpack.data.pack(roles=name)``).

    Attributes:
        name: the roles name (``"bert"``, ``"sft"``, or the task's own name).
        require: optional features of the task this preset requires.
        omit: optional features of the task this preset never packs.
        detect: ``(feature, rank)`` pairs whose presence in an unpacked
            dataset selects this preset when ``roles`` is not given; the
            preset matching the most pairs wins, earlier registrations first.
            ``()`` matches anything (a fallback); ``None`` never matches.
    """

    name: str
    require: tuple[str, ...] = ()
    omit: tuple[str, ...] = ()
    detect: tuple[tuple[str, int], ...] | None = ()


@declare_fields({
    "name": Text(), "features": InstanceOf(tuple, list, description="a tuple of Feature"),
    "outputs": InstanceOf(Mapping, description="a dict of output name -> packing"),
    "reads": _NAMES, "detect": _DETECT,
    "presets": InstanceOf(tuple, list, description="a tuple of Preset"), "doc": _DOC,
})
@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """A task's declaration: its features, outputs and presets.

    Attributes:
        name: the task's name in the contract (``model.task``).
        features: the features the task adds to a pack (labels, head inputs).
        outputs: model output name -> packing (``"token"``, ``"sequence"``,
            ``"prediction"``): where each output's rows live in a pack, so
            that `tfpack.predict`, `tfpack.testing` and the export can map
            them back to examples.
        reads: core features with ``source="optional"`` that this task packs
            when the input has them (e.g. ``token_type_ids``).
        detect: ``(feature, rank)`` pairs selecting the task's own preset
            (`Preset.detect`; ``None``: only by name).
        presets: further presets (e.g. ``"sft"`` of ``causal_lm``); one
            named like the task replaces its implicit own preset.
        doc: one line.
    """

    name: str
    features: tuple[Feature, ...] = ()
    outputs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    reads: tuple[str, ...] = ()
    detect: tuple[tuple[str, int], ...] | None = None
    presets: tuple[Preset, ...] = ()
    doc: str = ""

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(
            dataclasses.replace(f, tasks=(self.name,)) for f in self.features))
        object.__setattr__(self, "outputs", dict(self.outputs))
        problems = []
        seen = [f.name for f in self.features]
        if len(set(seen)) != len(seen):
            problems.append(f"features named twice: {seen}")
        core = {f.name for f in CORE_FEATURES}
        clash = sorted(core & set(seen))
        if clash:
            problems.append(f"features {clash} are core features")
        bad_reads = [n for n in self.reads if n not in {
            f.name for f in CORE_FEATURES if f.source == "optional"}]
        if bad_reads:
            problems.append(f"reads={bad_reads} (optional core features only)")
        bad_outputs = {k: v for k, v in self.outputs.items() if v not in PACKINGS}
        if bad_outputs:
            problems.append(f"outputs={bad_outputs} (packings {sorted(PACKINGS)})")
        predictions = [f for f in self.features if f.packing == "prediction" and f.read]
        if any(f.packing == "prediction" for f in self.features) and (
                not predictions or predictions[0].source != "read"):
            problems.append("prediction features need a required one first (it counts them)")
        if any(f.source == "slot" and f.packing != "prediction" for f in self.features):
            problems.append("source='slot' is for prediction features")
        if any(f.source == "next_token" and f.packing not in TOKEN_PACKINGS
               for f in self.features):
            problems.append("source='next_token' is for token features")
        if problems:
            raise TfpackError(f"Task {self.name!r} must be declared consistently. "
                              f"Received: {'; '.join(problems)}")

    def feature(self, name: str) -> Feature:
        """The task's (or a core) feature ``name``."""
        for entry in self.features + CORE_FEATURES:
            if entry.name == name:
                return entry
        raise TfpackError(f"Task {self.name!r} has no feature named {name!r}. "
                          f"Received: name={name!r}")

    @property
    def label_features(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features if f.role == "label")


# The features every pack has, whatever the task (token_type_ids only for
# tasks that list it in `reads`). `example_ids` maps slots back to the input:
# the example's position in the dataset (or across `tfpack pack`'s input
# files, in order).
CORE_FEATURES: tuple[Feature, ...] = (
    Feature("input_ids", "int32", "token", "input", 0,
            "tokens of the packed sequences, back to back, then padding"),
    Feature("sequence_ids", "int32", "token", "input", 0,
            "1..K: the sequence of each token; 0 = padding", source="packer"),
    Feature("position_ids", "int32", "token", "input", 0,
            "position inside its own sequence, restarting at 0", source="packer"),
    Feature("token_type_ids", "int32", "token", "input", 0,
            "BERT sentence A/B ids, when the input has them", source="optional"),
    Feature("cls_positions", "int32", "sequence", "input", 0,
            "index of each sequence's first token (0 for absent ones)", source="packer"),
    Feature("sequence_mask", "float32", "sequence", "input", 0.0,
            "1.0 where sequence k exists in the pack", source="packer"),
    Feature("example_ids", "int32", "sequence", "index", -1,
            "index of each sequence in the input (-1: empty slot)", source="packer"),
)

# What every backbone returns (`tfpack.models.backbone`).
BACKBONE_OUTPUTS = {"sequence_output": "token"}

_REGISTRY: dict[str, TaskSpec] = {}


@validate_params({"spec": InstanceOf(TaskSpec)})
def register(spec: TaskSpec) -> TaskSpec:
    """Register a task declaration; returns it (one call at the end of its file).

    A name registered twice with a different declaration is refused, as is a
    preset name another task uses.
    """
    if spec.name in _REGISTRY and _REGISTRY[spec.name] != spec:
        raise TfpackError(f"A task named {spec.name!r} is already registered. "
                          f"Received: a second declaration of {spec.name!r}")
    taken = {p.name: s.name for s in _REGISTRY.values() if s.name != spec.name
             for p in _presets(s)}
    clash = [p.name for p in _presets(spec) if p.name in taken]
    if clash:
        raise TfpackError(f"Preset names must be unique across tasks. Received: {clash} "
                          f"of task {spec.name!r}, already used by {[taken[c] for c in clash]}")
    _REGISTRY[spec.name] = spec
    return spec


@validate_params({"name": Text()})
def get(name: str) -> TaskSpec:
    """The declaration of task ``name``; a clear error otherwise."""
    if name not in _REGISTRY:
        raise TfpackError(f"`task` must be one of {names()}. Received: task={name!r}")
    return _REGISTRY[name]


def names() -> tuple[str, ...]:
    """Registered task names, in registration order."""
    return tuple(_REGISTRY)


def specs() -> tuple[TaskSpec, ...]:
    """Registered declarations, in registration order."""
    return tuple(_REGISTRY.values())


def _presets(spec: TaskSpec) -> tuple[Preset, ...]:
    if any(p.name == spec.name for p in spec.presets):
        return spec.presets
    return (Preset(spec.name, detect=spec.detect),) + spec.presets


def preset_names() -> list[str]:
    """Every preset name (task names included)."""
    return sorted(p.name for s in specs() for p in _presets(s))


@validate_params({"name": Text()})
def preset(name: str) -> tuple[TaskSpec, Preset]:
    """``(task, preset)`` of the preset (or task) called ``name``."""
    for spec in specs():
        for candidate in _presets(spec):
            if candidate.name == name:
                return spec, candidate
    raise TfpackError(f"`roles` must be a FeatureRoles or one of {preset_names()}. "
                      f"Received: roles={name!r}")


@validate_params({"ranks": InstanceOf(Mapping, description="a dict of feature -> rank")})
def detect(ranks: Mapping[str, int]) -> tuple[TaskSpec, Preset]:
    """The preset whose ``detect`` pairs the input's ``{feature: rank}`` matches best."""
    best, score = None, -1
    for spec in specs():
        for candidate in _presets(spec):
            if candidate.detect is None:
                continue
            if all(ranks.get(n) == r for n, r in candidate.detect) and (
                    len(candidate.detect) > score):
                best, score = (spec, candidate), len(candidate.detect)
    if best is None:
        raise TfpackError("No registered task matches the input's features. "
                          f"Received: features {dict(ranks)}")
    return best
