"""The seccomp filter, applied for real to a fresh interpreter (no sandbox needed): what it refuses, what a
contest program still can do, and its syscall numbers against the kernel headers where installed."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from swerl.sandbox import seccomp

PROBE = r"""
import ctypes, errno, os, socket, subprocess, sys, threading
from swerl.sandbox import seccomp, zygote
zygote.install_seccomp(seccomp.build_filter(deny_memfd=sys.argv[1] == "1"))
libc = ctypes.CDLL(None, use_errno=True)
def refused(result):
    return result == -1 and ctypes.get_errno() in (errno.EPERM, errno.ENOSYS)
def raises(call):
    try:
        call()
        return False
    except OSError:
        return True
report = {
    "unshare": refused(libc.unshare(0x10000000)),
    "clone_newuser": refused(libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)),
    "setns": refused(libc.setns(0, 0)),
    "mount": refused(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "ptrace": refused(libc.ptrace(16, os.getppid(), None, None)),
    "bpf": refused(libc.syscall(321, 0, 0, 0)),
    "keyctl": refused(libc.syscall(250, 0, 0, 0, 0, 0)),
    "io_uring": refused(libc.syscall(425, 1, 0)),
    "netlink": raises(lambda: socket.socket(16, socket.SOCK_RAW, 0)),
    "memfd": raises(lambda: os.memfd_create("x")),
    "fork": os.waitpid(os.fork() or os._exit(0), 0)[1] == 0,
    "thread": (lambda t: (t.start(), t.join(), True)[2])(threading.Thread(target=int)),
    "spawn": subprocess.run(["/bin/true"]).returncode == 0,
    "unix_socket": socket.socketpair() is not None,
    "inet_socket": socket.socket() is not None,
}
print(" ".join(name for name, yes in report.items() if yes))
"""


pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the filter has x86_64 numbers only")


@pytest.mark.parametrize("deny_memfd", [True, False])
def test_filter_refuses_namespaces_and_kernel_surfaces_but_not_programs(deny_memfd: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "1" if deny_memfd else "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr
    yes = set(done.stdout.split())
    refused = {"unshare", "clone_newuser", "setns", "mount", "ptrace", "bpf", "keyctl", "io_uring", "netlink"}
    assert refused <= yes
    assert {"fork", "thread", "spawn", "unix_socket", "inet_socket"} <= yes
    assert ("memfd" in yes) is deny_memfd


def test_numbers_match_the_kernel_headers() -> None:
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("kernel headers (linux-libc-dev) not installed")
    numbers = dict(re.findall(r"#define __NR_(\w+) (\d+)", header.read_text()))
    ours = {**seccomp.DENIED, "clone": seccomp.CLONE, "clone3": seccomp.CLONE3, "socket": seccomp.SOCKET}
    ours["memfd_create"] = seccomp.MEMFD_CREATE
    known = {name: number for name, number in ours.items() if name in numbers}
    assert len(known) >= len(ours) - 2, "the header lacks most of our calls: wrong header?"
    assert {name: int(numbers[name]) for name in known} == known


def test_filter_is_well_formed() -> None:
    compiled = seccomp.build_filter(deny_memfd=False)
    assert len(compiled) % 8 == 0 and len(compiled) // 8 < 255
    assert len(seccomp.build_filter(deny_memfd=True)) == len(compiled) + 8
