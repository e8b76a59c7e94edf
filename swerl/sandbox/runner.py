"""One run of one program on one input: spawn, feed stdin, capture capped output, enforce the wall clock.

`execute_file` runs in a persistent sandbox (persistent.py) when it can. This module also holds the two
per-test modes it falls back to, where each run starts its own process tree from here: a bubblewrap per
test (SandboxConfig(persistent=False), or when persistent sandboxes cannot work on this host) and the
unisolated opt-out.

In per-test mode the sandbox is started in a new session, so its process group id is its pid; on a
timeout or an output flood the whole group gets SIGKILL. Inside bubblewrap, the program lives in its own
pid namespace whose init dies with bubblewrap (--die-with-parent), and the kernel then kills every
process left in the namespace, including ones that called setsid() to leave the group; so nothing
outlives its test.

Resource figures come from wait4() on bubblewrap: the kernel folds the usage of every reaped descendant
into it, so CPU time is the whole tree's and peak memory is the largest resident set among them. One
catch: the spawned child's ru_maxrss starts from the caller's own high-water mark (fork and exec carry
it over), so from a large caller (a trainer, a test process that loaded torch) the figure says nothing
about the program. A peak that does not exceed the caller's own high-water mark is reported as 0
(unknown) rather than mistaken for the program's and turned into a false memory_limit verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from swerl.sandbox import persistent
from swerl.sandbox.bwrap import (
    SANDBOX_ENV,
    SandboxConfig,
    bwrap_argv,
    place_program,
    private_dir,
    protections,
    resolve_bwrap,
    slot_uid,
)
from swerl.sandbox.cgroups import SlotCgroup
from swerl.sandbox.limits import Limits, rlimits
from swerl.sandbox.persistent import _stdin_fd
from swerl.sandbox.verdict import Execution

_READ_CHUNK = 1 << 16
_DRAIN_S = 0.5
"""After the program exits, how long we wait for its pipes to close (a straggler is then killed)."""
_VALID_SIGNALS = frozenset(int(s) for s in signal.valid_signals())


@contextlib.contextmanager
def staged_program(source: str) -> Iterator[Path]:
    """Write a program to a private temp file (mode 0600 in a 0700 directory): each sandbox gets its own
    copy, readable by its uid alone (bwrap.place_program), so no other account on the host can read it."""
    directory = Path(tempfile.mkdtemp(prefix="swerl-program-"))
    try:
        path = directory / "main.py"
        path.write_text(source, encoding="utf-8")
        path.chmod(0o600)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _kill_program(pid: int | None) -> None:
    """Kill the sandboxed program by its host pid; as the namespace's init, it takes everything inside."""
    if pid is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _decode_status(status: int, isolated: bool) -> tuple[int | None, int | None]:
    """(exit code, signal). bubblewrap reports a child killed by signal N as exit status 128 + N."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    code = os.waitstatus_to_exitcode(status)
    if isolated and code > 128 and code - 128 in _VALID_SIGNALS:
        return None, code - 128
    return code, None


def _program_pid(info: bytes) -> int | None:
    """The program's host pid from bubblewrap's --info-fd JSON (None until it has been written)."""
    with contextlib.suppress(ValueError, UnicodeDecodeError):
        pid = json.loads(info.decode()).get("child-pid")
        return pid if isinstance(pid, int) else None
    return None


@dataclass
class _Capture:
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    info: bytearray = field(default_factory=bytearray)
    timed_out: bool = False
    exceeded: bool = False
    exited: bool = False


def _capture(proc: subprocess.Popen[bytes], info_fd: int | None, limits: Limits, deadline: float) -> _Capture:
    """Read stdout / stderr (and bubblewrap's info) until the pipes close and the process has exited.

    Stops early at the wall clock or when an output cap is passed. A pidfd tells us the moment the sandbox
    exits, so a program that closes its pipes and keeps running still meets the wall clock.
    """
    assert proc.stdout is not None and proc.stderr is not None
    got = _Capture()
    sinks = {proc.stdout.fileno(): got.stdout, proc.stderr.fileno(): got.stderr}
    caps = {proc.stdout.fileno(): limits.stdout_bytes, proc.stderr.fileno(): limits.stderr_bytes}
    if info_fd is not None:
        sinks[info_fd] = got.info
        caps[info_fd] = 1 << 16
    pidfd = os.pidfd_open(proc.pid)
    with selectors.DefaultSelector() as selector:
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        selector.register(pidfd, selectors.EVENT_READ)
        open_pipes = set(sinks)
        while (open_pipes or not got.exited) and not got.exceeded:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                got.timed_out = not got.exited
                break
            for key, _ in selector.select(remaining):
                if key.fd == pidfd:
                    got.exited = True
                    selector.unregister(pidfd)
                    _kill_group(proc.pid)  # stragglers in the group (unisolated runs) go with it
                    deadline = min(deadline, time.monotonic() + _DRAIN_S)
                    continue
                try:
                    chunk = os.read(key.fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    open_pipes.discard(key.fd)
                    continue
                sinks[key.fd] += chunk
                got.exceeded = got.exceeded or len(sinks[key.fd]) > caps[key.fd]
    os.close(pidfd)
    return got


def _stop(proc: subprocess.Popen[bytes], program_pid: int | None) -> None:
    """Kill a sandbox that is still running: the program first, so bubblewrap reaps it and exits cleanly
    (no orphaned zombie keeps counting against the slot's uid); the whole group if that does not do it."""
    _kill_program(program_pid)
    try:
        _wait_exit(proc.pid, _DRAIN_S)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)


def _wait_exit(pid: int, timeout: float) -> None:
    """Block until `pid` has exited (not reaped), or raise TimeoutExpired."""
    pidfd = os.pidfd_open(pid)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(pidfd, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise subprocess.TimeoutExpired(str(pid), timeout)
    finally:
        os.close(pidfd)


def execute_file(
    program: Path, stdin: str | bytes, limits: Limits, config: SandboxConfig, slot: int | None = None
) -> Execution:
    """Run a staged program once on `stdin` under `limits`; never raises for anything the program does.

    Uses an idle persistent sandbox when it can; `slot` only matters for the per-test modes (None: take a
    free one, so concurrent callers never share a uid).
    """
    data = stdin.encode() if isinstance(stdin, str) else stdin
    bwrap = resolve_bwrap(config)
    if bwrap:
        with persistent.leased(config, bwrap, 1) as sandboxes:
            if sandboxes:
                return sandboxes[0].run(program, data, limits)
    if slot is not None:
        return execute_fresh(program, data, limits, config, slot)
    [slot] = persistent.take_slots(1)
    try:
        return execute_fresh(program, data, limits, config, slot)
    finally:
        persistent.give_slots([slot])


def execute_fresh(
    program: Path, stdin: str | bytes, limits: Limits, config: SandboxConfig, slot: int
) -> Execution:
    """One run in a process tree of its own: a new bubblewrap (or, opted out, the bare interpreter)."""
    uid = slot_uid(config, slot)
    data = stdin.encode() if isinstance(stdin, str) else stdin
    bwrap = resolve_bwrap(config)
    pairs = rlimits(limits, enforce_processes=uid is not None, program_is_init=bwrap is not None)
    guard = protections(config, bwrap)
    python = config.interpreter()
    with contextlib.ExitStack() as stack:
        cgroup = SlotCgroup(guard.cgroups, f"swerl-{os.getpid()}-{slot}") if guard.cgroups else None
        procs: list[int] = []
        if cgroup is not None:
            stack.callback(cgroup.close)
            cgroup.set_limits(limits.memory_bytes, limits.processes)
            procs = cgroup.open_procs()
            stack.callback(lambda: [os.close(fd) for fd in procs])
        oom_before = cgroup.oom_kills() if cgroup else 0

        def apply_limits() -> None:
            for fd in procs:  # join the test's cgroup before bubblewrap starts: it and all below count
                os.write(fd, b"0")
            for which, value in pairs:
                resource.setrlimit(which, value)

        private = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="swerl-slot-")))
        place_program(program, private / "main.py", uid)
        private_dir(private, uid)
        program = private / "main.py"
        if bwrap:
            info_read, info_write = os.pipe()
            stack.callback(os.close, info_read)
            pass_fds: tuple[int, ...] = (info_write,)
            seccomp_fd = None
            if guard.seccomp_filter is not None:
                seccomp_fd = _stdin_fd(guard.seccomp_filter)
                stack.callback(os.close, seccomp_fd)
                pass_fds += (seccomp_fd,)
            argv = bwrap_argv(
                bwrap,
                python,
                config.python_args,
                program,
                info_fd=info_write,
                seccomp_fd=seccomp_fd,
                disable_userns=guard.disable_userns,
            )
            workdir, env = "/", dict(SANDBOX_ENV)
        else:
            info_read = info_write = None
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="swerl-unisolated-"))
            if uid is not None:
                os.chown(workdir, uid, uid)
            argv = [python, *config.python_args, str(program)]
            env, pass_fds = dict(SANDBOX_ENV, HOME=workdir, TMPDIR=workdir), ()
        stdin_fd = _stdin_fd(data)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=stdin_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=pass_fds,
                start_new_session=True,
                preexec_fn=apply_limits,
                user=uid,
                group=uid,
                extra_groups=[] if uid is not None else None,
            )
        finally:
            os.close(stdin_fd)
            if info_write is not None:
                os.close(info_write)
        with proc:
            got = _capture(proc, info_read, limits, start + limits.wall_s)
            if not got.exited:
                _stop(proc, _program_pid(bytes(got.info)))
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.monotonic() - start
            proc.returncode = os.waitstatus_to_exitcode(status)
        oom_killed = cgroup is not None and cgroup.oom_kills() > oom_before
    exit_code, sig = _decode_status(status, bwrap is not None)
    peak = usage.ru_maxrss * 1024
    return Execution(
        exit_code=exit_code,
        signal=sig,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_memory_bytes=peak if peak > _own_high_water_mark() else 0,
        stdout=bytes(got.stdout[: limits.stdout_bytes]).decode("utf-8", errors="replace"),
        stderr_tail=bytes(got.stderr[-limits.tail_bytes * 4 :]).decode("utf-8", errors="replace"),
        timed_out=got.timed_out,
        output_exceeded=got.exceeded,
        oom_killed=oom_killed,
    )


def _own_high_water_mark() -> int:
    """This process's peak resident set in bytes, which every child it spawns inherits as its ru_maxrss."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def execute_source(
    source: str, stdin: str | bytes = "", limits: Limits | None = None, config: SandboxConfig | None = None
) -> Execution:
    """Stage `source`, run it once, clean up: the simplest entry point (the pool stages once per program)."""
    with staged_program(source) as program:
        return execute_file(program, stdin, limits or Limits(), config or SandboxConfig())
