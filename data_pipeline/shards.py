"""Parquet shards and the run manifest: the pieces that make a killed run resumable.

A shard is written to a temporary name and renamed into place, and only then recorded in the manifest,
which is itself replaced atomically. So after a kill at any instant, a shard listed in the manifest is
complete, and a shard that is not listed is simply produced again (it is a pure function of its input).
The manifest is the single source of truth; files on disk that it does not list are ignored and
overwritten.

A killed process needs no fsync for that (its writes are in the page cache); only a machine crash can
lose them. Instead of paying an fsync per file (a few ms each on a virtual disk: more than the mining
of a shard), the manifest is made durable at most once a second and at the end of every stage, and a
resumed run checks every shard the manifest lists (`shard_intact`: the Parquet footer and the recorded
row count) and produces again any that a crash lost or truncated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST = "manifest.json"
_DICTIONARY_COLUMNS = frozenset({"source", "repo", "problem_source", "stage", "reason", "author"})
# 2: build/ holds prepared rows (dedup runs before context), a `render` stage writes data/.
# 3: build/ holds only what dedup needs; the fit and expressibility checks moved after dedup, with
#    their drops in render/.
VERSION = 3
# Seconds between manifest writes while shards are recorded (see `Manifest.record_shard`).
_RECORD_EVERY = 0.2


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def _fsync_replace(tmp: Path, dest: Path) -> None:
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dest)


def shard_intact(path: Path, rows: int) -> bool:
    """Whether a finished shard is still there, readable, with the row count the manifest recorded."""
    try:
        return pq.read_metadata(path).num_rows == rows
    except (OSError, pa.ArrowException):
        return False


def _tmp_for(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_arrow(path: Path, table: pa.Table) -> int:
    """Write an Arrow table as one Parquet file atomically; returns the row count."""
    tmp = _tmp_for(path)
    # Dictionary encoding only for short repeated strings (repo, stage, reason...): for file contents and
    # prompts, which never repeat, it costs time on write and read and saves nothing.
    small = [f.name for f in table.schema if f.name in _DICTIONARY_COLUMNS]
    pq.write_table(table, tmp, compression="zstd", use_dictionary=small)
    os.replace(tmp, path)
    return table.num_rows


def write_table(path: Path, rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> int:
    """Write rows as one Parquet file atomically; returns the row count."""
    return write_arrow(path, pa.Table.from_pylist(list(rows), schema=schema))


def read_rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


class Manifest:
    """What a run has finished: config, per-stage shard records and counts. Saved atomically."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.out = out
        self.data = data
        self._synced = 0.0
        self._saved = 0.0

    @classmethod
    def open(cls, out: Path, config: Mapping[str, Any]) -> Manifest:
        """Load the manifest of `out`, or start one. A different config is refused, not mixed in."""
        path = out / MANIFEST
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                raise ValueError(
                    f"{path} is damaged (a machine crash while it was written?); delete {out} to start over"
                ) from None
            if data.get("version") != VERSION:
                raise ValueError(
                    f"{out} holds a run of another version of the pipeline (layout {data.get('version')}, "
                    f"this is {VERSION}); use a new output directory or delete this one"
                )
            if data.get("config") != json.loads(json.dumps(dict(config))):
                raise ValueError(
                    f"{out} holds a run with a different configuration; use a new output directory "
                    "(or delete this one) to change options"
                )
            return cls(out, data)
        out.mkdir(parents=True, exist_ok=True)
        manifest = cls(out, {"version": VERSION, "config": dict(config), "stages": {}, "state": {}})
        manifest.save()
        return manifest

    def save(self, durable: bool = False) -> None:
        """Replace the manifest atomically; fsync it when `durable` or a second after the last fsync."""
        path = self.out / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        # No indent: json's C encoder only runs without one, and the manifest is rewritten per shard.
        tmp.write_text(json.dumps(self.data, sort_keys=True, separators=(",", ":")), encoding="utf-8")
        self._saved = time.monotonic()
        if durable or time.monotonic() - self._synced > 1.0:
            _fsync_replace(tmp, path)
            self._synced = time.monotonic()
        else:
            os.replace(tmp, path)

    def stage(self, name: str) -> dict[str, Any]:
        return self.data["stages"].setdefault(name, {"shards": {}, "done": False})

    def shard_done(self, stage: str, index: int) -> bool:
        return shard_name(index) in self.stage(stage)["shards"]

    def record_shard(self, stage: str, index: int, info: Mapping[str, Any]) -> None:
        """Record a finished shard. The manifest is written at most every `_RECORD_EVERY` seconds here
        (and always when a stage finishes): a shard a kill leaves unrecorded is simply produced again,
        identical, so writing the manifest after every shard would only cost time."""
        self.stage(stage)["shards"][shard_name(index)] = dict(info)
        if time.monotonic() - self._saved >= _RECORD_EVERY:
            self.save()

    def finish(self, stage: str, **info: Any) -> None:
        self.stage(stage).update(info, done=True)
        self.save(durable=True)

    def forget_shard(self, stage: str, name: str) -> None:
        """Unrecord a shard whose files are damaged, so that it is produced again."""
        self.stage(stage)["shards"].pop(name, None)
        self.stage(stage)["done"] = False

    def done(self, stage: str) -> bool:
        return bool(self.stage(stage)["done"])

    @property
    def state(self) -> dict[str, Any]:
        """Facts fixed at the first run (resolved head shas) that a resumed run must reuse."""
        return self.data["state"]
