"""Typed run configurations: load YAML and `--set key=value` overrides into a config dataclass, checked.

Why pydantic: the configs are plain dataclasses (cheap to build in tests, documented in their docstrings,
read by the trainers as attributes). `pydantic.TypeAdapter` validates a plain dataclass from its type
hints, `Annotated` ranges (`annotated_types.Ge`, ...) and `Literal` choices, with lax conversions a YAML
user expects (`learning_rate: 1e-5` is a string to PyYAML and a float to us; `max_steps: "20"` is 20)
and errors that name the field, while `max_steps: 2.5` or `scale_rewards: grup` are refused. Writing
those rules by hand would repeat what the type hints already say. pydantic is imported only when a
config is loaded, so commands that load none start without it.

Every error is a `UserError` naming the file (or `--set`), the key and what was expected, raised before
any model is loaded.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from annotated_types import Ge, Gt, Le, Lt

from swerl.errors import UserError

T = TypeVar("T")

# Constrained types for config fields: a range is part of the type, so it is checked on load and shown
# by `--fields`.
PositiveInt = Annotated[int, Ge(1)]
NonNegativeInt = Annotated[int, Ge(0)]
PositiveFloat = Annotated[float, Gt(0)]
NonNegativeFloat = Annotated[float, Ge(0)]
UnitInterval = Annotated[float, Gt(0), Le(1)]
"""(0, 1]: top-p, fractions that must keep something."""
BelowOne = Annotated[float, Ge(0), Lt(1)]
"""[0, 1): PPO clip epsilons (1 - epsilon must stay positive), Adam's betas."""


@dataclass(frozen=True)
class FieldDoc:
    """One config field as `--fields` shows it."""

    name: str
    type: str
    default: Any
    help: str


def _docstring_help(cls: type) -> dict[str, str]:
    """Field help from the `Attributes:` sections of `cls` and its bases (a subclass's text wins).

    An entry names one field (`beta: ...`) or several (`temperature, top_p: ...`, `a / b: ...`);
    continuation lines are indented deeper than the entry."""
    found: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        doc = klass.__dict__.get("__doc__") or ""
        _, sep, rest = doc.partition("Attributes:")
        if not sep:
            continue
        entries: list[tuple[list[str], list[str]]] = []
        indent = None
        for line in rest.splitlines()[1:]:
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            if depth < indent:
                break
            head, colon, text = line.strip().partition(":")
            if depth == indent and colon and re.fullmatch(r"[\w ,/]+", head):
                entries.append(([n.strip() for n in re.split(r"[,/]", head) if n.strip()], [text.strip()]))
            elif entries:
                entries[-1][1].append(line.strip())
        for names, text in entries:
            for name in names:
                found[name] = " ".join(text)
    return found


def _type_text(hint: Any) -> str:
    """A type hint as a reader wants it: `int >= 1`, `'group' | 'batch'`, `float | None`."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        base, *marks = typing.get_args(hint)
        bounds = []
        for mark in marks:
            for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
                if hasattr(mark, attr):
                    bounds.append(f"{op} {getattr(mark, attr)}")
        return _type_text(base) + (" " + ", ".join(bounds) if bounds else "")
    if origin is Literal:
        return " | ".join(repr(v) for v in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_text(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and origin is None:
        return hint.__name__
    return str(hint).replace("typing.", "")


def field_docs(cls: type) -> list[FieldDoc]:
    """Every field of config class `cls` with its type, default and help, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    helps = _docstring_help(cls)
    docs = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        docs.append(FieldDoc(f.name, _type_text(hints[f.name]), default, helps.get(f.name, "")))
    return docs


def format_fields(cls: type) -> str:
    """The `--fields` listing: one block per field."""
    lines = [f"{cls.__name__} fields (YAML keys; override one with --set KEY=VALUE):", ""]
    for doc in field_docs(cls):
        lines.append(f"  {doc.name}: {doc.type} = {doc.default!r}")
        if doc.help:
            lines.append(f"      {doc.help}")
    return "\n".join(lines)


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


def missing_model(name: str, tokenizer: bool = False) -> str | None:
    """Why model (with `tokenizer`, tokenizer) `name` cannot be loaded, if that is clear without the
    network: it names a local directory that does not exist, or one that is not a save_pretrained folder
    (e.g. a folder of data given by mistake, which transformers reports as a missing tokenizer backend).
    A Hugging Face hub id is `name` or `owner/name`; a path with more parts, or one that starts with `.`,
    `/` or `~`, cannot be one."""
    path = Path(name)
    if path.exists():
        if not path.is_dir():
            return f"{name} is a file; a model is a directory"
        # save_pretrained always writes `marker` (a checkpoint-N too). A LoRA run's output (RUN/final,
        # checkpoint-N) holds adapters instead, which the loaders merge onto the base they name.
        kind, marker = ("tokenizer", "tokenizer_config.json") if tokenizer else ("model", "config.json")
        if (path / marker).is_file():
            return None
        if not tokenizer:
            from swerl.models.adapters import is_adapter_dir

            if is_adapter_dir(path):
                return None
        return f"{name} is not a {kind} directory (no {marker}: save_pretrained writes one)"
    if _HUB_ID.fullmatch(name) and not looks_local(name):
        return None
    return f"no such model directory {name}"


def looks_local(name: str) -> bool:
    """Whether model name `name` means a path on this machine rather than a hub id: it exists, starts
    with `.`, `~` or `/`, or is not a hub id at all. `runs/model` could be the hub id of owner "runs",
    but not when ./runs is a directory here."""
    path = Path(name).expanduser()
    if path.exists() or name.startswith((".", "~", "/")) or not _HUB_ID.fullmatch(name):
        return True
    return len(path.parts) > 1 and path.parent.is_dir()


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"no config file {path}") from None
    except IsADirectoryError:
        raise UserError(f"{path} is a directory; --config takes a YAML file") from None
    except UnicodeDecodeError as err:
        raise UserError(f"{path}: not UTF-8 text (byte {err.start}); --config takes a YAML file") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(f"{path}: not valid YAML{where}: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        kind = type(loaded).__name__
        raise UserError(f"{path}: expected a mapping of config fields (key: value), got a {kind}")
    _refuse_repeated_keys(path, yaml.compose(text, Loader=yaml.SafeLoader))
    return loaded


def _refuse_repeated_keys(path: Path, node: Any) -> None:
    """YAML keeps the last of two equal keys in a mapping, so a field set twice (an edit appended below
    the original line) would silently take the later value; refuse it, naming both lines."""
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_repeated_keys(path, item)
    if not isinstance(node, yaml.MappingNode):
        return
    first: dict[Any, int] = {}
    for key, value in node.value:
        line = key.start_mark.line + 1
        if isinstance(key, yaml.ScalarNode) and key.value in first:
            lines = f"lines {first[key.value]} and {line}"
            raise UserError(f"{path}: {key.value} is set twice ({lines}); keep one")
        if isinstance(key, yaml.ScalarNode):
            first[key.value] = line
        _refuse_repeated_keys(path, value)


def _accepts(hint: Any, kind: type) -> bool:
    """Whether a field's type (through `Annotated` and unions) takes values of `kind`."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        return _accepts(typing.get_args(hint)[0], kind)
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, kind) for arg in typing.get_args(hint))
    return hint is kind


def _override_value(raw: str, hint: Any) -> Any:
    """A `--set` value parsed for its field: YAML scalars (`1e-5`, `null`, `true`, `[a, b]`), except that
    a field that takes text keeps the text as written (`--set output_dir=2024` is the folder "2024")."""
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise UserError(f"--set: cannot parse {raw!r} ({getattr(err, 'problem', err)})") from None
    if _accepts(hint, str) and value is not None and not isinstance(value, str | bool):
        return raw
    return value


def _unknown(keys: Sequence[str], names: Sequence[str], origin: str, cls: type) -> UserError:
    parts = []
    for key in keys:
        close = difflib.get_close_matches(key, names, n=1)
        parts.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return UserError(f"{origin}: unknown {cls.__name__} field {', '.join(parts)}; list them with --fields")


def _describe(error: dict[str, Any]) -> str:
    message = error["msg"]
    if error["type"] == "missing":
        return "required"
    shown = repr(error.get("input"))
    return f"{message[0].lower()}{message[1:]} (got {shown[:80]})"


def load_config(cls: type[T], path: str | Path | None = None, overrides: Sequence[str] = ()) -> T:
    """Build config class `cls` from a YAML file plus `key=value` overrides, every value checked against
    the field's type, range and choices; then the class's own cross-field `problems()`, if it has one."""
    hints = typing.get_type_hints(cls, include_extras=True)
    names = [f.name for f in dataclasses.fields(cls)]
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    file_label = str(path) if path is not None else "config"
    if path is not None:
        loaded = _read_yaml(Path(path))
        unknown = [str(k) for k in loaded if k not in names]
        if unknown:
            raise _unknown(unknown, names, file_label, cls)
        values.update(loaded)
        origins.update(dict.fromkeys(loaded, file_label))
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"--set {item!r}: expected KEY=VALUE")
        if key not in names:
            raise _unknown([key], names, "--set", cls)
        if not raw.strip():
            # YAML reads an empty value as null, which then failed as "got None": a value left out by
            # mistake (a shell variable that was empty) deserves its own words.
            none = f" (write --set {key}=null to mean none)" if _accepts(hints[key], type(None)) else ""
            raise UserError(f"--set {key}=: no value after '='{none}")
        values[key] = _override_value(raw, hints[key])
        origins[key] = f"--set {key}"
    return _validated(cls, values, origins, file_label)


def _validated(cls: type[T], values: dict[str, Any], origins: dict[str, str], default_label: str) -> T:
    """`values` checked and converted by pydantic, then by the class's cross-field `problems()`; each
    error labelled with where its key was set (a file, `--set`, or `default_label`)."""
    from pydantic import TypeAdapter, ValidationError

    def label(key: str) -> str:
        where = origins.get(key, default_label)
        return where if where.startswith("--set") else f"{where}: {key}"

    try:
        config = TypeAdapter(cls).validate_python(values)
    except ValidationError as err:
        raise UserError(
            "; ".join(f"{label(str(e['loc'][0]) if e['loc'] else '?')}: {_describe(e)}" for e in err.errors())
        ) from None
    found = getattr(config, "problems", lambda: [])()
    if found:
        raise UserError("; ".join(f"{label(key)}: {text}" for key, text in found))
    for key, text in getattr(config, "ignored_settings", lambda keys: [])(origins):
        print(f"swerl: warning: {label(key)}: {text}", file=sys.stderr)
    return config
