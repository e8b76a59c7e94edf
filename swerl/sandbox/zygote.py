"""The in-sandbox half of a persistent sandbox: pid 1 of one bubblewrap, forking a fresh child per test.

Starting bubblewrap (namespaces, mounts) and an interpreter costs more than the programs we run, so each
worker slot keeps one bubblewrap alive and this script, its init, starts every test. This file runs under
the *sandbox's* interpreter (`python3 -I -S -c <this source>`), so it imports nothing but the standard
library and must work on any Python >= 3.9 (pidfd_open, socket.recv_fds).

Per test, the child makes the previous test invisible before it execs the program:

* fresh user, mount and IPC namespaces (unshare: no capability needed for a new user namespace, and the
  user namespace gives the rights for the other two). The uid map is the slot's uid onto itself, so the
  program runs under the same uid as before and RLIMIT_NPROC still counts its processes;
* a fresh tmpfs on /tmp and on /dev/shm, sized by the request: the only writable places, and both vanish
  with the test's mount namespace, so nothing written by test N is there for test N+1;
* the IPC namespace takes SysV segments, semaphores and POSIX message queues with it; the user namespace
  takes the user keyrings;
* the highest OOM score (oom_score_adj 1000; raising it needs no privilege), so that when the test
  passes the slot cgroup's memory limit the kernel's OOM killer picks a process of the test, not us;
* rlimits, a new session, default signal dispositions, only fds 0 / 1 / 2 (stdin memfd, stdout and stderr
  pipes that the host passed over the control socket);
* last, no_new_privs and the seccomp filter (seccomp.py; built by the host, passed in our config), which
  from here on refuses namespace, mount and other calls, so the program cannot undo any of the above
  (the unshare and mounts before it were ours); then exec of a fresh interpreter.

After the program exits (or the host asks us to kill it), we SIGKILL every other process in the pid
namespace (kill(-1) from init reaches them all, orphans included, because they were all reparented to us)
and reap them before answering, so no process of test N is alive when test N+1 starts. As the namespace's
init we cannot be killed from inside (the kernel drops signals to init that it has no handler for, so we
reset SIGINT, the one Python handles), and we are not dumpable, so the program cannot ptrace us or read
our memory either.

Protocol, over a SOCK_SEQPACKET socket (one message each; fds travel as SCM_RIGHTS):
  zygote -> host  {"ready": true} | {"ready": false, "error": "..."}   once, after a self-test
  host -> zygote  {"op": "run", "seq": n, ...} + fds [stdin, stdout, stderr]
  host -> zygote  {"op": "kill", "seq": n}   (ignored unless run n is still going)
  zygote -> host  {"seq": n, "status": ..., "utime": ..., "stime": ..., "maxrss": ..., "setup_error": ...}
End of file on the socket (the host went away) kills everything and ends the sandbox.
"""

import base64
import contextlib
import ctypes
import errno
import json
import os
import resource
import select
import signal
import socket
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REC = 0x4000
MS_PRIVATE = 0x40000
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2
SCRATCH = ("/tmp", "/dev/shm")
MESSAGE_BYTES = 1 << 16
EXEC_FAILED = 127

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _write(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def isolate(tmp_bytes, tmp_inodes):
    """New user / mount / IPC namespaces for this process, with fresh scratch tmpfs mounts."""
    uid, gid = os.getuid(), os.getgid()
    # we run non-dumpable (so tests cannot ptrace us); /proc/self/*_map must be ours to write them
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{uid} {uid} 1")
    _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    options = f"size={int(tmp_bytes)},nr_inodes={int(tmp_inodes)},mode=0755".encode()
    for target in SCRATCH:
        _check(_libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options), target)
    # the new user namespace gave us every capability in it and a full bounding set; exec as a non-zero
    # uid drops the capabilities, and emptying the bounding set keeps them out of reach (as bubblewrap does)
    cap = 0
    while _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if ctypes.get_errno() != errno.EINVAL:  # EINVAL: past the last capability, the normal end
        _check(-1, f"drop capability {cap} from the bounding set")


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def install_seccomp(compiled):
    """Apply a compiled classic-BPF filter (8 bytes per instruction) to this process and its future
    children; no_new_privs first, which the kernel requires of an unprivileged caller."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    program = _Program(len(compiled) // 8, compiled)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0), "seccomp")


def _child(request, fds, error_fd, config):
    """Runs in the forked child; never returns. Setup errors go to error_fd (ours, not the program's)."""
    stdin, stdout, stderr = fds
    try:
        os.setsid()
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        # before unshare: the new user namespace takes its process ceiling from the creator's limit
        if request.get("nproc"):
            resource.setrlimit(resource.RLIMIT_NPROC, tuple(request["nproc"]))
        isolate(request["tmp_bytes"], request["tmp_inodes"])
        _write("/proc/self/oom_score_adj", "1000")  # after isolate: /proc/self is ours once dumpable
        os.chdir("/tmp")
        for target, fd in enumerate((stdin, stdout, stderr)):
            os.dup2(fd, target)
        os.closerange(3, error_fd)
        os.closerange(error_fd + 1, 1 << 20)
        for which, soft, hard in request["rlimits"]:
            resource.setrlimit(which, (soft, hard))
        if config["seccomp"]:
            install_seccomp(base64.b64decode(config["seccomp"]))
    except BaseException as err:  # anything failing here is ours: reported, never raised
        os.write(error_fd, f"{type(err).__name__}: {err}".encode()[:4000])
        os._exit(EXEC_FAILED)
    argv = [config["python"], *config["python_args"], config["program"]]
    try:
        os.execve(config["python"], argv, config["env"])
    except OSError as err:  # the program's limits can make exec fail (e.g. RLIMIT_AS): the program's run
        os.write(2, f"sandbox: cannot start {config['python']}: {err}\n".encode())
    os._exit(EXEC_FAILED)


def sweep():
    """Kill and reap every process in the namespace but us; returns once none is left."""
    while True:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, MESSAGE_BYTES)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _wait(ctl, pid, seq):
    """Block until the child exits, killing it when the host asks; returns False if the host is gone."""
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(ctl.fileno(), select.POLLIN)
    host_alive = True
    try:
        while True:
            for fd, _ in poller.poll():
                if fd == pidfd:
                    return host_alive
                message = ctl.recv(MESSAGE_BYTES)
                if not message:
                    host_alive = False
                    poller.unregister(ctl.fileno())
                elif json.loads(message).get("seq") != seq:
                    continue  # a late kill for a run that had already finished
                os.kill(-1, signal.SIGKILL)  # the program and everything it started
    finally:
        os.close(pidfd)


def run_one(ctl, request, fds, config):
    """One test: fork, wait, sweep; the reply for the host (None if the host has gone away)."""
    error_read, error_write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        os.close(error_read)
        _child(request, fds, error_write, config)
    os.close(error_write)
    for fd in fds:
        os.close(fd)
    host_alive = _wait(ctl, pid, request["seq"])
    _, status, usage = os.wait4(pid, 0)
    sweep()
    error = _read_all(error_read).decode(errors="replace")
    os.close(error_read)
    if not host_alive:
        return None
    return {
        "seq": request["seq"],
        "status": status,
        "utime": usage.ru_utime,
        "stime": usage.ru_stime,
        "maxrss": usage.ru_maxrss,
        "setup_error": error or None,
    }


def self_test(config):
    """None when per-test isolation works here, else why not (e.g. nested user namespaces are off)."""
    error_read, error_write = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            isolate(1 << 20, 64)
            if config["seccomp"]:
                install_seccomp(base64.b64decode(config["seccomp"]))
                if _libc.unshare(CLONE_NEWUSER) == 0:
                    raise OSError("the seccomp filter did not stop unshare()")
            os._exit(0)
        except BaseException as err:
            os.write(error_write, str(err).encode()[:4000])
            os._exit(1)
    os.close(error_write)
    _, status = os.waitpid(pid, 0)
    error = _read_all(error_read).decode(errors="replace")
    os.close(error_read)
    if os.waitstatus_to_exitcode(status) != 0:
        return error or f"self-test exited with status {status}"
    return None


def main():
    config = json.loads(sys.argv[1])
    ctl = socket.socket(fileno=config["fd"])
    os.set_inheritable(ctl.fileno(), False)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a handled signal could be sent to us from inside
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    problem = self_test(config)
    ctl.send(json.dumps({"ready": problem is None, "error": problem}).encode())
    while problem is None:
        try:
            message, fds, _, _ = socket.recv_fds(ctl, MESSAGE_BYTES, 3)
        except OSError:
            break
        if not message:
            break
        request = json.loads(message)
        if request.get("op") != "run" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        reply = run_one(ctl, request, fds, config)
        if reply is None:
            break
        ctl.send(json.dumps(reply).encode())
    sweep()


if __name__ == "__main__":
    main()
