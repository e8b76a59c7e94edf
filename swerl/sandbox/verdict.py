"""Verdicts and per-test results, and the pure rules that turn a finished run into a verdict."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from enum import StrEnum

from swerl.sandbox.limits import Limits


class Verdict(StrEnum):
    """What happened to one program on one test; the strings are stable (they go into logs and rewards)."""

    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    NO_CODE = "no_valid_code"
    JUDGE_ERROR = "judge_error"
    """Our fault, not the program's: the sandbox or the checker failed (counted and logged by the pool)."""


@dataclass(frozen=True)
class Execution:
    """The raw facts of one finished run, before any output is checked."""

    exit_code: int | None
    """The program's exit status, or None when it died by a signal."""
    signal: int | None
    """The signal that ended the program, if one did."""
    wall_s: float
    cpu_s: float
    """User + system CPU of every process the sandbox reaped (a lower bound when we had to kill it)."""
    peak_memory_bytes: int
    """Largest resident set among the reaped processes (ru_maxrss; a lower bound when killed; 0 when
    unknown because a per-test run was spawned from a process larger than the program)."""
    stdout: str
    """All of stdout, up to the cap (decoded as UTF-8, bad bytes replaced)."""
    stderr_tail: str
    timed_out: bool
    """We killed it at the wall-clock limit."""
    output_exceeded: bool
    """We killed it because stdout or stderr passed its cap."""
    oom_killed: bool = False
    """The kernel killed a process of this test for passing the test's memory cgroup limit."""


@dataclass(frozen=True)
class TestResult:
    """The structured outcome of one program on one test, as the trainer and the reports see it."""

    __test__ = False  # not a pytest class, despite the name

    verdict: Verdict
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int = 0
    exit_code: int | None = None
    signal: int | None = None
    stdout_tail: str = ""
    stderr_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view, for logs and the CLI."""
        return {
            "verdict": str(self.verdict),
            "wall_s": round(self.wall_s, 4),
            "cpu_s": round(self.cpu_s, 4),
            "peak_memory_bytes": self.peak_memory_bytes,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
        }


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def failure_verdict(run: Execution, limits: Limits) -> Verdict | None:
    """The verdict of a run that did not finish cleanly, or None when it exited 0 and needs checking.

    Every verdict names a limit only on evidence that the limit was hit, never on what the program
    printed while it was being killed. In order: our own kills (they explain the signal); the memory
    cgroup's OOM kill; CPU time over the limit (RLIMIT_CPU's SIGXCPU; its hard SIGKILL where the program
    is its namespace's init, with 0.9 slack because rusage and the CPU timer account differently; or a
    finished run that used more than the limit, since RLIMIT_CPU only has whole seconds); the file size
    limit. A clean exit is then checked.
    Any other death by a signal is a runtime error, whatever was written before it. A non-zero exit whose
    last stderr line is Python's MemoryError is how RLIMIT_AS surfaces in an interpreter: memory_limit.
    """
    if run.output_exceeded:
        return Verdict.OUTPUT_LIMIT
    if run.timed_out:
        return Verdict.TIMEOUT
    if run.oom_killed:
        return Verdict.MEMORY_LIMIT
    if run.signal == signal.SIGXCPU or run.cpu_s > limits.cpu_s:
        return Verdict.TIMEOUT
    if run.signal == signal.SIGKILL and run.cpu_s >= 0.9 * limits.cpu_s:
        return Verdict.TIMEOUT
    if run.signal == signal.SIGXFSZ:
        return Verdict.OUTPUT_LIMIT
    if run.exit_code == 0 and run.signal is None:
        return None
    if run.signal is not None:
        return Verdict.RUNTIME_ERROR
    last = _last_line(run.stderr_tail)
    if "[Errno 27] File too large" in last:
        return Verdict.OUTPUT_LIMIT  # Python ignores SIGXFSZ, so RLIMIT_FSIZE surfaces as EFBIG
    if last.startswith("MemoryError"):
        return Verdict.MEMORY_LIMIT
    return Verdict.RUNTIME_ERROR


def tail(text: str, limit: int) -> str:
    """The last `limit` characters, marked when cut, so reports stay small but show the end of a trace."""
    if len(text) <= limit:
        return text
    return "[...]" + text[-limit:]


def to_result(run: Execution, verdict: Verdict, limits: Limits) -> TestResult:
    """Package a run and its verdict, keeping only the tails of its output."""
    return TestResult(
        verdict=verdict,
        wall_s=run.wall_s,
        cpu_s=run.cpu_s,
        peak_memory_bytes=run.peak_memory_bytes,
        exit_code=run.exit_code,
        signal=run.signal,
        stdout_tail=tail(run.stdout, limits.tail_bytes),
        stderr_tail=tail(run.stderr_tail, limits.tail_bytes),
    )
