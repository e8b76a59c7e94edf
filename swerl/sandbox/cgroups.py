"""Per-test limits over all of a test's processes: one memory + pids cgroup per worker slot.

rlimits are per process: six processes of 200 MiB each pass a 256 MiB RLIMIT_AS, and memfd or shared
memory pages are not in anyone's address space at all. A memory cgroup charges every page a test's
processes touch (anonymous memory, tmpfs and /dev/shm, memfd, page tables) against one limit, and the
pids controller counts its processes whatever their uid. Each slot gets its own cgroup, and a persistent
sandbox joins it once when it starts (by writing "0" to a cgroup.procs file we opened, so the kernel
checks our rights, not the sandbox's; moving a process costs ~10 ms on cgroup v1, so never per test):
each test's processes are then in it from their fork on. Before a test we set its limits (the test's
plus a fixed allowance for bubblewrap and the zygote) and note its OOM-kill counter; afterwards a higher
counter means the test hit its memory limit. A per-test bubblewrap joins a cgroup of its own.

Both hierarchies work: cgroup v2 where the memory and pids controllers are on the unified hierarchy and
the cgroup we run in may have children with them (our own cgroup's cgroup.subtree_control lists them,
e.g. a delegated systemd scope, or a root that enables them), and cgroup v1 (the hybrid layout of many
container hosts: /sys/fs/cgroup/memory and /sys/fs/cgroup/pids) where we may create child cgroups (as
root). Slot cgroups are made under the cgroups we run in, so the sandbox stays inside whatever limits
the caller itself runs under. Where neither works, `unavailable()` says why and the sandbox falls back
to rlimits (see docs/sandbox.md).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
_serial = itertools.count()


@dataclass(frozen=True)
class Layout:
    """Where slot cgroups go and how the controller files are called in this hierarchy."""

    version: int
    memory_parent: Path
    pids_parent: Path
    """Same as memory_parent on cgroup v2."""

    @property
    def limit_files(self) -> tuple[str, ...]:
        """Memory limit files, set to the same value: RAM, then RAM + swap (no swap beyond the limit)."""
        if self.version == 2:
            return ("memory.max",)
        return ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes")

    @property
    def events_file(self) -> str:
        return "memory.events" if self.version == 2 else "memory.oom_control"


def _own_cgroups() -> dict[str, str]:
    """Controller (or "" for the unified hierarchy) -> our cgroup path, from /proc/self/cgroup."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


def _unified_mount() -> Path | None:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _detect() -> Layout | str:
    own = _own_cgroups()
    unified = _unified_mount()
    if unified is not None and "" in own:
        parent = unified / own[""].lstrip("/")
        with contextlib.suppress(OSError):
            delegated = (parent / "cgroup.subtree_control").read_text().split()
            if {"memory", "pids"} <= set(delegated) and _writable_dir(parent):
                return Layout(2, parent, parent)
    memory, pids = CGROUP_ROOT / "memory", CGROUP_ROOT / "pids"
    if "memory" in own and "pids" in own and memory.is_dir() and pids.is_dir():
        memory_parent = memory / own["memory"].lstrip("/")
        pids_parent = pids / own["pids"].lstrip("/")
        if _writable_dir(memory_parent) and _writable_dir(pids_parent):
            return Layout(1, memory_parent, pids_parent)
        return f"cgroup v1 at {memory_parent} and {pids_parent}: not writable (not root?)"
    if unified is not None:
        return (
            f"cgroup v2 at {unified}: our cgroup {own.get('', '?')} does not delegate the memory and pids "
            "controllers (its cgroup.subtree_control must list them: run in a delegated cgroup)"
        )
    return "no cgroup hierarchy with the memory and pids controllers is mounted"


def _remove_stale(found: Layout) -> None:
    """Remove slot cgroups left by processes that died without shutting their sandboxes down (empty by
    now: the kernel killed their sandboxes with them)."""
    for parent in {found.memory_parent, found.pids_parent}:
        for directory in parent.glob("swerl-*-*"):
            pid = directory.name.split("-")[1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                with contextlib.suppress(OSError):
                    directory.rmdir()


@functools.cache
def layout() -> Layout | str:
    """This machine's layout, or why per-test cgroups cannot be had (checked once per process)."""
    try:
        found = _detect()
    except OSError as err:
        return f"cannot read the cgroup setup: {err}"
    if isinstance(found, str):
        return found
    _remove_stale(found)
    # prove it: make a cgroup, set a limit, remove it
    probe = SlotCgroup(found, f"swerl-probe-{os.getpid()}")
    try:
        probe.set_limits(64 << 20, 4)
    except OSError as err:
        return f"cgroup v{found.version} under {found.memory_parent}: {err}"
    finally:
        probe.close()
    return found


def unavailable() -> str | None:
    found = layout()
    return found if isinstance(found, str) else None


class SlotCgroup:
    """The cgroup (v2) or pair of cgroups (v1: memory and pids) of one worker slot."""

    def __init__(self, found: Layout, name: str) -> None:
        """Cgroups called `name`-N, N new for each: a cgroup just removed may linger for a moment, so a
        restarted slot never reuses a name."""
        name = f"{name}-{next(_serial)}"
        self.layout = found
        self.dirs = list(dict.fromkeys([found.memory_parent / name, found.pids_parent / name]))
        self.memory_dir = self.dirs[0]
        self.pids_dir = self.dirs[-1]
        for directory in self.dirs:
            directory.mkdir()
        self._memory_limit = 1 << 62  # a new cgroup has no limit: the first change shrinks it

    def open_procs(self) -> list[int]:
        """Write-only fds of cgroup.procs: writing "0" to them moves the writer into the slot's cgroup.
        They carry our credentials, so a child that has already dropped its rights can still join."""
        return [os.open(directory / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for directory in self.dirs]

    def set_limits(self, memory_bytes: int, processes: int) -> None:
        """The test's limits (written only when they change). v1 wants RAM <= RAM + swap at every step,
        so the order of the two writes depends on whether the limit grows or shrinks."""
        if memory_bytes != self._memory_limit:
            files = self.layout.limit_files
            order = files[::-1] if memory_bytes > self._memory_limit else files
            for name in order:
                path = self.memory_dir / name
                if self.layout.version == 2 or path.exists():
                    path.write_text(str(memory_bytes))
            swap = self.memory_dir / "memory.swap.max"  # v2 with swap accounting
            if swap.exists():
                swap.write_text("0")
            self._memory_limit = memory_bytes
        (self.pids_dir / "pids.max").write_text(str(processes))

    def processes(self) -> int:
        """Processes in the slot's pids cgroup now."""
        return int((self.pids_dir / "pids.current").read_text())

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in this cgroup for passing its memory limit."""
        for line in (self.memory_dir / self.layout.events_file).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def close(self, wait_s: float = 2.0) -> None:
        """Remove the cgroups. A sandbox that was killed rather than closed may still have processes on
        their way out (EBUSY), so this waits up to `wait_s` for them before leaving the cgroup behind."""
        deadline = time.monotonic() + wait_s
        for directory in self.dirs:
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as err:
                    if err.errno != errno.EBUSY or time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
