"""JSON Lines read the one way every command reports them: a bad line is a `UserError` naming the file
and the line, not a bare JSONDecodeError from somewhere inside a run."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from swerl.errors import UserError


def parse_lines(lines: Iterable[str], path: Path) -> list[Any]:
    """The values of `lines` (read from `path`, numbered from 1), blank lines skipped."""
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise UserError(f"{path}: line {number} is not JSON ({err.msg})") from None
    return rows
