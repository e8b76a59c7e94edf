"""Maps that stay within a fixed amount of memory however long the history: memory in front, sqlite behind.

Three things grow with the number of PRs a run sees: the instance ids already collected (duplicate
detection), the near-duplicate index, and the PR and issue records of GH Archive's first pass. Each is a
`SpillMap`: up to `limit` entries live in a dict; past that, all of them are merged into a sqlite file
and the dict starts empty again. Small runs never touch the disk; a run over years of history keeps a
constant working set and pays a sqlite look-up (tens of microseconds) for what is on disk.

The sqlite files are scratch: they are rebuilt on resume (the stages replay their input in order), so
they are written without a journal or fsync. Values go through JSON (records of strings and numbers).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Merge = Callable[[Any, Any], Any]


def _keep_new(old: Any, new: Any) -> Any:
    return new


class SpillMap:
    """A str -> JSON-able value map; `put` merges into an existing value with `merge(old, new)`."""

    def __init__(self, path: Path | None, limit: int = 200_000, merge: Merge = _keep_new) -> None:
        """`path` is the sqlite file to spill to (None: never spill, for callers with a known bound)."""
        self.path = path
        self.limit = limit
        self.merge = merge
        self._mem: dict[str, Any] = {}
        self._db: sqlite3.Connection | None = None
        self.spilled = 0  # how many times memory was written out (for tests and logs)

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.unlink(missing_ok=True)  # scratch from an earlier (killed) run: rebuilt by replay
            self._db = sqlite3.connect(self.path)
            self._db.execute("PRAGMA journal_mode=OFF")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID")
        return self._db

    def _disk_get(self, key: str) -> Any:
        if self._db is None:
            return None
        row = self._db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def get(self, key: str) -> Any:
        """The merged value of `key` (disk, then memory), or None."""
        if self._db is None:  # nothing spilled yet (small runs: always)
            return self._mem.get(key)
        mem = self._mem.get(key)
        disk = self._disk_get(key)
        if disk is None:
            return mem
        return disk if mem is None else self.merge(disk, mem)

    def __contains__(self, key: str) -> bool:
        return key in self._mem or self._disk_get(key) is not None

    def put(self, key: str, value: Any) -> None:
        old = self._mem.get(key)
        self._mem[key] = value if old is None else self.merge(old, value)
        if len(self._mem) > self.limit and self.path is not None:
            self.flush()

    def flush(self) -> None:
        """Merge everything in memory into the sqlite file and empty memory."""
        if not self._mem or self.path is None:
            return
        db = self._connect()
        rows = []
        for key, value in self._mem.items():
            disk = self._disk_get(key)
            rows.append((key, json.dumps(value if disk is None else self.merge(disk, value))))
        db.executemany("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", rows)
        db.commit()
        self._mem.clear()
        self.spilled += 1

    def items(self) -> Iterator[tuple[str, Any]]:
        """Every (key, value) in key order (str order, which sqlite's BINARY collation agrees with)."""
        if self._db is None:
            yield from sorted(self._mem.items())
            return
        self.flush()
        for key, value in self._db.execute("SELECT k, v FROM kv ORDER BY k"):
            yield key, json.loads(value)

    def membership(self) -> Membership:
        """A picklable membership test for worker processes: the keys themselves while they are few,
        else the sqlite file (opened read-only by each worker)."""
        if self._db is None:
            return Membership(frozenset(self._mem), None)
        self.flush()
        return Membership(frozenset(), str(self.path))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
            assert self.path is not None
            self.path.unlink(missing_ok=True)
        self._mem.clear()


class Membership:
    """`key in membership`, over a frozenset or a read-only sqlite file of a `SpillMap`."""

    def __init__(self, keys: frozenset[str], path: str | None) -> None:
        self.keys = keys
        self.path = path
        self._db: sqlite3.Connection | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"keys": self.keys, "path": self.path, "_db": None}

    def __contains__(self, key: str) -> bool:
        if key in self.keys:
            return True
        if self.path is None:
            return False
        if self._db is None:
            self._db = sqlite3.connect(f"{Path(self.path).resolve().as_uri()}?mode=ro", uri=True)
        return self._db.execute("SELECT 1 FROM kv WHERE k = ?", (key,)).fetchone() is not None
