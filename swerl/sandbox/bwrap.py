"""How a program is isolated: the bubblewrap command line, the interpreter, and the uid it runs under.

Isolation is built from three independent layers so that one mistake does not open the machine:

* bubblewrap namespaces: a new mount namespace that shows only the read-only system (/usr and the
  /bin, /lib symlinks, a few /etc files), a private /proc and a minimal read-only /dev; no network
  (empty net namespace), its own pid / ipc / uts namespaces. The project, home directories and other
  runs are simply not mounted. Each test gets a fresh tmpfs /tmp and /dev/shm: from bubblewrap when it
  runs one test, from the zygote (zygote.py) when the sandbox persists across tests.
* an unprivileged uid per worker slot (when we are root): processes start under a uid no one else uses,
  so RLIMIT_NPROC, which the kernel counts per uid and ignores for root, really caps fork bombs, and so
  that even a bubblewrap bug leaves the program without root's rights.
* rlimits (limits.py) and the runner's wall clock / output caps.

On top of these, no program may build new namespaces of its own (bubblewrap's --disable-userns and the
seccomp deny-list of seccomp.py), and each slot's memory and process count are limited over all of a
test's processes by a cgroup (cgroups.py) where the machine allows it. `protections()` decides which of
these apply and refuses to run without the first two unless they are waived by name.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from swerl.errors import UserError
from swerl.sandbox import cgroups, seccomp

SANDBOX_DIR = "/sandbox"
SANDBOX_PROGRAM = "/sandbox/main.py"
"""Where the program appears inside the sandbox (read-only)."""

UID_BASE = 1_000_000
"""First uid of the range handed to sandbox slots; uids from here on must belong to no real account."""
SLOTS_PER_PROCESS = 256
"""Slots one Python process may run at once; each process gets its own block of uids (by its pid)."""

_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives")
_ROOT_ENTRIES = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_INTERPRETERS = ("/usr/bin/python3", "/usr/local/bin/python3")

SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}
"""The whole environment a program sees: nothing of ours (tokens, paths) leaks in."""


WAIVABLE = ("seccomp", "userns")
"""Protections a user may waive by name (SandboxConfig.waive, CLI --unsafe-without NAME)."""


class SandboxUnavailable(UserError, RuntimeError):
    """Bubblewrap is missing or does not work here (or a protection cannot be had), and running without it
    was not allowed."""


def default_python() -> str:
    """A system Python 3: it lives under /usr, which the sandbox mounts anyway, so no extra path shows."""
    for candidate in _INTERPRETERS:
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("python3")
    return found or sys.executable


@dataclass(frozen=True)
class SandboxConfig:
    """Where and how programs run. The defaults isolate; `allow_unisolated` is an explicit, loud opt-out."""

    python: str = ""
    """Interpreter for the programs (default: the system python3)."""
    python_args: tuple[str, ...] = ("-I",)
    """-I: ignore PYTHON* variables and the user site, so the program sees only the standard library."""
    bwrap: str = ""
    """Path of bubblewrap (default: found on PATH)."""
    allow_unisolated: bool = False
    """Run without bubblewrap if it is missing: only rlimits, a uid switch (root) and the timeout remain."""
    uid_base: int = UID_BASE
    persistent: bool = True
    """Reuse one bubblewrap per worker slot, forking a fresh, re-isolated child per test (persistent.py);
    False starts a new bubblewrap for every test (slower, the reference behaviour)."""
    waive: frozenset[str] = frozenset()
    """Protections (of WAIVABLE) to run without where this machine cannot provide them; without a waiver
    a missing one stops the run."""

    def interpreter(self) -> str:
        return self.python or default_python()


@functools.cache
def _bwrap_works(path: str) -> str | None:
    """None when `path` can build a sandbox here, else why not (user namespaces may be disabled)."""
    probe = [path, "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except OSError as err:
        return str(err)
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def isolation_available(config: SandboxConfig | None = None) -> str | None:
    """None when isolated runs are possible, else a message saying what is missing and how to fix it."""
    config = config or SandboxConfig()
    path = config.bwrap or shutil.which("bwrap")
    if not path:
        return "bubblewrap (bwrap) is not installed; install it with `apt-get install -y bubblewrap`"
    problem = _bwrap_works(path)
    if problem:
        return f"bubblewrap at {path} cannot create a sandbox here: {problem}"
    return None


@functools.cache
def _bwrap_disables_userns(path: str) -> str | None:
    """None when this bubblewrap can forbid user namespaces inside the sandbox (--disable-userns, 0.8+)."""
    probe = [path, "--unshare-all", "--unshare-user", "--disable-userns", "--ro-bind", "/", "/"]
    try:
        done = subprocess.run([*probe, "--", "/bin/true"], capture_output=True, timeout=30, check=False)
    except OSError as err:
        return str(err)
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


@dataclass(frozen=True)
class Protections:
    """What this machine gives every program on top of bubblewrap's isolation."""

    seccomp_filter: bytes | None
    """The compiled deny-list (None: waived)."""
    disable_userns: bool
    """bubblewrap's --disable-userns in per-test sandboxes (persistent ones rely on the filter, because
    their zygote needs a user namespace per test; the filter refuses every way to make one)."""
    cgroups: cgroups.Layout | None
    """Per-slot memory + pids cgroups, or None (fallback: rlimits only, memfd_create refused)."""
    notes: tuple[str, ...] = ()
    """Why a protection is missing, for `swerl sandbox doctor` and the waiver warning."""


_warned_waived: set[str] = set()


def protections(config: SandboxConfig, bwrap: str | None) -> Protections:
    """The protections to apply, refusing (SandboxUnavailable) when a required one cannot be had."""
    problems = {"seccomp": seccomp.unavailable()}
    problems["userns"] = _bwrap_disables_userns(bwrap) if bwrap else "no bubblewrap"
    missing = {name: problem for name, problem in problems.items() if problem and name not in config.waive}
    if missing and bwrap:
        listed = "; ".join(f"{name}: {problem}" for name, problem in missing.items())
        raise SandboxUnavailable(
            f"refusing to run untrusted code without {', '.join(missing)} ({listed}). To run without it, "
            f"waive it by name: SandboxConfig(waive={{{', '.join(repr(n) for n in missing)}}}) "
            f"(CLI: {' '.join(f'--unsafe-without {n}' for n in missing)})."
        )
    layout = cgroups.layout()
    notes = tuple(f"{name}: {problem}" for name, problem in problems.items() if problem)
    if isinstance(layout, str):
        notes += (f"cgroup: {layout} (fallback: per-process rlimits, memfd_create refused)",)
    for note in notes:
        if note not in _warned_waived and bwrap:
            _warned_waived.add(note)
            print(f"swerl.sandbox: running without a protection: {note}", file=sys.stderr, flush=True)
    return Protections(
        seccomp_filter=None
        if problems["seccomp"]
        else seccomp.build_filter(deny_memfd=isinstance(layout, str)),
        disable_userns=problems["userns"] is None,
        cgroups=None if isinstance(layout, str) else layout,
        notes=notes,
    )


_warned_unisolated = False


def resolve_bwrap(config: SandboxConfig) -> str | None:
    """The bubblewrap to use, None for an (allowed) unisolated run; refuses when neither is possible."""
    global _warned_unisolated
    problem = isolation_available(config)
    if problem is None:
        return config.bwrap or shutil.which("bwrap")
    if not config.allow_unisolated:
        raise SandboxUnavailable(
            f"refusing to run untrusted code without isolation: {problem}. To run it anyway, unprotected, "
            "pass allow_unisolated=True (CLI: --unsafe-no-isolation)."
        )
    if not _warned_unisolated:
        _warned_unisolated = True
        message = (
            f"!!! RUNNING UNTRUSTED CODE WITHOUT ISOLATION ({problem}). Programs can read and write "
            "your files and reach the network; only rlimits and the timeout protect this machine. !!!"
        )
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        print(f"swerl.sandbox: {message}", file=sys.stderr, flush=True)
    return None


def _system_mounts(entries: tuple[str, ...]) -> list[str]:
    """Mount the system read-only the way the host lays it out (merged /usr: symlinks; else binds)."""
    args: list[str] = []
    for entry in entries:
        if os.path.islink(entry):
            args += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            args += ["--ro-bind", entry, entry]
    return args


def _interpreter_mounts(python: str) -> list[str]:
    """Bind the interpreter's installation when it lives outside /usr (e.g. pyenv), read-only."""
    real = os.path.realpath(python)
    if real.startswith("/usr/") or real.startswith("/bin/") or real.startswith("/lib"):
        return []
    prefix = str(Path(real).parent.parent)
    return ["--ro-bind", prefix, prefix]


def _bwrap_prefix(
    bwrap: str, python: str, program_mount: list[str], info_fd: int | None, scratch: bool
) -> list[str]:
    """bubblewrap with every isolation flag and mount, up to (not including) the `--` and the command.

    --as-pid-1 makes the command the pid namespace's init: when it exits or is killed, the kernel kills
    everything else inside. /dev is read-only, so a program cannot leave files in /dev; the writable
    scratch is a tmpfs at /tmp and at /dev/shm (Python's multiprocessing needs it). With `scratch` False
    (persistent sandboxes) bubblewrap leaves both as read-only empty directories: the zygote mounts a fresh
    tmpfs on them for each test, and nothing writable is shared between tests even underneath.
    """
    argv = [
        bwrap,
        "--unshare-all",
        "--as-pid-1",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    argv += _system_mounts(_ROOT_ENTRIES)
    for path in _ETC_FILES:
        argv += ["--ro-bind-try", path, path]
    argv += _interpreter_mounts(python)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--tmpfs", "/dev/shm", "--tmpfs", "/tmp"] if scratch else ["--dir", "/tmp"]
    argv += program_mount
    # bubblewrap's root is a tmpfs of its own; read-only, like /dev, so only the scratch is writable
    argv += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/tmp", "--clearenv"]
    for key, value in SANDBOX_ENV.items():
        argv += ["--setenv", key, value]
    return argv


def bwrap_argv(
    bwrap: str,
    python: str,
    python_args: tuple[str, ...],
    program: Path,
    info_fd: int | None = None,
    *,
    seccomp_fd: int | None = None,
    disable_userns: bool = False,
) -> list[str]:
    """The command that runs `program` once in a sandbox of its own (per-test mode, see persistent.py).

    With --as-pid-1 the program is the namespace's init, bubblewrap reaps it directly, so wait4() on
    bubblewrap reports the program's CPU time and peak memory and no zombie is left behind to count
    against the uid's process limit. `info_fd` receives bubblewrap's JSON with the program's host pid
    (the runner kills that pid first on a timeout, so bubblewrap still reaps it). `seccomp_fd` holds the
    compiled filter, which bubblewrap installs just before it execs the program; `disable_userns` makes
    the sandbox's user namespace the last one (bubblewrap caps the count of nested namespaces at it).
    """
    argv = _bwrap_prefix(bwrap, python, ["--ro-bind", str(program), SANDBOX_PROGRAM], info_fd, scratch=True)
    if disable_userns:
        argv += ["--unshare-user", "--disable-userns"]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    return [*argv, "--", python, *python_args, SANDBOX_PROGRAM]


def zygote_argv(
    bwrap: str, python: str, program_dir: Path, zygote_source: str, zygote_config: str
) -> list[str]:
    """The command that starts a persistent sandbox: the same isolation, with the zygote as init.

    The program directory (the host rewrites main.py in it before each test) is bound read-only at
    /sandbox, so the program sees exactly what a per-test sandbox shows. The zygote's own code goes on the
    command line rather than into a mount, so the sandbox gains no path.
    """
    argv = _bwrap_prefix(bwrap, python, ["--ro-bind", str(program_dir), SANDBOX_DIR], None, scratch=False)
    return [*argv, "--", python, "-I", "-S", "-c", zygote_source, zygote_config]


def private_dir(directory: Path, uid: int | None) -> None:
    """Make a staging directory the sandbox's alone: its uid may read it, no other account can list or
    read it (we are root, or the same uid, and need no permission bits)."""
    if uid is None:
        directory.chmod(0o700)
    else:
        os.chown(directory, uid, uid)
        directory.chmod(0o500)


def place_program(program: Path, target: Path, uid: int | None) -> None:
    """Put `program` at `target` (atomically), readable only by `uid` (None: by us)."""
    temporary = target.with_name(f".{target.name}.new")
    temporary.unlink(missing_ok=True)
    if uid is None:
        try:
            os.link(program, temporary)  # the same inode, already private to us: no copy
        except OSError:
            shutil.copyfile(program, temporary)
            temporary.chmod(0o400)
    else:
        shutil.copyfile(program, temporary)
        os.chown(temporary, uid, uid)
        temporary.chmod(0o400)
    os.replace(temporary, target)


def slot_uid(config: SandboxConfig, slot: int, pid: int | None = None) -> int | None:
    """The uid a slot's programs run under, or None when we cannot switch uids (not root).

    Each Python process owns a block of SLOTS_PER_PROCESS uids chosen by its pid, so concurrent batches
    (pytest-xdist workers, several trainers) never share a uid, and RLIMIT_NPROC, which counts every
    process of a uid, counts exactly one running program.
    """
    if os.geteuid() != 0:
        return None
    if not 0 <= slot < SLOTS_PER_PROCESS:
        raise ValueError(f"slot {slot} out of range 0..{SLOTS_PER_PROCESS - 1}")
    pid = os.getpid() if pid is None else pid
    return config.uid_base + (pid % (1 << 22)) * SLOTS_PER_PROCESS + slot
