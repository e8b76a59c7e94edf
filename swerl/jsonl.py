"""JSON and JSON Lines files read the one way every command reports them: a bad line is a `UserError`
naming the file and the line, not a bare JSONDecodeError from somewhere inside a run."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from swerl.errors import UserError


def parse_lines(lines: Iterable[str], path: Path) -> list[Any]:
    """The values of `lines` (read from `path`, numbered from 1), blank lines skipped."""
    return [value for _, value in _numbered(lines, path)]


def _numbered(lines: Iterable[str], path: Path) -> Iterator[tuple[int, Any]]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(f"{path}: line {number} is not JSON ({err.msg})") from None


def stream_records(path: Path | str, required: Sequence[str] = ()) -> Iterator[dict[str, Any]]:
    """The objects of JSONL file `path`, one at a time; a line that is not a JSON object, or one without
    a field of `required`, is a `UserError` naming the file, the line and what it lacks
    (a file of another kind given by mistake fails on its first record, not as a KeyError mid-run)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as lines:
            for number, value in _numbered(lines, path):
                if not isinstance(value, dict):
                    raise UserError(f"{path}: line {number} is a JSON {type(value).__name__}, not an object")
                missing = [key for key in required if key not in value]
                if missing:
                    raise UserError(
                        f"{path}: line {number} has no {', '.join(missing)} (each record needs "
                        f"{', '.join(required)})"
                    )
                yield value
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; expected JSON Lines") from None


def load_json(path: Path | str) -> Any:
    """The JSON value of a file the user named; a file that is not JSON is a `UserError` naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise UserError(f"{path}: not JSON ({err.msg} at line {err.lineno})") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; expected JSON") from None


def read_records(path: Path | str, required: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`stream_records` as a list."""
    return list(stream_records(path, required))
