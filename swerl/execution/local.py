"""Local execution backend: a fresh checkout per run, the harness's patch commands, tests in bubblewrap.

Every run (`run_tests` for reranking, `evaluate` for the harness's verdict) starts from a fresh git
checkout of the base commit, applies patches with SWE-bench's chain of commands and runs the tests in
the instance's environment (`envs.py`). An environment that installs the project points its install at
a fixed directory (its testbed); each run moves its own fresh tree there, under the environment's lock,
so the environment never holds code of its own: no patch ever sees another patch's tree, whatever
the layout (`src/` included).

What isolation makes sense here: the code under test is the repository plus a model-written patch and
maybe a model-written test, so it is untrusted. It runs in a bubblewrap sandbox with no network, the
system and the interpreter's installation read-only, and only the tree writable (plus a private /tmp).
Besides the wall clock, optional per-process memory and CPU limits (`RunLimits`, off by default: test
suites legitimately use several processes and much memory) stop a runaway test early. Without
bubblewrap the backend refuses unless `isolation="none"` is chosen explicitly. git and patch run
outside the sandbox, on our side, with hooks and user configuration disabled.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import unidiff

from swerl.edit_format import patch_paths
from swerl.execution import witness
from swerl.execution.base import BUILD_FAILED, TestRun, parse_pytest_report, test_files
from swerl.execution.envs import (
    BUILTIN_SPECS,
    EnvManager,
    EnvSetupError,
    TestEnv,
    code_paths,
    has_module,
    load_env_specs,
    rebuild_command,
    version_of,
)
from swerl.execution.harness import (
    END,
    START,
    EvalPlan,
    eval_plan,
    grade_log,
    harness_api,
    patch_files,
    status_map,
)
from swerl.execution.instances import Instance
from swerl.execution.recipes import COMPILED_SUFFIXES, pytest_config_env
from swerl.execution.uninstalled import write_install_outputs
from swerl.git.clones import RepoCache
from swerl.sandbox.limits import MIB

Isolation = Literal["bwrap", "none"]
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/alternatives", "/etc/ssl")
PYTEST_ARGS = ("-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q")
"""No option newer than pytest 4.6, the oldest an inferred environment gets (`recipes.PYTEST_FLOOR`)."""
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
    # Python 2 reads it too (a venv of 2.7, made by virtualenv, has no base_prefix but a real_prefix).
    code = (
        "import sys, site; base = getattr(sys, 'base_prefix', getattr(sys, 'real_prefix', sys.prefix)); "
        "print('\\n'.join([sys.prefix, base] + list(getattr(site, 'getsitepackages', list)())))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, check=True)
    roots = {os.path.realpath(p) for p in done.stdout.decode().split("\n") if p}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(python))))
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(python))))
    system = tuple(p + "/" for p in _SYSTEM)
    return tuple(sorted(r for r in roots if not (r + "/").startswith(system) and os.path.isdir(r)))


def bwrap_command(
    bwrap: str,
    python: str,
    workdir: Path,
    argv: Sequence[str],
    env: dict[str, str],
    ro_paths: Sequence[Path] = (),
) -> list[str]:
    """The sandboxed `argv`: no network, read-only system, interpreter and `ro_paths`, writable `workdir`."""
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
    for root in [*_interpreter_roots(python), *map(str, ro_paths)]:
        cmd += ["--ro-bind", root, root]
    cmd += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]


def _test_env(workdir: Path, bin_dir: Path, env: TestEnv) -> dict[str, str]:
    """The whole environment tests see: the harness's, nothing of ours (tokens, proxies, settings).

    The harness's eval script runs with PATH (the environment first), HOME and what the instance's own
    script exports; it sets no PYTHONHASHSEED (sympy's tests turn hash randomisation off when it is set)
    and no locale (Python 3.7 and later coerce the C locale to UTF-8 themselves). An inferred
    environment sets the one it was made for (`TestEnv.lang`). `bin_dir` holds `python`/`pytest` of
    the test environment. Without an install (no testbed) the code is found through PYTHONPATH: the
    tree's root and, for a `src/` layout, its `src`.
    """
    values = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}
    if env.lang:
        values["LANG"] = env.lang
    if env.testbed is None:
        # An inferred environment without the install gets what the install would have written (a
        # setuptools_scm version file, the distribution's metadata), the metadata under `bin_dir`,
        # which the sandbox mounts read-only.
        generated = write_install_outputs(workdir, bin_dir / "metadata") if env.uninstalled else []
        values["PYTHONPATH"] = ":".join([*code_paths(workdir), *generated])
    return values


def _shims(bin_dir: Path, python: str) -> Path:
    """`python`, `python3` and `pytest` of the environment, whatever kind it is (venv or a bare one).

    Scripts, not symlinks: a venv's interpreter knows its venv from the path it was started by."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, tail in (("python", ""), ("python3", ""), ("pytest", " -m pytest")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(python)}{tail} "$@"\n', encoding="utf-8")
        shim.chmod(0o755)
    return bin_dir


def _git_shell_env() -> dict[str, str]:
    """For git and patch run by us on a tree holding untrusted patches: no hooks, no user config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "core.hooksPath",
            "GIT_CONFIG_VALUE_0": "/dev/null",
            "GIT_AUTHOR_NAME": "swerl",
            "GIT_AUTHOR_EMAIL": "swerl@localhost",
            "GIT_COMMITTER_NAME": "swerl",
            "GIT_COMMITTER_EMAIL": "swerl@localhost",
            "GIT_TERMINAL_PROMPT": "0",
        }
    )
    return env


def _sh(tree: Path, line: str) -> tuple[int, str]:
    done = subprocess.run(
        ["bash", "-c", line], cwd=tree, capture_output=True, env=_git_shell_env(), check=False
    )
    return done.returncode, (done.stdout + done.stderr).decode(errors="replace")


def apply_patch(tree: Path, patch: str, patch_file: Path) -> tuple[bool, str]:
    """Apply `patch` to the git tree with the harness's chain of commands; (applied, what they said).

    As the harness does: a pristine tree (the last commit) before each attempt, since a failed
    `--reject` leaves half a patch behind; and a patch that is already in place counts as applied.
    Applied patches are committed, so a later patch's retries start from this one's result.
    """
    if not patch.strip():
        return True, ""
    patch_file.write_text(patch, encoding="utf-8")
    said = []
    applied = False
    for attempt, cmd in enumerate(harness_api().GIT_APPLY_CMDS):
        if attempt:
            _sh(tree, "git checkout -q -- . ; git clean -fdq")
        code, out = _sh(tree, f"{cmd} {shlex.quote(str(patch_file))}")
        said.append(f"$ {cmd}\n{out}")
        if code == 0:
            applied = True
            break
    if not applied:
        applied = _sh(tree, f"git apply --check --reverse {shlex.quote(str(patch_file))}")[0] == 0
    if applied:
        _sh(tree, "git add -A && git commit -qm patch --no-verify --allow-empty")
    return applied, "\n".join(said)


def reset_files(tree: Path, commit: str, files: Sequence[str]) -> None:
    """Put `files` back as they are at `commit` (a file the commit lacks is left as it is, as with the
    harness's `git checkout`)."""
    for name in files:
        _sh(tree, f"git checkout -q {commit} -- {shlex.quote(name)}")


@dataclass
class EvalRun:
    """One harness evaluation: the log in the harness's layout and the graded report."""

    log: str
    report: dict[str, object]
    statuses: dict[str, str]
    plan: EvalPlan
    applied: bool
    """Whether the patch applied (the report's `patch_successfully_applied` also fails for a run
    without results)."""
    instance: Instance | None = None
    witness: witness.Witness | None = None
    """What the witness recorded; None where the test command is not pytest's (`witness.witnessed`)
    or no test ran."""
    veto: str | None = None
    """Why the witness vetoed passes of the log (already applied to `report`), else None."""
    built: bool = True
    """False when the patches changed compiled sources and the extensions then did not build (no test
    ran; `BUILD_FAILED` in the log)."""

    def confirm(self, report: dict[str, Any]) -> dict[str, Any]:
        """Another grading of this run's log (one that leaves tests out) with the witness's veto applied."""
        if self.witness is None or self.instance is None:
            return report
        return witness.confirm(self.instance, self.plan, report, self.witness)[0]


@dataclass
class LocalBackend:
    """`ExecutionBackend` that runs tests on this machine. See the module docstring for isolation."""

    repos: RepoCache
    envs: EnvManager
    isolation: Isolation = "bwrap"
    timeout_s: float = 900.0
    work_root: Path | None = None
    limits: RunLimits = field(default_factory=RunLimits)
    _bwrap: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.work_root is not None:
            self.work_root = Path(self.work_root).resolve()
        if self.isolation == "bwrap":
            from swerl.sandbox.bwrap import SandboxUnavailable, isolation_available

            problem = isolation_available()
            if problem is not None:
                raise SandboxUnavailable(
                    f"the local backend runs tests in bubblewrap, which is not usable: {problem}. "
                    "Pass isolation='none' (CLI: --unsafe-no-isolation) to run them unprotected."
                )
            self._bwrap = shutil.which("bwrap")

    @contextlib.contextmanager
    def _fresh_tree(self, instance: Instance) -> Iterator[tuple[TestEnv, Path, Path]]:
        """(environment, tree, scratch dir): a fresh checkout of the base commit where the environment
        looks for the code (its testbed, held under its lock), and a scratch dir for everything else."""
        if self.work_root is not None:
            self.work_root.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="swerl-tests-", dir=self.work_root))
        try:
            tree = self.repos.checkout(instance.repo, instance.base_commit, scratch / "repo")
            with self.repos.lend_history(instance.repo, tree):  # for an install's `git describe`
                env = self.envs.env_for(instance, tree)
            if env.testbed is None:
                yield env, tree, scratch
                return
            with env.lock():
                shutil.rmtree(env.testbed, ignore_errors=True)
                shutil.move(tree, env.testbed)
                env.restore_artifacts(env.testbed)
                yield env, env.testbed, scratch
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def run_tests(
        self, instance: Instance, tests: Sequence[str], patches: Sequence[str] = (), test_patch: str = ""
    ) -> TestRun:
        """`ExecutionBackend.run_tests`; with `test_patch`, applied last as the harness applies it: the
        files it touches put back to the base commit after `patches`, then the test patch on top (so a
        patch that also edited a test file cannot change the tests that judge it). The run carries the
        environment's recipe."""
        with self._fresh_tree(instance) as (env, tree, scratch):
            steps = list(patches)
            for i, patch in enumerate([*steps, test_patch] if test_patch else steps):
                if i == len(steps):
                    reset_files(tree, instance.base_commit, patch_files(test_patch))
                applied, said = apply_patch(tree, patch, scratch / f"{i}.diff")
                if not applied:
                    what = "the test patch" if i == len(steps) else f"patch {i}"
                    return TestRun("apply_failed", log=f"{what} does not apply:\n{said}", recipe=env.recipe)
            built = self._rebuild(env, tree, scratch, [*steps, test_patch])
            if built is not None and not built[0]:
                return TestRun("build_failed", log=built[1], recipe=env.recipe)
            if not tests:
                return TestRun("ok", recipe=env.recipe)
            script = shlex.join(["python", *PYTEST_ARGS, *test_files(tests)])
            code, log, timed_out = self._run(env, tree, scratch, script)
            if built is not None:
                log = f"{built[1]}\n{log}"
        results = parse_pytest_report(log)
        if timed_out:
            return TestRun("timeout", results, log, env.recipe)
        # pytest exits 0 (all passed), 1 (some failed); anything else is an internal or usage error. A 1
        # without a single result is not pytest's: it is Python's exit after a traceback, pytest having
        # failed to import (the tree shadowing one of its own dependencies: old more-itertools on
        # PYTHONPATH breaks pytest 4.6), so no test ran.
        status = "ok" if code == 0 or results else "error"
        if status == "error" and self.limits.rlimits():
            log += _limit_note(code, self.limits)
        return TestRun(status, results, log, env.recipe)

    def evaluate(self, instance: Instance, patch: str | None, log_path: Path) -> EvalRun:
        """Judge `patch` as the harness does; the log goes to `log_path`, graded by the harness's rules."""
        api = harness_api()
        plan = eval_plan(instance)
        lines = [
            f"[swerl] {instance.instance_id}: local harness, swebench {api.version}, plan from {plan.source}"
        ]
        seen: witness.Witness | None = None
        with self._fresh_tree(instance) as (env, tree, scratch):
            lines.append(f"[swerl] python {env.python}, tree {tree}")
            applied, said = apply_patch(tree, patch or "", scratch / "model.diff")
            lines += [said, api.APPLY_PATCH_PASS if applied else api.APPLY_PATCH_FAIL]
            if applied:
                reset_files(tree, instance.base_commit, plan.reset_files)
                test_applied, said = apply_patch(tree, instance.test_patch, scratch / "test.diff")
                lines.append(said if test_applied else f"[swerl] the test patch does not apply:\n{said}")
                built = self._rebuild(env, tree, scratch, [patch or "", instance.test_patch])
                if built is not None:
                    lines.append(built[1])
                if built is None or built[0]:
                    watched = scratch / "witness.jsonl" if witness.witnessed(plan.test_cmd) else None
                    changed = _changed_by(patch or "")
                    code, output, timed_out = self._run(env, tree, scratch, plan.test_cmd, watched, changed)
                    seen = witness.read(watched) if watched is not None else None
                    lines += [
                        f": '{START}'",
                        output.rstrip("\n"),
                        f": '{END}'",
                        f"{api.TEST_EXIT_CODE}: {code}",
                    ]
                    if timed_out:
                        lines.append(f"{api.TESTS_TIMEOUT}: {self.timeout_s:g} s")
        log = "\n".join(lines) + "\n"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text(log, encoding="utf-8")
        report = grade_log(instance, plan, patch, str(log_path))
        veto = None
        if seen is not None:
            report, veto = witness.confirm(instance, plan, report, seen)
        if veto is not None:  # after the harness's markers: no parser reads it as a test's status
            log += f"[swerl] witness veto: {veto}\n"
            log_path.write_text(log, encoding="utf-8")
        statuses = status_map(instance, plan, str(log_path))
        return EvalRun(
            log, report, statuses, plan, applied, instance, seen, veto, built=BUILD_FAILED not in log
        )

    def _rebuild(
        self, env: TestEnv, tree: Path, scratch: Path, patches: Sequence[str]
    ) -> tuple[bool, str] | None:
        """Compile the tree's extensions again when `patches` changed their sources: (built, log), or
        None when there is nothing to build (no compiled source changed, or the environment compiled
        no extension into its trees, as one that finds the code through PYTHONPATH).

        The extensions in a fresh tree are the install's, built at the base commit (`artifacts`), so a
        fix made in C would otherwise never be run. The SWE-bench harness re-runs the install step
        before every evaluation; doing it only when compiled sources change keeps every other run as
        fast as before. The build runs sandboxed like the tests (only the tree writable, no network)
        under the same wall clock. The old modules are removed first: a build that fails, or a
        setup.py that falls back to pure Python when its compiler fails (markupsafe's does), must not
        leave the base commit's extensions to be imported; each must be there again afterwards."""
        changed = sorted({f for p in patches for f in patch_files(p) if Path(f).suffix in COMPILED_SUFFIXES})
        extensions = env.built_extensions() if changed else []
        if not extensions:
            return None
        command = rebuild_command(tree)
        if command is None or not has_module(env.python, "setuptools"):
            # This machine's shortcoming, not the patch's: no verdict either way.
            problem = (
                "its build backend has no in-place build step"
                if command is None
                else "its environment lacks setuptools, which builds them"
            )
            raise EnvSetupError(
                f"compiled sources changed ({', '.join(changed[:5])}) but the extensions cannot be built "
                f"again: {problem}"
            )
        head = f"[swerl] compiled sources changed ({', '.join(changed[:5])}): building the extensions again"
        for name in extensions:
            (tree / name).unlink(missing_ok=True)
        code, output, timed_out = self._run(env, tree, scratch, command)
        missing = [name for name in extensions if not (tree / name).is_file()]
        log = f"{head}\n$ {command}\n{output.strip()[-3000:]}"
        if timed_out:
            return False, f"{log}\n{BUILD_FAILED}: the build ran past {self.timeout_s:g} s"
        if code != 0 or missing:
            # The compiler's errors may lie far above the end of the output (setuptools warns at length
            # after them, a fallback build runs after them): they are repeated next to the verdict.
            errors = [line for line in output.splitlines() if "error:" in line][:10]
            said = "\n".join(["[swerl] the build's errors:", *errors]) + "\n" if errors else ""
            why = f"exit status {code}" if code else f"{', '.join(missing)} not built"
            return False, f"{log}\n{said}{BUILD_FAILED}: {why}"
        return True, log

    def _run(
        self,
        env: TestEnv,
        tree: Path,
        scratch: Path,
        script: str,
        witness_log: Path | None = None,
        changed: Sequence[str] | None = None,
    ) -> tuple[int, str, bool]:
        """Run shell lines in the tree, sandboxed: (exit status, output, timed out). With `witness_log`,
        pytest loads the witness (`witness.py`), which appends its records there through a descriptor
        the sandbox inherits: the file itself stays outside; `changed`, the files the answer changed.

        The mirror stays outside: the tree's repository holds the base commit by itself (`checkout`),
        so code that calls git at import time (versioneer's `_version.py`) still finds a repository,
        and nothing in the sandbox leads to a later commit."""
        bin_dir = _shims(scratch / "bin", env.python)
        test_env = _test_env(tree, bin_dir, env) | pytest_config_env(tree, bin_dir)
        ro_paths, fds = [bin_dir], []
        with contextlib.ExitStack() as stack:
            if witness_log is not None:
                plugin_dir = witness.install(scratch / "plugin")
                fd = os.open(witness_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
                stack.callback(os.close, fd)
                test_env.update(witness.sandbox_env(plugin_dir, fd, test_env.get("PYTHONPATH"), changed))
                ro_paths.append(plugin_dir)
                fds.append(fd)
            if self._bwrap is None:
                return _spawn(self._argv(env, script), tree, test_env, self.timeout_s, tuple(fds))
            return self._run_bwrap(self._bwrap, env, tree, script, test_env, ro_paths, fds)

    def _run_bwrap(
        self,
        bwrap: str,
        env: TestEnv,
        tree: Path,
        script: str,
        test_env: dict[str, str],
        ro_paths: list[Path],
        fds: list[int],
    ) -> tuple[int, str, bool]:
        # The first line inside the sandbox writes to a pipe of ours: a run that wrote nothing there never
        # started (a path to bind that is missing, no namespaces), which is the machinery's failure, not a
        # test log. (bubblewrap's own --info-fd is written before its mounts, so it cannot tell.)
        read_end, write_end = os.pipe()
        try:
            started_line = f"printf started >&{write_end}; exec {write_end}>&-\n"
            argv = self._argv(env, started_line + script)
            cmd = bwrap_command(bwrap, env.python, tree, argv, test_env, ro_paths)
            code, out, timed_out = _spawn(cmd, tree, None, self.timeout_s, pass_fds=(write_end, *fds))
            os.close(write_end)
            write_end = -1
            os.set_blocking(read_end, False)
            try:
                started = os.read(read_end, 64) == b"started"
            except BlockingIOError:
                started = False
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        if not started:
            raise SandboxStartError(f"the test sandbox (bubblewrap) did not start: {out.strip()[-500:]}")
        return code, out, timed_out

    def _argv(self, env: TestEnv, script: str) -> list[str]:
        """`script` in bash, under the limits when there are some (set inside, see `_LIMITER`)."""
        argv = ["/bin/bash", "-c", script]
        pairs = self.limits.rlimits()
        if pairs:
            # -I (isolated: no PYTHON* variables, no user site, not the tree's modules) is Python 3's;
            # Python 2 has only -E and -s of it.
            isolated = ["-E", "-s"] if version_of(env.python) == "2.7" else ["-I"]
            argv = [env.python, *isolated, "-S", "-c", _LIMITER, json.dumps(pairs), *argv]
        return argv


def _changed_by(patch: str) -> list[str] | None:
    """The files `patch` changes; None for text the patch tools applied but unidiff cannot read, which
    leaves the witness suspecting every runtest hook of the repository's code (the safe side)."""
    try:
        return patch_paths(patch)
    except unidiff.UnidiffParseError:
        return None


class SandboxStartError(RuntimeError):
    """bubblewrap could not set up the sandbox: no test ran, which is this machine's failure, not a
    verdict on the instance."""


def _spawn(
    cmd: Sequence[str],
    cwd: Path,
    env: dict[str, str] | None,
    timeout_s: float,
    pass_fds: tuple[int, ...] = (),
) -> tuple[int, str, bool]:
    """Run `cmd` in its own session: (exit status, output, timed out); a timeout kills the whole group."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        pass_fds=pass_fds,
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -9, out.decode(errors="replace"), True
    return proc.returncode, out.decode(errors="replace"), False


def cached_backend(
    cache_dir: Path,
    *,
    clones: str | Path | None,
    offline: bool,
    env_specs: Path | None = None,
    python: str | None = None,
    wheelhouse: Path | None = None,
    **options: Any,
) -> LocalBackend:
    """A `LocalBackend` over one cache folder (`CACHE/repos` for mirrors, `CACHE/envs` for environments).

    Evaluation, the execution reward and its bench all share this layout, so one cache serves them all;
    `env_specs` replaces the built-in specs of SWE-bench's repositories. `options` are LocalBackend's own."""
    repos = RepoCache(cache_dir / "repos", mirror_dir=clones, offline=offline)
    specs = load_env_specs(env_specs or BUILTIN_SPECS)
    envs = EnvManager(cache_dir / "envs", python=python, wheelhouse=wheelhouse, specs=specs)
    return LocalBackend(repos, envs, **options)


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
