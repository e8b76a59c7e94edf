"""A seccomp deny-list for sandboxed programs, assembled as classic BPF in pure Python (no dependency).

Namespaces and mounts are what the sandbox itself is built from; a program that can make its own gets
capabilities over them (a user namespace of its own lets it mount an unsized tmpfs past the /tmp cap,
bring up interfaces, open netfilter sockets), and the kernel interfaces behind ptrace, bpf, keyrings,
perf events, io_uring, module loading or reboot are large attack surfaces no contest or test program
needs. The filter makes those calls fail with EPERM (a program sees an ordinary error, never a crash):

* every call in DENIED, by number;
* clone() with any namespace flag (fork and threads pass); clone3() fails with ENOSYS, because its flags
  sit in memory a filter cannot read, and the C library then falls back to clone();
* socket() outside AF_UNIX / AF_INET / AF_INET6 (no netlink, packet or other families) fails with
  EAFNOSUPPORT;
* with `deny_memfd` (where no memory cgroup counts memfd pages against the test), memfd_create().

The filter first checks the architecture: a call made through another ABI (i386 via int 0x80, or the
x32 numbers) would mean other syscall numbers, so it kills the process or fails. Only x86_64 has a table
here; elsewhere `unavailable()` says so and the sandbox refuses to run unless the protection is waived.
"""

from __future__ import annotations

import errno
import functools
import platform
import struct
from dataclasses import dataclass

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000

DENIED: dict[str, int] = {
    # namespaces and mounts
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    # other processes' memory
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    # large kernel attack surfaces
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "fanotify_init": 300,
    # the machine itself
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "acct": 163,
    "quotactl": 179,
    "quotactl_fd": 443,
    "syslog": 103,
    "iopl": 172,
    "ioperm": 173,
    "uselib": 134,
    "vhangup": 153,
    "lookup_dcookie": 212,
}
"""x86_64 numbers (asm/unistd_64.h; a test checks them against the header where it is installed)."""
CLONE = 56
CLONE3 = 435
SOCKET = 41
MEMFD_CREATE = 319

NAMESPACE_FLAGS = 0x7E020000
"""NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (the CLONE_ flags)."""
ALLOWED_FAMILIES = (1, 2, 10)
"""AF_UNIX (multiprocessing), AF_INET, AF_INET6 (harmless in the empty network namespace)."""

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]: its low 32 bits, little-endian)
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000


@dataclass(frozen=True)
class _Op:
    code: int
    k: int = 0
    true: str | None = None
    """Label jumped to when the condition holds (None: the next instruction)."""
    false: str | None = None
    label: str | None = None
    """This instruction's own label."""


def _assemble(ops: list[_Op]) -> bytes:
    """struct sock_filter[] in native byte order, with labels turned into forward offsets."""
    where = {op.label: i for i, op in enumerate(ops) if op.label}

    def offset(i: int, target: str | None) -> int:
        if target is None:
            return 0
        jump = where[target] - i - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"jump to {target} out of range")
        return jump

    return b"".join(
        struct.pack("=HBBI", op.code, offset(i, op.true), offset(i, op.false), op.k)
        for i, op in enumerate(ops)
    )


@functools.cache
def build_filter(*, deny_memfd: bool) -> bytes:
    """The compiled filter (what bubblewrap's --seccomp reads and PR_SET_SECCOMP takes)."""
    denied = sorted(DENIED.values()) + ([MEMFD_CREATE] if deny_memfd else [])
    ops = [
        _Op(_LD_ABS, _ARCH),
        _Op(_JEQ, AUDIT_ARCH_X86_64, true="native"),
        _Op(_RET, RET_KILL_PROCESS),
        _Op(_LD_ABS, _NR, label="native"),
        _Op(_JGE, X32_SYSCALL_BIT, true="enosys"),
        *(_Op(_JEQ, number, true="eperm") for number in denied),
        _Op(_JEQ, CLONE3, true="enosys"),
        _Op(_JEQ, CLONE, true="clone"),
        _Op(_JEQ, SOCKET, true="socket"),
        _Op(_RET, RET_ALLOW),
        _Op(_LD_ABS, _ARG0, label="clone"),
        _Op(_JSET, NAMESPACE_FLAGS, true="eperm"),
        _Op(_RET, RET_ALLOW),
        _Op(_LD_ABS, _ARG0, label="socket"),
        *(_Op(_JEQ, family, true="allow") for family in ALLOWED_FAMILIES),
        _Op(_RET, RET_ERRNO | errno.EAFNOSUPPORT),
        _Op(_RET, RET_ALLOW, label="allow"),
        _Op(_RET, RET_ERRNO | errno.EPERM, label="eperm"),
        _Op(_RET, RET_ERRNO | errno.ENOSYS, label="enosys"),
    ]
    return _assemble(ops)


def unavailable() -> str | None:
    """None when the filter fits this machine, else why not."""
    machine = platform.machine()
    if machine != "x86_64":
        return f"the seccomp filter has syscall numbers for x86_64 only, not {machine}"
    return None
