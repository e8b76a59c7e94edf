"""Checks on paths a command reads or writes, shared by argument types and config checks, and where a
mining output keeps its rows: the reading side of the format `data_pipeline` writes, which trainers,
validation and export read without importing the pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from swerl.errors import UserError

MANIFEST = "manifest.json"


def file_in_the_way(path: Path) -> Path | None:
    """The file, if any, that stops `path` from being a directory: `path` itself or the nearest of its
    parents that exists, when that one is not a directory (a folder cannot be made inside a file)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def is_mining_output(path: Path) -> bool:
    """Whether `path` is a `swerl data mine` output folder (its rows in data/, its manifest beside)."""
    return (
        path.is_dir()
        and not any(path.glob("*.parquet"))
        and (path / MANIFEST).is_file()
        and (path / "data").is_dir()
    )


def row_files(path: Path) -> list[Path]:
    """The files a trainer reads for rows file or folder `path`, in the order it reads them: a mining
    output's data shards as its manifest records them (a UserError while the run is unfinished: its
    data/ may hold shards the run will write again, which no count of the run includes), a folder's
    .parquet files sorted, a file itself, nothing if absent."""
    if is_mining_output(path):
        return finished_shards(path)
    if path.is_dir():
        return sorted(path.glob("*.parquet"))
    return [path] if path.is_file() else []


def read_manifest(out: Path) -> dict[str, Any]:
    """The manifest of mining output `out` (a UserError when `out` is not one)."""
    path = out / MANIFEST
    if not path.is_file():
        raise UserError(f"{out} is not a mining output directory (no {MANIFEST})")
    return json.loads(path.read_text(encoding="utf-8"))


def data_shards(out: Path, manifest: dict[str, Any]) -> list[Path]:
    """The data shards the manifest records as rendered, in order (a shard that kept no row has no
    file). A run stopped mid-way can leave shards written but not yet recorded (the resumed run writes
    them again), which the funnel does not count either, so no reader of the rows should."""
    rendered = manifest["stages"].get("render", {}).get("shards", {})
    return [out / "data" / name for name, info in sorted(rendered.items()) if info["rows"]]


def finished_shards(out: Path) -> list[Path]:
    """`data_shards` of a mining output whose run has finished: while it has not, its data/ may hold
    shards the resumed run writes again and its counts are partial, so no reader should take its rows."""
    manifest = read_manifest(out)
    if not manifest["stages"].get("render", {}).get("done"):
        raise UserError(
            f"{out}: the mining run is not finished; resume it (the same swerl data mine command) first"
        )
    return data_shards(out, manifest)


def other_files(folder: Path, shown: int) -> str | None:
    """The names in `folder`, hidden ones (a .gitkeep) left out, as a short list for a message: the
    first `shown` of them, with ", ..." when there are more; None when there are none."""
    names = sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    if not names:
        return None
    return ", ".join(names[:shown]) + (", ..." if len(names) > shown else "")


_HELD: dict[Path, int] = {}


def hold_folder(folder: Path, what: str) -> None:
    """Claim `folder` for this process until it exits (an advisory lock on the folder itself, so nothing
    is left in it), so a second command into the same folder stops at once instead of interleaving its
    metrics and checkpoints with the first's (two runs started seconds apart both passed every check,
    because the first writes its files only later). Filesystems without locks are let through."""
    import fcntl
    import os

    folder = folder.resolve()
    if folder in _HELD:
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UserError(
            f"{folder} is in use by another swerl {what} still running; wait for it to end, or choose "
            f"another folder"
        ) from None
    except OSError:  # no locking on this filesystem (ENOLCK): run without the guard rather than refuse
        os.close(fd)
        return
    _HELD[folder] = fd
