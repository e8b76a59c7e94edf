"""Stage files: one JSONL per stage, one row per instance, keyed by `instance_id`.

Every stage reads the previous stage's file and appends to its own. A row is written whole and flushed
before the next instance starts, so a killed run loses at most the instance in flight; rerunning skips
every id already present. A line cut short by a crash is dropped when the file is next opened, since
its instance simply did not finish.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any


class StageFile:
    """Append-only JSONL keyed by instance id. The last row for an id wins when reading."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._repair_tail()

    def _repair_tail(self) -> None:
        """Drop a trailing partial line (no final newline, or not JSON) left by an interrupted write."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if not data:
            return
        keep = len(data)
        if not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
        else:
            last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
            try:
                json.loads(data[last_start:])
            except json.JSONDecodeError:
                keep = last_start
        if keep != len(data):
            with self.path.open("r+b") as f:
                f.truncate(keep)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Every row in file order (duplicates included)."""
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)

    def by_id(self) -> dict[str, dict[str, Any]]:
        """The latest row of each instance id."""
        return {row["instance_id"]: row for row in self.rows()}

    def finished_ids(self) -> set[str]:
        return {row["instance_id"] for row in self.rows()}

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row and make it durable before returning (a resumed run trusts what it finds)."""
        if "instance_id" not in row:
            raise ValueError("a stage row needs an instance_id")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
