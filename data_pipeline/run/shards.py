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
from array import array
from collections.abc import Iterable, Mapping
from itertools import accumulate
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from data_pipeline.schema import DROP_SCHEMA
from swerl.errors import UserError
from swerl.paths import MANIFEST, other_files

_DICTIONARY_COLUMNS = frozenset({"source", "repo", "problem_source", "stage", "reason", "author"})
# 2: build/ holds prepared rows (dedup runs before context), a `render` stage writes data/.
# 3: build/ holds only what dedup needs; the fit and expressibility checks moved after dedup, with
#    their drops in render/.
# 4: build/ is named extract/ after its stages; a version 3 output is renamed when a run resumes it
#    (`Manifest.open`) and read as it is by `swerl data stats` (`upgraded`, `stage_dir`).
VERSION = 4
# Stages of older layouts under the name they have now.
_RENAMED_STAGES = {"build": "extract"}


def upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A manifest of version 3 in the vocabulary of this one (its stages renamed); others as they are."""
    if data.get("version") != 3:
        return data
    stages = {_RENAMED_STAGES.get(name, name): info for name, info in data.get("stages", {}).items()}
    return {**data, "version": VERSION, "stages": stages}


def stage_dir(out: Path, stage: str) -> Path:
    """Where `stage` of output `out` keeps its shards: its own name, or the older name an output not
    yet resumed by this version still has."""
    folder = out / stage
    for old, new in _RENAMED_STAGES.items():
        if new == stage and not folder.exists() and (out / old).is_dir():
            return out / old
    return folder


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


# The training rows (`data/`, what users keep and ship) are compressed with zstd, the smallest of the
# common Parquet codecs, at level 3: its window (2 MB against level 1's 512 KB) reaches the rows before
# in a page, which show many of the same files, so on the mining benchmark it writes the data shards
# in 10% less CPU than level 1 and half the bytes (10.9 against 19.1 MB). The run's bookkeeping
# (candidates, extracted rows, drops: a few to a few hundred KB a shard) with snappy: zstd sets up and
# clears its match tables for every column chunk, which on such small tables costs more than twice the
# rest of the write (0.4 against 0.18 ms for a shard of candidates), for files a third smaller.
DATA_COMPRESSION = "zstd"
BOOKKEEPING_COMPRESSION = "snappy"
_LEVELS = {"zstd": 3}


def write_arrow(path: Path, table: pa.Table, compression: str = BOOKKEEPING_COMPRESSION) -> int:
    """Write an Arrow table as one Parquet file atomically; returns the row count.

    The file is encoded in memory and written with one call: Arrow's own file sink costs more to open
    (its filesystem layer) than the whole write of a small table."""
    tmp = _tmp_for(path)
    # Dictionary encoding only for short repeated strings (repo, stage, reason...): for file contents and
    # prompts, which never repeat, it costs time on write and read and saves nothing.
    small = [f.name for f in table.schema if f.name in _DICTIONARY_COLUMNS]
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression=compression,
        compression_level=_LEVELS.get(compression),
        use_dictionary=small,
    )
    with tmp.open("wb") as f:
        f.write(sink.getvalue())
    os.replace(tmp, path)
    return table.num_rows


def write_table(
    path: Path,
    rows: Iterable[Mapping[str, Any]],
    schema: pa.Schema,
    compression: str = BOOKKEEPING_COMPRESSION,
) -> int:
    """Write rows as one Parquet file atomically; returns the row count."""
    return write_arrow(path, rows_to_table(list(rows), schema), compression)


def write_drops(path: Path, drops: list[dict[str, str]]) -> None:
    """A stage's drops of one shard; no file when nothing was dropped (most shards of most stages), like
    `data/`, which holds only shards that kept a row. A file an earlier run left there is removed."""
    if drops:
        write_table(path, drops, DROP_SCHEMA)
    else:
        path.unlink(missing_ok=True)


def read_drops(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """What `write_drops` wrote: no file is no drops."""
    return read_table(path, columns).to_pylist() if path.exists() else []


# Arrow arrays are built here from buffers rather than by `pa.array` / `Table.from_pylist`, which import
# pandas (0.2 s, in the driver before the first shard, so before any worker can start) only to check
# whether their input is a pandas object; `pq.read_table` does too, `ParquetFile.read` does not.
# Mining never uses pandas, so nothing else imports it. Columns holding None (none of the pipeline's
# schemas do) and other types go through `pa.array`.
def rows_to_table(rows: list[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """`pa.Table.from_pylist(rows, schema=schema)`, without pandas for the pipeline's column types."""
    return pa.Table.from_arrays(
        [_array([row[f.name] for row in rows], f.type) for f in schema], schema=schema
    )


def _offsets(lengths: Iterable[int], n: int) -> pa.Array:
    return pa.Array.from_buffers(
        pa.int32(), n + 1, [None, pa.py_buffer(array("i", accumulate(lengths, initial=0)))]
    )


def _array(values: list[Any], kind: pa.DataType) -> pa.Array:
    n = len(values)
    if None in values:
        return pa.array(values, type=kind)
    if kind == pa.string():
        encoded = [value.encode("utf-8") for value in values]
        data = b"".join(encoded)
        if len(data) >= 1 << 31:  # past int32 offsets: pyarrow splits into chunks
            return pa.array(values, type=kind)
        return pa.Array.from_buffers(
            kind, n, [None, _offsets(map(len, encoded), n).buffers()[1], pa.py_buffer(data)]
        )
    if kind == pa.int64():
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(array("q", values))])
    if kind == pa.bool_():
        bits = sum(1 << i for i, value in enumerate(values) if value)
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(bits.to_bytes((n + 7) // 8, "little"))])
    if pa.types.is_list(kind):
        flat = [item for value in values for item in value]
        return pa.ListArray.from_arrays(_offsets(map(len, values), n), _array(flat, kind.value_type))
    if pa.types.is_struct(kind):
        children = [_array([value[f.name] for value in values], f.type) for f in kind]
        return pa.StructArray.from_arrays(children, fields=list(kind))
    return pa.array(values, type=kind)


def read_table(path: Path, columns: list[str] | None = None) -> pa.Table:
    """`pq.read_table(path, columns=columns)` without importing pandas (see `rows_to_table`), on this
    thread: a shard is a few columns of one row group, and Arrow's pool of threads (started afresh in
    each worker process) costs more CPU than it saves there, on cores the other workers are using."""
    with pq.ParquetFile(path) as parquet:
        return parquet.read(columns=columns, use_threads=False)


def read_rows(path: Path) -> list[dict[str, Any]]:
    return read_table(path).to_pylist()


def _changes(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """'key: old -> new' for every leaf that differs between two nested config mappings."""
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found += _changes(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return found


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
                raise UserError(
                    f"{path} is damaged (a machine crash while it was written?); delete {out} to start over"
                ) from None
            if data.get("version") == 3:
                data = cls._rename_stages(out, data)
            if data.get("version") != VERSION:
                raise UserError(
                    f"{out} holds a run of another version of the pipeline (layout {data.get('version')}, "
                    f"this is {VERSION}); use a new output directory or delete this one"
                )
            finished = any(stage.get("shards") for stage in data.get("stages", {}).values())
            if data.get("config") != json.loads(json.dumps(dict(config))) and not finished:
                # A run that failed before finishing anything (a wrong ref, an unreadable source):
                # nothing to keep, so the corrected command starts afresh instead of being refused.
                return cls._fresh(out, config)
            wanted = json.loads(json.dumps(dict(config)))
            if data.get("config") != wanted:
                changed = "; ".join(_changes(data.get("config") or {}, wanted)[:6])
                raise UserError(
                    f"{out} holds a run with a different configuration ({changed}); use a new output "
                    "directory (or delete this one) to change options"
                )
            return cls(out, data)
        # A run writes its manifest before anything else, so files here are someone else's.
        shown = other_files(out, 3)
        if shown:
            raise UserError(
                f"{out} holds other files ({shown}) and no mining run; mine into a new or empty directory"
            )
        return cls._fresh(out, config)

    @classmethod
    def _rename_stages(cls, out: Path, data: dict[str, Any]) -> dict[str, Any]:
        """Move a version 3 output to this layout (folders, then the manifest), so that a run it
        resumes finds the finished shards under their stages' current names. Killed in between, the
        next open finishes it: the manifest says version 3 until the folders are moved."""
        for old, new in _RENAMED_STAGES.items():
            if (out / old).is_dir() and not (out / new).exists():
                (out / old).rename(out / new)
        manifest = cls(out, upgraded(data))
        manifest.save(durable=True)
        return manifest.data

    @classmethod
    def _fresh(cls, out: Path, config: Mapping[str, Any]) -> Manifest:
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
