"""The sandbox's pure parts (limits, verdict rules, command line) and its refusal / opt-out behaviour."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from isolation import require_isolation

from swerl.sandbox import Limits, SandboxConfig, SandboxUnavailable, TestCase, Verdict, persistent, run_tests
from swerl.sandbox import bwrap as bwrap_module
from swerl.sandbox.bwrap import bwrap_argv, isolation_available, slot_uid, zygote_argv
from swerl.sandbox.limits import rlimits
from swerl.sandbox.runner import _decode_status, staged_program
from swerl.sandbox.verdict import Execution, failure_verdict

LIMITS = Limits(cpu_s=2.0, memory_bytes=1 << 28)


def _run(**changes) -> Execution:
    base = dict(
        exit_code=0,
        signal=None,
        wall_s=0.1,
        cpu_s=0.05,
        peak_memory_bytes=1 << 20,
        stdout="",
        stderr_tail="",
        timed_out=False,
        output_exceeded=False,
    )
    return Execution(**{**base, **changes})


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({}, None),
        ({"timed_out": True, "exit_code": None, "signal": 9}, Verdict.TIMEOUT),
        ({"output_exceeded": True, "exit_code": None, "signal": 9}, Verdict.OUTPUT_LIMIT),
        ({"exit_code": None, "signal": signal.SIGKILL, "cpu_s": 1.99}, Verdict.TIMEOUT),
        ({"exit_code": None, "signal": signal.SIGXCPU, "cpu_s": 2.01}, Verdict.TIMEOUT),
        ({"exit_code": None, "signal": signal.SIGXCPU, "cpu_s": 0.85}, Verdict.TIMEOUT),  # rusage lags
        ({"exit_code": 0, "cpu_s": 2.3}, Verdict.TIMEOUT),  # finished, but over the CPU limit
        ({"exit_code": None, "signal": signal.SIGKILL, "oom_killed": True}, Verdict.MEMORY_LIMIT),
        ({"exit_code": 0, "oom_killed": True}, Verdict.MEMORY_LIMIT),  # a child of the program was killed
        (
            {"exit_code": None, "signal": signal.SIGKILL, "stderr_tail": "MemoryError\n"},
            Verdict.RUNTIME_ERROR,
        ),
        ({"exit_code": None, "signal": signal.SIGXFSZ}, Verdict.OUTPUT_LIMIT),
        ({"exit_code": 1, "stderr_tail": "Traceback...\nMemoryError\n"}, Verdict.MEMORY_LIMIT),
        ({"exit_code": 1, "stderr_tail": "OSError: [Errno 27] File too large\n"}, Verdict.OUTPUT_LIMIT),
        ({"exit_code": None, "signal": signal.SIGKILL, "cpu_s": 0.1}, Verdict.RUNTIME_ERROR),
        ({"exit_code": 1, "stderr_tail": "ZeroDivisionError\n"}, Verdict.RUNTIME_ERROR),
        ({"exit_code": None, "signal": signal.SIGSEGV}, Verdict.RUNTIME_ERROR),
    ],
)
def test_failure_verdict_rules(changes, verdict) -> None:
    assert failure_verdict(_run(**changes), LIMITS) == verdict


def test_rlimits_cover_every_limit() -> None:
    pairs = dict(rlimits(Limits(cpu_s=1.5, processes=7), enforce_processes=True))
    assert pairs[resource.RLIMIT_CPU] == (2, 3)  # SIGXCPU at the limit, SIGKILL a second later
    assert pairs[resource.RLIMIT_NPROC] == (7, 7)
    assert {resource.RLIMIT_AS, resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE} <= pairs.keys()
    assert resource.RLIMIT_NPROC not in dict(rlimits(Limits(), enforce_processes=False))


def test_scaled_limits_take_problem_values() -> None:
    limits = Limits().scaled(time_s=3.0, memory_bytes=1 << 20)
    assert (limits.cpu_s, limits.wall_s, limits.memory_bytes) == (3.0, 9.0, 1 << 20)  # wall: 3x the CPU
    assert Limits(wall_multiple=10).scaled(time_s=0.5).wall_s == 5.0
    assert Limits().scaled(time_s=None) == Limits()


def test_decode_status_maps_bwrap_signal_codes() -> None:
    assert _decode_status(137 << 8, isolated=True) == (None, 9)
    assert _decode_status(137 << 8, isolated=False) == (137, None)
    assert _decode_status(3 << 8, isolated=True) == (3, None)
    assert _decode_status(signal.SIGKILL, isolated=True) == (None, signal.SIGKILL)


def test_argv_isolates_everything() -> None:
    argv = bwrap_argv("bwrap", "/usr/bin/python3", ("-I",), Path("/x/main.py"), info_fd=5)
    for flag in ("--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--remount-ro") + 1] == "/"
    assert argv[-3:] == ["/usr/bin/python3", "-I", "/sandbox/main.py"]
    assert "--share-net" not in argv and "/root" not in argv and str(Path.cwd()) not in argv


def test_zygote_argv_keeps_the_isolation_and_leaves_scratch_to_the_zygote() -> None:
    argv = zygote_argv("bwrap", "/usr/bin/python3", Path("/x/slot"), "print(1)", "{}")
    for flag in ("--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    assert argv[argv.index("--ro-bind", argv.index("--dev")) + 1 :][:2] == ["/x/slot", "/sandbox"]
    assert "--tmpfs" not in argv, "per-test scratch is mounted by the zygote, none may be shared"
    assert argv[argv.index("--remount-ro") :][:4] == ["--remount-ro", "/", "--remount-ro", "/dev"]
    assert argv[-6:] == ["/usr/bin/python3", "-I", "-S", "-c", "print(1)", "{}"]
    assert "--tmpfs" in bwrap_argv("bwrap", "/usr/bin/python3", ("-I",), Path("/x/main.py"))


def test_warm_batches_do_not_fork_the_caller() -> None:
    """The caller's size must not matter: with sandboxes up, a batch forks nothing in our process."""
    require_isolation()
    tests = [TestCase(f"{i}\n", str(i)) for i in range(6)]
    run_tests("print(input())", tests, workers=2)  # starts the sandboxes (with vfork, no fork either)
    forks = []
    counting = [True]
    os.register_at_fork(before=lambda: forks.append(1) if counting[0] else None)
    try:
        results = run_tests("print(input())", tests, workers=2)
    finally:
        counting[0] = False
    assert [r.verdict for r in results] == [Verdict.PASSED] * 6
    assert not forks


def test_per_test_mode_and_persistent_mode_agree() -> None:
    require_isolation()
    source = "import os, sys\nprint(sum(map(int, sys.stdin.read().split())), os.listdir('/tmp'))\n"
    tests = [TestCase("1 2\n", "3 []"), TestCase("5\n", "6 []")]
    for config in (SandboxConfig(), SandboxConfig(persistent=False)):
        assert [r.verdict for r in run_tests(source, tests, config=config)] == [
            Verdict.PASSED,
            Verdict.WRONG_ANSWER,
        ]


def test_falls_back_to_a_bubblewrap_per_test_when_persistent_sandboxes_cannot_work(monkeypatch) -> None:
    require_isolation()
    broken = persistent._zygote_source().replace("problem = self_test(config)", "problem = 'no nesting'")
    monkeypatch.setattr(persistent, "_zygote_source", lambda: broken)
    monkeypatch.setattr(persistent, "_registry", persistent._Registry())
    monkeypatch.setattr(persistent, "_warned_fallback", False)
    config = SandboxConfig(python_args=("-I", "-B"))  # a configuration of its own
    with pytest.warns(RuntimeWarning, match="no nesting"):
        results = run_tests("print(input())", [TestCase("a\n", "a"), TestCase("b\n", "b")], config=config)
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.PASSED]


def test_a_sandbox_lost_mid_run_is_restarted_and_the_test_rerun(tmp_path) -> None:
    require_isolation()
    config = SandboxConfig()
    program = tmp_path / "main.py"
    program.write_text("import time\ntime.sleep(0.5)\nprint(7)\n")
    tmp_path.chmod(0o755)
    program.chmod(0o644)
    with persistent.leased(config, bwrap_module.resolve_bwrap(config) or "", 1) as sandboxes:
        assert sandboxes
        sandbox = sandboxes[0]
        first = sandbox._proc
        assert first is not None
        threading.Timer(0.2, first.kill).start()
        run = sandbox.run(program, b"", Limits(wall_s=5))
        assert sandbox._proc is not first, "the sandbox was not restarted"
    assert (run.exit_code, run.stdout, run.timed_out) == (0, "7\n", False)


def test_slot_uids_are_distinct_per_process_and_slot() -> None:
    config = SandboxConfig()
    if os.geteuid() != 0:
        assert slot_uid(config, 0) is None
        return
    uids = {slot_uid(config, slot, pid) for pid in (100, 101) for slot in range(3)}
    assert len(uids) == 6 and min(uids) >= config.uid_base  # type: ignore[type-var]
    with pytest.raises(ValueError):
        slot_uid(config, 10_000)


def test_missing_bubblewrap_is_refused_with_a_clear_message() -> None:
    config = SandboxConfig(bwrap="/nonexistent/bwrap")
    assert isolation_available(config)
    with pytest.raises(SandboxUnavailable, match="unsafe-no-isolation"):
        run_tests("print(1)", [TestCase("", "1")], config=config)


def test_unisolated_opt_out_warns_and_runs(monkeypatch) -> None:
    monkeypatch.setattr(bwrap_module, "_warned_unisolated", False)
    config = SandboxConfig(bwrap="/nonexistent/bwrap", allow_unisolated=True)
    with pytest.warns(RuntimeWarning, match="WITHOUT ISOLATION"):
        results = run_tests(
            "import time\nprint(input())\n", [TestCase("hi\n", "hi"), TestCase("x\n", "y")], config=config
        )
    assert [r.verdict for r in results] == [Verdict.PASSED, Verdict.WRONG_ANSWER]
    timeout = run_tests("while True: pass", [TestCase("")], config=config, limits=Limits(wall_s=1, cpu_s=1))
    assert timeout[0].verdict is Verdict.TIMEOUT


def test_no_code_job_never_runs() -> None:
    results = run_tests(
        None, [TestCase("1"), TestCase("2")], config=SandboxConfig(bwrap="/nonexistent/bwrap")
    )
    assert [r.verdict for r in results] == [Verdict.NO_CODE, Verdict.NO_CODE]


def test_a_large_caller_does_not_turn_a_crash_into_a_memory_verdict() -> None:
    """A per-test run inherits the caller's high-water RSS as ru_maxrss; that must not read as the program's
    (it did in CI: a pytest worker that had loaded torch reported a plain crash as memory_limit)."""
    require_isolation()
    script = (
        "import sys\n"
        "ballast = bytearray(400 << 20)\n"
        "ballast[::4096] = b'x' * len(ballast[::4096])\n"
        "from swerl.sandbox import Limits, SandboxConfig\n"
        "from swerl.sandbox.runner import execute_source\n"
        "run = execute_source('raise SystemExit(3)', limits=Limits(cpu_s=2.0, memory_bytes=1 << 28),\n"
        "                     config=SandboxConfig(persistent=False))\n"
        "print(run.exit_code, run.peak_memory_bytes)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    exit_code, peak = map(int, proc.stdout.split())
    assert exit_code == 3
    assert peak < 1 << 28
    run = Execution(exit_code, None, 0.1, 0.05, peak, "", "", False, False)
    assert failure_verdict(run, LIMITS) is Verdict.RUNTIME_ERROR


def test_staged_programs_are_readable_by_the_sandbox_uid_alone() -> None:
    require_isolation()
    config = SandboxConfig()
    with staged_program("print(6 * 7)") as program:
        assert stat.S_IMODE(program.stat().st_mode) == 0o600
        assert stat.S_IMODE(program.parent.stat().st_mode) == 0o700
        with persistent.leased(config, bwrap_module.resolve_bwrap(config) or "", 1) as sandboxes:
            assert sandboxes
            sandbox = sandboxes[0]
            run = sandbox.run(program, b"", Limits(wall_s=5))
            assert sandbox._dir is not None
            staged = sandbox._dir / "main.py"
            owner = os.getuid() if sandbox.uid is None else sandbox.uid
            assert (staged.stat().st_uid, stat.S_IMODE(staged.stat().st_mode)) == (owner, 0o400)
            assert (sandbox._dir.stat().st_uid, stat.S_IMODE(sandbox._dir.stat().st_mode)) == (owner, 0o500)
    assert run.stdout == "42\n"
