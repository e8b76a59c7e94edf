"""Resource limits for one sandboxed run, and their translation into POSIX rlimits.

The kernel enforces rlimits per process (address space, CPU seconds, file size, open files) or per user
(process count), so a hostile program cannot raise them back: only the hard limit is lowered, never raised.
Wall-clock time and captured output are enforced by the runner instead, because no rlimit covers a program
that sleeps or floods a pipe.
"""

from __future__ import annotations

import math
import resource
from dataclasses import dataclass, replace

MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """What one run of one program on one input may consume.

    Defaults fit CodeContests-style stdin/stdout programs written in Python: generous enough for a correct
    solution, tight enough that a thousand hostile ones in a row cannot hurt the host.
    """

    wall_s: float = 10.0
    """Wall-clock seconds before the whole sandbox is killed (catches sleeping and blocked programs)."""
    cpu_s: float = 10.0
    """CPU seconds: the time limit proper, as in the official harness. RLIMIT_CPU, rounded up, soft at the
    limit: SIGXCPU, a signal nothing else sends, ends the program there (the hard limit, one second later,
    catches a program that ignores it; in per-test mode, where the program is its namespace's init and
    cannot get SIGXCPU, the hard limit is the soft one). A run that finishes having used more than `cpu_s`
    is a timeout too."""
    wall_multiple: float = 3.0
    """`scaled` sets the wall clock to this multiple of a problem's time limit, so a loaded machine does
    not turn a solution within its CPU budget into a timeout (the official harness allows 30x)."""
    memory_bytes: int = 1024 * MIB
    """Address space (RLIMIT_AS); Python raises MemoryError when an allocation would cross it."""
    processes: int = 16
    """Processes of the sandbox's uid (RLIMIT_NPROC), counting the sandbox's own process besides the
    program (the zygote, or bubblewrap in per-test mode): the program may have processes - 1 in all."""
    file_bytes: int = 16 * MIB
    """Largest file the program may write (RLIMIT_FSIZE); SIGXFSZ beyond it."""
    open_files: int = 64
    """Open file descriptors (RLIMIT_NOFILE)."""
    tmp_bytes: int = 256 * MIB
    """Size of the private /tmp, and separately of /dev/shm (tmpfs; persistent sandboxes only: bubblewrap
    0.8 cannot size the per-test sandbox's tmpfs). Beyond it writes fail with ENOSPC."""
    stdout_bytes: int = 8 * MIB
    """Captured stdout; more than this kills the run with an output-limit verdict."""
    stderr_bytes: int = 1 * MIB
    """Captured stderr; more than this kills the run with an output-limit verdict."""
    tail_bytes: int = 4096
    """How much of stdout / stderr a result keeps for reports and feedback."""

    def scaled(self, *, time_s: float | None = None, memory_bytes: int | None = None) -> Limits:
        """These limits with a problem's own time / memory limit, where it has one (None keeps ours): the
        time limit is CPU time, and the wall clock `wall_multiple` times longer."""
        changes: dict[str, float | int] = {}
        if time_s is not None and time_s > 0:
            changes["wall_s"] = time_s * self.wall_multiple
            changes["cpu_s"] = time_s
        if memory_bytes is not None and memory_bytes > 0:
            changes["memory_bytes"] = memory_bytes
        return replace(self, **changes)


def rlimits(
    limits: Limits, *, enforce_processes: bool, program_is_init: bool = False
) -> list[tuple[int, tuple[int, int]]]:
    """The (resource, (soft, hard)) pairs to apply in the child before it execs the sandbox.

    The process limit only means something under a uid of its own (see bwrap.py), so the caller says
    whether to set it; set as root, the kernel would ignore it anyway. A program that is its namespace's
    init (per-test mode) ignores SIGXCPU, so there the hard CPU limit equals the soft one (SIGKILL at it).
    """
    cpu = max(1, math.ceil(limits.cpu_s))
    pairs = [
        (resource.RLIMIT_CPU, (cpu, cpu if program_is_init else cpu + 1)),
        (resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes)),
        (resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes)),
        (resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    if enforce_processes:
        pairs.append((resource.RLIMIT_NPROC, (limits.processes, limits.processes)))
    return pairs
