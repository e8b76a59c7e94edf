"""Local execution backend: export, `git apply`, pytest, inside bubblewrap.

What isolation makes sense here: the code under test is the repository plus a model-written patch and
maybe a model-written test, so it is untrusted. It runs in a bubblewrap sandbox with no network, the
system and the interpreter's installation read-only, and only the throwaway export writable (plus a
private /tmp). Unlike `swerl.sandbox` (single programs, system Python only), a test suite needs the
repository's own environment, so the venv is mounted read-only at its real path. Besides the wall clock,
optional per-process memory and CPU limits (`RunLimits`, off by default: test suites legitimately use
several processes and much memory) stop a runaway test early. Without bubblewrap the backend refuses
unless `isolation="none"` is chosen explicitly.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentless.execution.base import TestRun, parse_pytest_report, test_files
from agentless.execution.envs import EnvManager
from agentless.instances import Instance
from agentless.repos import RepoCache
from swerl.sandbox.limits import MIB

Isolation = Literal["bwrap", "none"]
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives", "/etc/ssl")
PYTEST_ARGS = ("-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q", "--no-header")
_LIMITER = (
    "import json, os, resource, sys\n"
    "for which, value in json.loads(sys.argv[1]):\n"
    "    hard = resource.getrlimit(which)[1]\n"
    "    if hard != resource.RLIM_INFINITY:\n"
    "        value = min(value, hard)\n"
    "    resource.setrlimit(which, (value, value))\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
"""Runs first in the sandbox: lowers the rlimits, then becomes the test interpreter (exec keeps them).
Setting them there rather than in a `preexec_fn` of ours keeps bubblewrap itself unconstrained and avoids
forking the pipeline (which may hold a model and threads) without exec. A limit already lower (a
cluster's ulimit) is kept: raising it would fail."""


@dataclass(frozen=True)
class RunLimits:
    """Optional per-process limits for a test run; None leaves that resource unlimited.

    rlimits are per process: pytest and every process it starts (xdist workers, subprocess tests) each
    get the full allowance; the wall clock (`LocalBackend.timeout_s`) bounds the run as a whole. Memory
    is RLIMIT_DATA (heap and private writable mappings), not RLIMIT_AS: address space also counts shared
    libraries, file mappings and malloc's per-thread arena reservations, so an AS limit that stops a
    memory hog also breaks ordinary threaded code. Past it an allocation fails (MemoryError in Python:
    the test fails). Past the CPU seconds the kernel kills the process. There is no process-count limit:
    RLIMIT_NPROC counts every process of the user (and is ignored for root), so without a uid of its own
    for the sandbox no value stops a fork bomb without breaking unrelated work. The wall clock ends one
    (the pid namespace lets a single kill reach every process), but only after it ran.
    """

    memory_mb: int | None = None
    cpu_s: int | None = None

    def __post_init__(self) -> None:
        for name in ("memory_mb", "cpu_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")

    def rlimits(self) -> list[tuple[int, int]]:
        """(resource, limit) pairs to set as both soft and hard limit."""
        pairs = []
        if self.memory_mb is not None:
            pairs.append((resource.RLIMIT_DATA, self.memory_mb * MIB))
        if self.cpu_s is not None:
            pairs.append((resource.RLIMIT_CPU, self.cpu_s))
        return pairs

    def describe(self) -> str:
        parts = [f"{self.memory_mb} MiB memory"] if self.memory_mb is not None else []
        parts += [f"{self.cpu_s} CPU seconds"] if self.cpu_s is not None else []
        return " and ".join(parts) + " per process"


@functools.cache
def _interpreter_roots(python: str) -> tuple[str, ...]:
    """Directories an interpreter needs to run: its venv, the base installation, their site dirs."""
    code = "import sys, site; print('\\n'.join([sys.prefix, sys.base_prefix, *site.getsitepackages()]))"
    done = subprocess.run([python, "-c", code], capture_output=True, check=True)
    roots = {os.path.realpath(p) for p in done.stdout.decode().split("\n") if p}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    system = tuple(p + "/" for p in _SYSTEM)
    return tuple(sorted(r for r in roots if not (r + "/").startswith(system) and os.path.isdir(r)))


def bwrap_command(bwrap: str, python: str, workdir: Path, argv: Sequence[str]) -> list[str]:
    """The sandboxed command: no network, read-only system and interpreter, writable `workdir` only."""
    cmd = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1"]
    for entry in _SYSTEM:
        if os.path.islink(entry):
            cmd += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            cmd += ["--ro-bind", entry, entry]
    for path in _ETC:
        cmd += ["--ro-bind-try", path, path]
    # The scratch tmpfs goes first: an interpreter (a venv) may itself live under /tmp, and a later
    # tmpfs would hide it.
    cmd += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/dev/shm"]
    for root in _interpreter_roots(python):
        cmd += ["--ro-bind", root, root]
    cmd += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--clearenv"]
    for key, value in _test_env(workdir).items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", python, *argv]


def _test_env(workdir: Path) -> dict[str, str]:
    """The whole environment tests see: nothing of ours (tokens, proxies) leaks in."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(workdir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
    }


def git_apply(workdir: Path, patch: str) -> str | None:
    """Apply a patch with `git apply` to a plain directory; returns None, or git's complaint."""
    if not patch.strip():
        return None
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_CEILING_DIRECTORIES": str(workdir.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(workdir),
    }
    done = subprocess.run(
        ["git", "apply", "--whitespace=nowarn", "-"],
        cwd=workdir,
        input=patch.encode("utf-8"),
        capture_output=True,
        env=env,
        check=False,
    )
    return None if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


@dataclass
class LocalBackend:
    """`ExecutionBackend` that runs pytest on this machine. See the module docstring for isolation."""

    repos: RepoCache
    envs: EnvManager
    isolation: Isolation = "bwrap"
    timeout_s: float = 900.0
    work_root: Path | None = None
    limits: RunLimits = field(default_factory=RunLimits)
    _bwrap: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.isolation == "bwrap":
            from swerl.sandbox.bwrap import isolation_available

            problem = isolation_available()
            if problem is not None:
                raise RuntimeError(
                    f"the local backend runs tests in bubblewrap, which is not usable: {problem}. "
                    "Pass isolation='none' (CLI: --unsafe-no-isolation) to run them unprotected."
                )
            self._bwrap = shutil.which("bwrap")

    def run_tests(self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = ()) -> TestRun:
        if self.work_root is not None:
            self.work_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="swerl-tests-", dir=self.work_root))
        try:
            workdir = self.repos.export(instance.repo, instance.base_commit, scratch / "repo")
            for i, patch in enumerate(patches):
                problem = git_apply(workdir, patch)
                if problem is not None:
                    return TestRun("apply_failed", log=f"patch {i} does not apply: {problem}")
            if not tests:
                return TestRun("ok")
            python = self.envs.python_for(instance, workdir)
            argv = [*PYTEST_ARGS, *test_files(tests)]
            return self._run(python, workdir, argv)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _run(self, python: str, workdir: Path, argv: list[str]) -> TestRun:
        pairs = self.limits.rlimits()
        if pairs:
            argv = ["-I", "-S", "-c", _LIMITER, json.dumps(pairs), python, *argv]
        if self._bwrap is not None:
            cmd, env = bwrap_command(self._bwrap, python, workdir, argv), None
        else:
            cmd, env = [python, *argv], _test_env(workdir)
        proc = subprocess.Popen(
            cmd,
            cwd=workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            log = out.decode(errors="replace")
            return TestRun("timeout", parse_pytest_report(log), log)
        log = out.decode(errors="replace")
        results = parse_pytest_report(log)
        # pytest exits 0 (all passed), 1 (some failed); anything else is an internal or usage error.
        status = "ok" if proc.returncode in (0, 1) or results else "error"
        if status == "error" and pairs:
            log += _limit_note(proc.returncode, self.limits)
        return TestRun(status, results, log)


def _limit_note(returncode: int, limits: RunLimits) -> str:
    """Why a run under limits may have ended without results, for whoever reads the log.

    A signal shows as a negative status without bubblewrap and as 128 + signal through it.
    """
    killed = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    how = f"was killed by signal {killed} ({signal.strsignal(killed)})" if killed else "failed"
    return (
        f"\n[swerl] pytest {how} (exit status {returncode}) under the test limits ({limits.describe()}): "
        "past its CPU seconds the kernel kills a process; past its memory an allocation fails "
        "(a MemoryError above)\n"
    )
