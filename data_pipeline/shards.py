"""Parquet shards and the run manifest: the pieces that make a killed run resumable.

A shard is written to a temporary name and renamed into place, and only then recorded in the manifest,
which is itself replaced atomically. So after a kill at any instant, a shard listed in the manifest is
complete, and a shard that is not listed is simply produced again (it is a pure function of its input).
The manifest is the single source of truth; files on disk that it does not list are ignored and
overwritten.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

MANIFEST = "manifest.json"
VERSION = 1


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def _fsync_replace(tmp: Path, dest: Path) -> None:
    with tmp.open("rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dest)


def write_table(path: Path, rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> int:
    """Write rows as one Parquet file atomically; returns the row count."""
    rows = list(rows)
    table = pa.Table.from_pylist(list(rows), schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    _fsync_replace(tmp, path)
    return len(rows)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


class Manifest:
    """What a run has finished: config, per-stage shard records and counts. Saved atomically."""

    def __init__(self, out: Path, data: dict[str, Any]) -> None:
        self.out = out
        self.data = data

    @classmethod
    def open(cls, out: Path, config: Mapping[str, Any]) -> Manifest:
        """Load the manifest of `out`, or start one. A different config is refused, not mixed in."""
        path = out / MANIFEST
        if path.exists():
            data = json.loads(path.read_text(encoding="utf-8"))
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

    def save(self) -> None:
        path = self.out / MANIFEST
        tmp = path.with_name(f".{MANIFEST}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
        _fsync_replace(tmp, path)

    def stage(self, name: str) -> dict[str, Any]:
        return self.data["stages"].setdefault(name, {"shards": {}, "done": False})

    def shard_done(self, stage: str, index: int) -> bool:
        return shard_name(index) in self.stage(stage)["shards"]

    def record_shard(self, stage: str, index: int, info: Mapping[str, Any]) -> None:
        self.stage(stage)["shards"][shard_name(index)] = dict(info)
        self.save()

    def finish(self, stage: str, **info: Any) -> None:
        self.stage(stage).update(info, done=True)
        self.save()

    def done(self, stage: str) -> bool:
        return bool(self.stage(stage)["done"])

    @property
    def state(self) -> dict[str, Any]:
        """Facts fixed at the first run (resolved head shas) that a resumed run must reuse."""
        return self.data["state"]
