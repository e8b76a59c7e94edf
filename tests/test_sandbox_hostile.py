"""Hostile programs: each is contained, gets the right verdict, and the next test in its slot is fine."""

from __future__ import annotations

import os
import socket
import textwrap
from pathlib import Path

import pytest
from isolation import require_isolation

from swerl.sandbox import Job, Limits, SandboxConfig, TestCase, Verdict, run_batch
from swerl.sandbox.bwrap import SLOTS_PER_PROCESS, UID_BASE

PROJECT = Path(__file__).resolve().parents[1]
LIMITS = Limits(wall_s=2.0, cpu_s=1.0, memory_bytes=256 << 20, stdout_bytes=1 << 20, file_bytes=1 << 20)
CANARY = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"


@pytest.fixture(autouse=True, scope="module")
def _need_bwrap() -> None:
    require_isolation()


def _host_listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


LISTENER = None


def _programs(port: int) -> dict[str, tuple[str, Verdict, str | None]]:
    """name -> (source, expected verdict, expected stdout or None)."""
    return {
        "fork_bomb": (
            "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
            Verdict.TIMEOUT,
            None,
        ),
        "infinite_loop": ("while True:\n    pass\n", Verdict.TIMEOUT, None),
        "sleep_past_timeout": ("import time\ntime.sleep(60)\n", Verdict.TIMEOUT, None),
        "memory_hog": (
            "hog = []\nwhile True:\n    hog.append(bytearray(1 << 24))\n",
            Verdict.MEMORY_LIMIT,
            None,
        ),
        "one_huge_allocation": ("x = bytearray(1 << 33)\n", Verdict.MEMORY_LIMIT, None),
        "stdout_flood": (
            "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
            Verdict.OUTPUT_LIMIT,
            None,
        ),
        "stderr_flood": (
            "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
            Verdict.OUTPUT_LIMIT,
            None,
        ),
        "huge_file": (
            "with open('/tmp/big', 'wb') as f:\n    while True:\n        f.write(b'x' * 65536)\n",
            Verdict.OUTPUT_LIMIT,
            None,
        ),
        "write_outside_tmp": (
            textwrap.dedent(f"""
                ok = []
                targets = ['/usr/pwned', '/etc/pwned', '/pwned', '/sandbox/pwned']
                for path in targets + [{str(PROJECT / "pwned")!r}]:
                    try:
                        open(path, 'w').write('x')
                        ok.append(path)
                    except OSError:
                        pass
                open('/tmp/scratch', 'w').write('fine')
                print('wrote', ok)
            """),
            Verdict.PASSED,
            "wrote []",
        ),
        "read_project_and_home": (
            textwrap.dedent(f"""
                import os
                seen = [p for p in [{str(PROJECT)!r}, {str(Path.home())!r}, '/root', '/home', '/work',
                                    '/etc/passwd', '/etc/shadow'] if os.path.exists(p)]
                print('seen', seen)
            """),
            Verdict.PASSED,
            "seen []",
        ),
        "network": (
            textwrap.dedent(f"""
                import socket
                reached = []
                for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53), ('8.8.8.8', 443)]:
                    try:
                        socket.create_connection((host, port), timeout=1).close()
                        reached.append(host)
                    except OSError:
                        pass
                print('reached', reached)
            """),
            Verdict.PASSED,
            "reached []",
        ),
        "kill_parent_and_everyone": (
            "import os, signal\nfor pid in (os.getppid(), -1):\n    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\nprint('alive')\n",
            Verdict.PASSED,
            "alive",
        ),
        "attack_the_sandbox_init": (
            textwrap.dedent("""
                import ctypes, os, signal
                got = []
                if os.getpid() != 1:  # pid 1 is the zygote (with a bubblewrap per test: ourselves)
                    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL):
                        os.kill(1, sig)
                    for path in ('/proc/1/mem', '/proc/1/environ', '/proc/1/fd/3'):
                        try:
                            open(path, 'rb').read(1)
                            got.append(path)
                        except OSError:
                            pass
                    if ctypes.CDLL(None, use_errno=True).ptrace(16, 1, None, None) == 0:
                        got.append('ptrace')
                print('got', got)
            """),
            Verdict.PASSED,
            "got []",
        ),
        "regain_privileges": (
            textwrap.dedent("""
                import ctypes, os
                libc = ctypes.CDLL(None, use_errno=True)
                caps = [line for line in open('/proc/self/status') if line.startswith('Cap')]
                held = [line.split(':')[0] for line in caps if int(line.split()[1], 16)]
                for flags in (0, 2):  # MNT_DETACH
                    for path in ('/tmp', '/dev/shm', '/dev', '/sandbox', '/usr', '/proc'):
                        if libc.umount2(path.encode(), flags) == 0:
                            held.append(path)
                print('held', held)
            """),
            Verdict.PASSED,
            "held []",
        ),
        "background_outlives": (
            "import os, sys, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n    os._exit(0)\n"
            "print('parent done')\n",
            Verdict.PASSED,
            "parent done",
        ),
        "delete_visible_files": (
            textwrap.dedent("""
                import json, os, shutil
                gone = []
                for path in ['/sandbox/main.py', '/usr/bin/python3', '/etc/ld.so.cache']:
                    try:
                        os.remove(path)
                        gone.append(path)
                    except OSError:
                        pass
                # A library package, not all of /usr/lib: walking tens of thousands of read-only files
                # costs more CPU than the test's limit on a loaded machine.
                library = os.path.dirname(json.__file__)
                shutil.rmtree(library, ignore_errors=True)
                print('deleted', gone, os.listdir(library) != [])
            """),
            Verdict.PASSED,
            "deleted [] True",
        ),
        "crash": ("raise SystemExit(3)\n", Verdict.RUNTIME_ERROR, None),
        "sees_previous_tmp": (
            "import os\nprint('leftover', os.listdir('/tmp'))\n",
            Verdict.PASSED,
            "leftover []",
        ),
    }


@pytest.fixture(scope="module", params=["persistent", "per-test"])
def outcomes(request):
    """Run every hostile program followed by a canary in one worker slot, so each canary inherits
    whatever its predecessor left behind; in a persistent sandbox and with a bubblewrap per test."""
    listener = _host_listener()
    try:
        programs = _programs(listener.getsockname()[1])
        jobs = []
        for source, _, expected in programs.values():
            jobs.append(Job(source, [TestCase("", expected)]))
            jobs.append(Job(CANARY, [TestCase("2 3\n", "5")]))
        config = SandboxConfig(persistent=request.param == "persistent")
        results = run_batch(jobs, limits=LIMITS, workers=1, config=config)
    finally:
        listener.close()
    return {name: (results[2 * i][0], results[2 * i + 1][0]) for i, name in enumerate(programs)}


@pytest.mark.parametrize("name", list(_programs(0)))
def test_hostile_program_is_contained(outcomes, name: str) -> None:
    expected = _programs(0)[name][1]
    result, canary = outcomes[name]
    assert result.verdict is expected, (result.verdict, result.stdout_tail, result.stderr_tail[-500:])
    assert canary.verdict is Verdict.PASSED, (canary, "the next test was affected")
    assert result.wall_s < LIMITS.wall_s + 1.5


def _slot_processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command) of every process running under one of this process's slot uids."""
    low = UID_BASE + (os.getpid() % (1 << 22)) * SLOTS_PER_PROCESS
    found = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            uid, ppid = int(fields["Uid"].split()[0]), int(fields["PPid"])
            command = (status.parent / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except (OSError, KeyError, ValueError):
            continue
        if low <= uid < low + SLOTS_PER_PROCESS:
            found[int(status.parent.name)] = (ppid, command)
    return found


def test_background_process_does_not_outlive_its_test(outcomes) -> None:
    result, _ = outcomes["background_outlives"]
    assert result.wall_s < 1.5, "the run waited for its background child instead of ending with main"
    if os.geteuid() != 0:
        return
    # idle persistent sandboxes stay: bubblewrap (our child) and its init, the zygote; nothing else may
    processes = _slot_processes()
    bubblewraps = {pid for pid, (ppid, _) in processes.items() if ppid == os.getpid()}
    leftovers = {
        pid: command
        for pid, (ppid, command) in processes.items()
        if pid not in bubblewraps and ppid not in bubblewraps
    }
    assert not leftovers, f"sandbox processes left running: {leftovers}"
    assert len(processes) <= 2 * len(bubblewraps)


LEAVER = textwrap.dedent("""
    import ctypes, os, platform, time
    libc = ctypes.CDLL(None, use_errno=True)
    left = []
    for path in ('/tmp/left', '/dev/shm/left', '/dev/left'):
        try:
            open(path, 'w').write('x')
            left.append(path)
        except OSError:
            pass
    if libc.shmget(0x5EED, 4096, 0o1666) != -1:
        left.append('sysv-shm')
    if libc.mq_open(b'/left', os.O_CREAT | os.O_RDWR, 0o666, None) != -1:
        left.append('mqueue')
    add_key = {'x86_64': 248, 'aarch64': 217}.get(platform.machine())
    if add_key and libc.syscall(add_key, b'user', b'left', b'x', 1, -4) != -1:
        left.append('user-keyring')
    if os.fork() == 0:
        os.setsid()
        time.sleep(30)
        os._exit(0)
    print('left', left, flush=True)
""")

FINDER = textwrap.dedent("""
    import ctypes, os, platform
    libc = ctypes.CDLL(None, use_errno=True)
    found = [path for path in ('/tmp/left', '/dev/shm/left', '/dev/left') if os.path.exists(path)]
    if libc.shmget(0x5EED, 0, 0) != -1:
        found.append('sysv-shm')
    if libc.mq_open(b'/left', os.O_RDWR) != -1:
        found.append('mqueue')
    keyctl = {'x86_64': 250, 'aarch64': 219}.get(platform.machine())
    if keyctl and libc.syscall(keyctl, 10, -4, b'user', b'left', 0) != -1:
        found.append('user-keyring')
    found += [pid for pid in os.listdir('/proc') if pid.isdigit() and int(pid) not in (1, os.getpid())]
    print('found', found)
""")


@pytest.mark.parametrize("persistent", [True, False])
def test_nothing_of_a_test_is_left_for_the_next_one(persistent: bool) -> None:
    """Files in every writable place, SysV and POSIX IPC, a key, a background process: all gone."""
    jobs = [Job(LEAVER, [TestCase("")]), Job(FINDER, [TestCase("", "found []")])]
    config = SandboxConfig(persistent=persistent)
    [[left], [found]] = run_batch(jobs, limits=LIMITS, workers=1, config=config)
    assert left.verdict is Verdict.PASSED, left
    for thing in ("/tmp/left", "/dev/shm/left", "sysv-shm", "mqueue"):
        assert thing in left.stdout_tail, (
            thing,
            left.stdout_tail,
        )  # otherwise the check below proves nothing
    assert "/dev/left" not in left.stdout_tail, "/dev must be read-only"
    assert found.verdict is Verdict.PASSED, (found.stdout_tail, found.stderr_tail)


def test_fork_bomb_is_capped_by_process_limit() -> None:
    if os.geteuid() != 0:
        pytest.skip("RLIMIT_NPROC per slot needs root (to run each slot under its own uid)")
    source = textwrap.dedent("""
        import os, time
        children = 0
        for _ in range(200):
            try:
                if os.fork() == 0:
                    time.sleep(3)
                    os._exit(0)
                children += 1
            except OSError:
                break
        print(children, flush=True)
        os._exit(0)
    """)
    limits = Limits(wall_s=5, cpu_s=2, processes=10)
    [[result]] = run_batch([Job(source, [TestCase("")])], limits=limits, config=SandboxConfig())
    # bubblewrap's own process and the program count against the limit too
    assert int(result.stdout_tail) == limits.processes - 2
    assert result.wall_s < 1.5, "children of a finished program must die with it"
