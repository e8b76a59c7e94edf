"""Hostile programs (fork bombs, namespace escapes, memory and output floods, judge crashers), each
contained with the right verdict, in a persistent sandbox and with a bubblewrap per test, and the host
unchanged: no namespace of their own, limits over all of a test's
processes, a judge that any output cannot crash, and verdicts from evidence rather than from stderr."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from isolation import require_isolation

from swerl.codecontests.checker import outputs_match
from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, Verdict, cgroups, run_batch

MIB = 1 << 20
LIMITS = Limits(wall_s=6.0, cpu_s=3.0, memory_bytes=256 * MIB, tmp_bytes=64 * MIB)

NESTED_NAMESPACE = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    got = []
    for name, flags in [('user', 0x10000000), ('user+mount', 0x10020000), ('net', 0x40000000)]:
        if libc.unshare(flags) == 0:
            got.append(name)
    try:
        os.unshare(0x10000000)  # Python 3.12+
        got.append('os.unshare')
    except (AttributeError, OSError):
        pass
    pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # raw clone(CLONE_NEWUSER | SIGCHLD)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        got.append('clone')
    print('namespaces', got)
""")
TMPFS_PAST_THE_CAP = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None, use_errno=True)
    mounted = libc.unshare(0x10020000) == 0 and libc.mount(b'none', b'/tmp', b'tmpfs', 0, None) == 0
    written = 0
    try:
        with open('/tmp/fill', 'wb') as f:
            while written < 400 << 20:
                f.write(b'x' * (1 << 20))
                written += 1 << 20
    except OSError:
        pass
    print('mounted', mounted, 'past_cap', written > 64 << 20)
""")
PROCESSES_OVER_THE_LIMIT = textwrap.dedent("""
    import os, time
    children = []
    for _ in range(6):
        pid = os.fork()
        if pid == 0:
            ballast = bytearray(150 << 20)  # within RLIMIT_AS for each process: 900 MiB in all
            for i in range(0, len(ballast), 4096):
                ballast[i] = 1
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    ok = all(os.waitpid(pid, 0)[1] == 0 for pid in children)
    print('all survived' if ok else 'some died')
""")
MEMFD = textwrap.dedent("""
    import os
    fds = []
    for _ in range(40):
        fd = os.memfd_create('x')
        os.write(fd, b'x' * (16 << 20))  # outside every address space: 640 MiB in all
        fds.append(fd)
    print('held', len(fds) * 16, 'MiB')
""")
SELF_KILL_AFTER_RIGHT_ANSWER = textwrap.dedent("""
    import ctypes, os, signal, sys
    print(5, flush=True)
    sys.stderr.write('MemoryError\\n')
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # ignored where the program is its namespace's init (per-test)
    ctypes.string_at(0)  # SIGSEGV: the kernel forces it even on an init
""")
HUGE = "9" * 5000


def _attacks() -> dict[str, tuple[str, TestCase, set[Verdict]]]:
    """name -> (program, test, acceptable verdicts). Where no memory cgroup exists the fallback refuses
    memfd_create (a runtime error); the several-processes attack then needs the cgroup (see the skip)."""
    memfd_verdicts = {Verdict.MEMORY_LIMIT} if cgroups.unavailable() is None else {Verdict.RUNTIME_ERROR}
    return {
        "nested_namespace": (NESTED_NAMESPACE, TestCase("", "namespaces []"), {Verdict.PASSED}),
        "tmpfs_past_the_cap": (
            TMPFS_PAST_THE_CAP,
            TestCase("", "mounted False past_cap False"),
            {Verdict.PASSED},
        ),
        "memfd": (MEMFD, TestCase(""), memfd_verdicts),
        "huge_integer_output": (f"print('{HUGE}')", TestCase("", "1"), {Verdict.WRONG_ANSWER}),
        "huge_integer_right": (f"print('{HUGE}')", TestCase("", HUGE), {Verdict.PASSED}),
        "self_kill_after_right_answer": (
            SELF_KILL_AFTER_RIGHT_ANSWER,
            TestCase("", "5"),
            {Verdict.RUNTIME_ERROR},
        ),
    }


@pytest.fixture(autouse=True, scope="module")
def _need_bwrap() -> None:
    require_isolation()


@pytest.fixture(scope="module", params=["persistent", "per-test"])
def outcomes(request) -> dict[str, tuple[Verdict, str]]:
    """Every attack then a canary, in one slot, so each canary meets whatever its attack left behind."""
    attacks = _attacks()
    jobs = []
    for source, test, _ in attacks.values():
        jobs += [Job(source, [test]), Job("print(int(input()) * 2)", [TestCase("21\n", "42")])]
    config = SandboxConfig(persistent=request.param == "persistent")
    results = run_batch(jobs, checker=outputs_match, limits=LIMITS, workers=1, config=config)
    outcome = {}
    for i, name in enumerate(attacks):
        attack, canary = results[2 * i][0], results[2 * i + 1][0]
        assert canary.verdict is Verdict.PASSED, f"the test after {name} failed: {canary}"
        outcome[name] = (attack.verdict, attack.stdout_tail + attack.stderr_tail)
    return outcome


@pytest.mark.parametrize("name", list(_attacks()))
def test_attack_is_contained_with_the_right_verdict(outcomes, name: str) -> None:
    verdict, output = outcomes[name]
    assert verdict in _attacks()[name][2], f"{name}: {verdict}\n{output[-1500:]}"


def test_several_processes_share_one_memory_limit() -> None:
    if cgroups.unavailable():
        pytest.skip(
            f"no per-test memory cgroup here ({cgroups.unavailable()}); rlimits cap each process only"
        )
    for persistent in (True, False):
        [[result]] = run_batch(
            [Job(PROCESSES_OVER_THE_LIMIT, [TestCase("")])],
            limits=LIMITS,
            workers=1,
            config=SandboxConfig(persistent=persistent),
        )
        assert result.verdict is Verdict.MEMORY_LIMIT, (persistent, result)


def test_the_host_is_unchanged() -> None:
    """No slot cgroup, mount or staged program of ours is left once the sandboxes are shut down."""
    from swerl.sandbox import shutdown

    shutdown()
    layout = cgroups.layout()
    if not isinstance(layout, str):
        for parent in {layout.memory_parent, layout.pids_parent}:
            leftovers = [p.name for p in parent.iterdir() if p.name.startswith(f"swerl-{os.getpid()}-")]
            assert leftovers == []
    assert "swerl" not in Path("/proc/self/mounts").read_text()


@pytest.mark.parametrize("persistent", [True, False])
def test_time_limit_is_cpu_time_with_a_longer_wall_clock(persistent: bool) -> None:
    """A problem's 1 s limit: a program waiting 1.5 s of wall clock with no CPU passes (a loaded machine
    must not turn it into a timeout); one burning CPU is stopped at ~1 s of CPU, before the 3 s wall."""
    limits = Limits().scaled(time_s=1.0)
    jobs = [
        Job("import time\ntime.sleep(1.5)\nprint(1)\n", [TestCase("", "1")]),
        Job("while True:\n    pass\n", [TestCase("", "1")]),
    ]
    [[waits], [burns]] = run_batch(
        jobs, limits=limits, workers=2, config=SandboxConfig(persistent=persistent)
    )
    assert waits.verdict is Verdict.PASSED and waits.wall_s > 1.4
    assert burns.verdict is Verdict.TIMEOUT and burns.cpu_s < 1.5
    # stopped by the CPU limit, unless the machine is so loaded that 3 s of wall clock held < 1 s of CPU
    assert burns.wall_s < limits.wall_s or burns.cpu_s < 1.0
