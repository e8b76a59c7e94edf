"""Persistent sandboxes: one bubblewrap per worker slot, a fresh re-isolated child per test.

Why: a per-test bubblewrap spends ~5 ms building namespaces and mounts, as much as the Python start it
wraps. Here each slot starts bubblewrap once, with `zygote.py` as its init; per test the zygote forks a
child that enters fresh user / mount / IPC namespaces with fresh tmpfs scratch (/tmp, /dev/shm), applies
the rlimits and execs a fresh interpreter on the program. The program therefore sees exactly what a
per-test sandbox shows (read-only system, no network, no project, private pid namespace, empty /tmp),
and the zygote guarantees that no process of a test outlives it (see zygote.py).

Why this also makes the batch API safe to call from a big process: the caller no longer forks per test.
A sandbox is started with vfork (no preexec hook, no uid arguments, which would force a fork that copies
the caller's page tables); a small launcher process switches to the slot's uid and execs bubblewrap.
Every fork per test happens inside the sandbox, in a small interpreter.

Sandboxes outlive a batch: idle ones wait in a per-process registry, keyed by the sandbox configuration,
so sequential calls (an evaluator running one program at a time) do not pay for bubblewrap either. They
die with the thread that started them (bubblewrap's --die-with-parent follows the creating thread) and
are restarted on the next lease; `shutdown()` (also at exit) ends them.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import dataclasses
import functools
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from swerl.sandbox.bwrap import (
    SANDBOX_ENV,
    SANDBOX_PROGRAM,
    SLOTS_PER_PROCESS,
    SandboxConfig,
    place_program,
    private_dir,
    protections,
    slot_uid,
    zygote_argv,
)
from swerl.sandbox.cgroups import SlotCgroup
from swerl.sandbox.limits import Limits, rlimits
from swerl.sandbox.verdict import Execution

MESSAGE_BYTES = 1 << 16
START_TIMEOUT_S = 60.0
"""How long a new sandbox may take to answer (bubblewrap + two interpreter starts; generous for load)."""
KILL_GRACE_S = 10.0
"""After we ask the zygote to kill a run, how long it may take to answer before we end the sandbox."""
DRAIN_S = 0.5
"""After the zygote reports the exit, how long we wait for the pipes to close (everything is dead)."""
TMP_INODES = 16_384
"""Files and directories a test may create in each scratch tmpfs (inodes cost kernel memory)."""

_LAUNCHER = (
    "import os, sys\n"
    "uid, fds = sys.argv[1], [int(fd) for fd in sys.argv[2].split(',') if fd]\n"
    "for fd in fds:\n"
    "    os.write(fd, b'0')\n"
    "    os.close(fd)\n"
    "if uid != '-':\n"
    "    os.setgroups([])\n"
    "    os.setgid(int(uid))\n"
    "    os.setuid(int(uid))\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)
"""Joins the slot's cgroups (fds of their cgroup.procs), switches to the slot's uid and execs bubblewrap:
all of it here, not in a fork of ours. Joining once per sandbox matters: on cgroup v1 moving a process
costs ~10 ms, as much as a test."""
SANDBOX_MEMORY = 32 << 20
"""Memory allowed in a slot's cgroup on top of the test's limit, for bubblewrap and the zygote, which live
there too (the official harness likewise adds 32 MiB to its address-space limit for the interpreter)."""


class SandboxLost(RuntimeError):
    """The sandbox died or stopped answering (not something a program can cause on purpose)."""


class PersistentUnsupported(RuntimeError):
    """Per-test re-isolation inside bubblewrap does not work here (e.g. nested user namespaces are off)."""


@functools.cache
def _zygote_source() -> str:
    return Path(__file__).with_name("zygote.py").read_text(encoding="utf-8")


def _stdin_fd(data: bytes) -> int:
    """An in-memory file holding the input: no disk, no pipe to keep fed, readable at the program's pace."""
    fd = os.memfd_create("swerl-stdin", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _decode(status: int) -> tuple[int | None, int | None]:
    """(exit code, signal) of a raw wait status (the zygote reports the program's own status)."""
    if os.WIFSIGNALED(status):
        return None, os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status), None


class Sandbox:
    """One bubblewrap with its zygote, bound to one slot (hence one uid); used by one thread at a time."""

    def __init__(self, config: SandboxConfig, bwrap: str, slot: int) -> None:
        self.config = config
        self.bwrap = bwrap
        self.slot = slot
        self.uid = slot_uid(config, slot)
        self.guard = protections(config, bwrap)
        self._cgroup: SlotCgroup | None = None
        """The slot's cgroups, which the whole sandbox joins when it starts; each test's processes are in
        them from their fork on."""
        self._own_processes = 0
        """Processes of the sandbox itself (bubblewrap, zygote) in the slot's pids cgroup."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctl: socket.socket | None = None
        self._dir: Path | None = None
        self._staged: tuple[int, int, int] | None = None
        self._seq = 0
        self._busy = False
        """A run started and did not finish cleanly (e.g. an exception in our thread): state unknown."""

    # ---- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Launch bubblewrap; does not wait for it (see wait_ready), so many can start in parallel."""
        self._dir = Path(tempfile.mkdtemp(prefix="swerl-slot-"))
        private_dir(self._dir, self.uid)
        if self.guard.cgroups is not None:
            self._cgroup = SlotCgroup(self.guard.cgroups, f"swerl-{os.getpid()}-{self.slot}")
        seccomp_filter = self.guard.seccomp_filter
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        python = self.config.interpreter()
        zygote_config = json.dumps(
            {
                "fd": theirs.fileno(),
                "python": python,
                "python_args": list(self.config.python_args),
                "program": SANDBOX_PROGRAM,
                "env": SANDBOX_ENV,
                "seccomp": base64.b64encode(seccomp_filter).decode() if seccomp_filter else "",
            }
        )
        argv = zygote_argv(self.bwrap, python, self._dir, _zygote_source(), zygote_config)
        procs = self._cgroup.open_procs() if self._cgroup is not None else []
        if self.uid is not None or procs:
            uid = "-" if self.uid is None else str(self.uid)
            argv = [python, "-I", "-S", "-c", _LAUNCHER, uid, ",".join(map(str, procs)), *argv]
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(theirs.fileno(), *procs),
                cwd="/",
                env=dict(SANDBOX_ENV),
                start_new_session=True,
            )
        finally:
            theirs.close()
            for fd in procs:
                os.close(fd)
        self._ctl = ours

    def wait_ready(self) -> None:
        """Wait for the zygote's hello; raises PersistentUnsupported or SandboxLost when it cannot run."""
        assert self._ctl is not None and self._proc is not None and self._proc.stderr is not None
        reply = self._receive(time.monotonic() + START_TIMEOUT_S)
        if reply is None:
            problem = self._stderr_text()
            self.close()
            raise SandboxLost(f"sandbox did not start: {problem or 'no answer'}")
        self._proc.stderr.close()  # the zygote writes nothing more; nobody must block on a full pipe
        if not reply.get("ready"):
            self.close()
            raise PersistentUnsupported(str(reply.get("error")))
        if self._cgroup is not None:
            self._own_processes = self._cgroup.processes()

    def _stderr_text(self) -> str:
        if self._proc is None or self._proc.stderr is None or self._proc.stderr.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            os.set_blocking(self._proc.stderr.fileno(), False)
            return (self._proc.stderr.read(4096) or b"").decode(errors="replace").strip()
        return ""

    def alive(self) -> bool:
        return (
            not self._busy and self._proc is not None and self._proc.poll() is None and self._ctl is not None
        )

    def close(self) -> None:
        """End the sandbox: closing the socket makes the zygote kill everything and exit, so bubblewrap
        reaps it and leaves no zombie under the slot's uid; SIGKILL only if that does not happen."""
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._cgroup is not None:
            self._cgroup.close()
            self._cgroup = None
        self._staged = None
        self._busy = False

    def forget(self) -> None:
        """In a forked child: drop our copies of the parent's sandbox without touching the sandbox."""
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None:
            self._proc.returncode = 0  # not our child here; keep Popen from waiting on it
            self._proc = None
        self._cgroup = None

    # ---- running ---------------------------------------------------------------------------------

    def run(self, program: Path, stdin: bytes, limits: Limits) -> Execution:
        """Run a staged program once; a lost sandbox is restarted and the test rerun once."""
        for attempt in (1, 2):
            if not self.alive():
                self.close()
                self.start()
                self.wait_ready()
            try:
                return self._run_once(program, stdin, limits)
            except SandboxLost:
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _stage(self, program: Path) -> None:
        """Make `program` the sandbox's /sandbox/main.py, readable by the slot's uid alone."""
        assert self._dir is not None
        info = program.stat()
        if self._staged == (info.st_dev, info.st_ino, info.st_mtime_ns):
            return
        place_program(program, self._dir / "main.py", self.uid)
        self._staged = (info.st_dev, info.st_ino, info.st_mtime_ns)

    def _request(self, limits: Limits, seq: int) -> dict[str, object]:
        pairs = rlimits(limits, enforce_processes=False)
        return {
            "op": "run",
            "seq": seq,
            "rlimits": [[int(which), soft, hard] for which, (soft, hard) in pairs],
            "nproc": [limits.processes, limits.processes] if self.uid is not None else None,
            "tmp_bytes": limits.tmp_bytes,
            "tmp_inodes": TMP_INODES,
        }

    def _run_once(self, program: Path, stdin: bytes, limits: Limits) -> Execution:
        assert self._ctl is not None
        self._stage(program)
        self._seq += 1
        seq = self._seq
        message = json.dumps(self._request(limits, seq)).encode()
        oom_before = 0
        if self._cgroup is not None:
            self._cgroup.set_limits(
                limits.memory_bytes + SANDBOX_MEMORY, self._own_processes + limits.processes
            )
            oom_before = self._cgroup.oom_kills()
        stdin_fd = _stdin_fd(stdin)
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        start = time.monotonic()
        self._busy = True
        try:
            try:
                socket.send_fds(self._ctl, [message], [stdin_fd, out_write, err_write])
            except OSError as err:
                raise SandboxLost(f"sandbox gone: {err}") from err
            finally:
                for fd in (stdin_fd, out_write, err_write):
                    os.close(fd)
            execution = self._collect(out_read, err_read, limits, start, seq)
            if self._cgroup is not None and self._cgroup.oom_kills() > oom_before:
                execution = dataclasses.replace(execution, oom_killed=True)
            self._busy = False
            return execution
        finally:
            os.close(out_read)
            os.close(err_read)

    def _collect(self, out_read: int, err_read: int, limits: Limits, start: float, seq: int) -> Execution:
        """Read capped output until the zygote reports the exit and the pipes close; kill on the wall clock
        or an output cap (the zygote kills, so everything in the sandbox goes, orphans included)."""
        assert self._ctl is not None
        stdout, stderr = bytearray(), bytearray()
        sinks = {out_read: stdout, err_read: stderr}
        caps = {out_read: limits.stdout_bytes, err_read: limits.stderr_bytes}
        deadline = start + limits.wall_s
        reply: dict[str, object] | None = None
        exceeded = timed_out = False
        wall = 0.0
        with selectors.DefaultSelector() as selector:
            for fd in sinks:
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ)
            selector.register(self._ctl, selectors.EVENT_READ)
            open_pipes = set(sinks)
            while (open_pipes or reply is None) and not exceeded:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = reply is None
                    break
                for key, _ in selector.select(remaining):
                    if key.fileobj is self._ctl:
                        reply = self._reply(seq)
                        wall = time.monotonic() - start
                        selector.unregister(self._ctl)
                        deadline = min(deadline, time.monotonic() + DRAIN_S)
                        continue
                    fd = int(key.fd)
                    try:
                        chunk = os.read(fd, MESSAGE_BYTES)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(fd)
                        open_pipes.discard(fd)
                        continue
                    sinks[fd] += chunk
                    exceeded = exceeded or len(sinks[fd]) > caps[fd]
        if reply is None:
            try:
                self._ctl.send(json.dumps({"op": "kill", "seq": seq}).encode())
            except OSError as err:
                raise SandboxLost(f"sandbox gone: {err}") from err
            reply = self._receive(time.monotonic() + KILL_GRACE_S)
            if reply is None:
                raise SandboxLost("the sandbox did not stop the program")
            wall = time.monotonic() - start
        if reply.get("setup_error"):
            raise RuntimeError(f"the sandbox could not set up the run: {reply['setup_error']}")
        exit_code, sig = _decode(int(reply["status"]))  # type: ignore[call-overload]
        return Execution(
            exit_code=exit_code,
            signal=sig,
            wall_s=wall,
            cpu_s=float(reply["utime"]) + float(reply["stime"]),  # type: ignore[arg-type]
            peak_memory_bytes=int(reply["maxrss"]) * 1024,  # type: ignore[call-overload]
            stdout=bytes(stdout[: limits.stdout_bytes]).decode("utf-8", errors="replace"),
            stderr_tail=bytes(stderr[-limits.tail_bytes * 4 :]).decode("utf-8", errors="replace"),
            timed_out=timed_out,
            output_exceeded=exceeded,
        )

    def _reply(self, seq: int) -> dict[str, object]:
        """The zygote's answer for run `seq` (it answers each run exactly once, in order)."""
        reply = self._receive(time.monotonic() + KILL_GRACE_S)
        if reply is None or reply.get("seq") != seq:
            raise SandboxLost(f"unexpected answer from the sandbox: {reply!r}")
        return reply

    def _receive(self, deadline: float) -> dict[str, object] | None:
        """One message from the zygote, or None on end of file / timeout."""
        assert self._ctl is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self._ctl, selectors.EVENT_READ)
            if not selector.select(max(0.0, deadline - time.monotonic())):
                return None
        try:
            message = self._ctl.recv(MESSAGE_BYTES)
        except OSError:
            return None
        if not message:
            return None
        reply = json.loads(message)
        return reply if isinstance(reply, dict) else None


def _key(config: SandboxConfig, bwrap: str) -> tuple[object, ...]:
    return (bwrap, config.interpreter(), config.python_args, config.uid_base)


class _Registry:
    """Slots of this process (each a uid of its own) and the idle sandboxes that hold some of them."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.free_slots = list(range(SLOTS_PER_PROCESS - 1, -1, -1))
        self.idle: dict[tuple[object, ...], list[Sandbox]] = {}
        self.unsupported: dict[tuple[object, ...], str] = {}

    def take_slots(self, count: int) -> list[int]:
        """Between 1 and `count` free slots, waiting for one if none is free; closes idle sandboxes of
        other configurations to free theirs."""
        with self.changed:
            while True:
                if len(self.free_slots) < count:
                    for sandboxes in self.idle.values():
                        while sandboxes and len(self.free_slots) < count:
                            victim = sandboxes.pop()
                            victim.close()
                            self.free_slots.append(victim.slot)
                if self.free_slots:
                    return [self.free_slots.pop() for _ in range(min(count, len(self.free_slots)))]
                self.changed.wait()

    def give_slots(self, slots: list[int]) -> None:
        with self.changed:
            self.free_slots.extend(slots)
            self.changed.notify_all()

    def lease(self, config: SandboxConfig, bwrap: str, count: int) -> list[Sandbox]:
        """Up to `count` ready sandboxes (at least one): idle ones first, new ones started in parallel."""
        key = _key(config, bwrap)
        with self.changed:
            if key in self.unsupported:
                raise PersistentUnsupported(self.unsupported[key])
            pool = self.idle.setdefault(key, [])
            leased = [pool.pop() for _ in range(min(count, len(pool)))]
        slots = self.take_slots(count - len(leased)) if count > len(leased) else []
        fresh = [Sandbox(config, bwrap, slot) for slot in slots]
        # idle ones may have died with the thread that started them: restart them here, in ours
        starting = [*(s for s in leased if not s.alive()), *fresh]
        try:
            for sandbox in starting:
                sandbox.close()
                sandbox.start()
            for sandbox in starting:
                sandbox.wait_ready()
        except PersistentUnsupported as err:
            with self.changed:
                self.unsupported[key] = str(err)
            self._discard([*leased, *fresh])
            raise
        except BaseException:
            self._discard([*leased, *fresh])
            raise
        return [*leased, *fresh]

    def give_back(self, sandboxes: list[Sandbox]) -> None:
        keep = [s for s in sandboxes if s.alive()]
        self._discard([s for s in sandboxes if not s.alive()])
        with self.changed:
            for sandbox in keep:
                self.idle.setdefault(_key(sandbox.config, sandbox.bwrap), []).append(sandbox)
            self.changed.notify_all()

    def _discard(self, sandboxes: list[Sandbox]) -> None:
        for sandbox in sandboxes:
            sandbox.close()
        self.give_slots([sandbox.slot for sandbox in sandboxes])

    def shutdown(self) -> None:
        with self.changed:
            sandboxes = [s for pool in self.idle.values() for s in pool]
            self.idle.clear()
        for sandbox in sandboxes:  # close all sockets first: the zygotes then wind down in parallel
            if sandbox._ctl is not None:
                sandbox._ctl.close()
                sandbox._ctl = None
        self._discard(sandboxes)

    def forget(self) -> None:
        for pool in self.idle.values():
            for sandbox in pool:
                sandbox.forget()
        self.idle.clear()


_registry = _Registry()
_warned_fallback = False


def _after_fork_in_child() -> None:
    """A forked child must not talk to its parent's sandboxes (or hold their sockets open)."""
    global _registry
    _registry.forget()
    _registry = _Registry()


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(lambda: _registry.shutdown())


def shutdown() -> None:
    """End every idle sandbox of this process (they are restarted on demand)."""
    _registry.shutdown()


def take_slots(count: int) -> list[int]:
    """Slots for per-test sandboxes (see runner.py): the same uid space as the persistent ones."""
    return _registry.take_slots(count)


def give_slots(slots: list[int]) -> None:
    _registry.give_slots(slots)


@contextlib.contextmanager
def leased(config: SandboxConfig, bwrap: str, count: int) -> Iterator[list[Sandbox] | None]:
    """Up to `count` persistent sandboxes for the duration of the block, or None (with one warning) when
    they cannot work here; the caller then falls back to a bubblewrap per test."""
    global _warned_fallback
    if not config.persistent:
        yield None
        return
    try:
        sandboxes = _registry.lease(config, bwrap, count)
    except PersistentUnsupported as err:
        if not _warned_fallback:
            _warned_fallback = True
            warnings.warn(
                f"swerl.sandbox: persistent sandboxes unavailable ({err}); starting bubblewrap per test",
                RuntimeWarning,
                stacklevel=3,
            )
        yield None
        return
    try:
        yield sandboxes
    finally:
        _registry.give_back(sandboxes)
