"""Checks on paths a command will write to, shared by argument types and config checks."""

from __future__ import annotations

from pathlib import Path


def file_in_the_way(path: Path) -> Path | None:
    """The file, if any, that stops `path` from being a directory: `path` itself or the nearest of its
    parents that exists, when that one is not a directory (a folder cannot be made inside a file)."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None
