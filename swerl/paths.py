"""Checks on paths a command reads or writes, shared by argument types and config checks."""

from __future__ import annotations

from pathlib import Path


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
        and (path / "manifest.json").is_file()
        and (path / "data").is_dir()
    )


def row_files(path: Path) -> list[Path]:
    """The files a trainer reads for rows file or folder `path`, in the order it reads them: a mining
    output's data shards as its manifest records them (a UserError while the run is unfinished: its
    data/ may hold shards the run will write again, which no count of the run includes), a folder's
    .parquet files sorted, a file itself, nothing if absent."""
    if is_mining_output(path):
        from data_pipeline.stats import finished_shards

        return finished_shards(path)
    if path.is_dir():
        return sorted(path.glob("*.parquet"))
    return [path] if path.is_file() else []


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

    from swerl.errors import UserError

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
