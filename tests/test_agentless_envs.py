"""Test environments built with no network (a wheelhouse) and the local backend's resource limits.

Everything is real: wheels, git repositories, venvs created by `EnvManager` and pytest runs in the
local backend. The wheelhouse is made offline: pytest and setuptools (needed in the venv and in pip's
isolated build environment) are repacked from this interpreter's installed distributions, since `pip
download` needs an index; the repository's own dependency `tinydep` is built from source with `pip wheel`.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import csv
import dataclasses
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from calc_repo import write_files
from isolation import require_isolation
from packaging.requirements import Requirement

from swerl.cli import agentless as agentless_cli
from swerl.edit_format import build_git_patch
from swerl.errors import UserError
from swerl.execution.base import BUILD_FAILED
from swerl.execution.envs import (
    EnvManager,
    EnvSetupError,
    EnvSpec,
    find_python,
    load_env_specs,
    rebuild_command,
)
from swerl.execution.instances import Instance
from swerl.execution.local import LocalBackend, RunLimits
from swerl.git.clones import RepoCache
from swerl.reward.execution import ExecutionReward
from swerl.sandbox.bwrap import isolation_available
from swerl.synth_repo import git

ISOLATION = "bwrap" if isolation_available() is None else "none"

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "1.0"
dependencies = [{dependencies}]

[tool.setuptools]
packages = ["{name}"]
"""
USESDEP = "from tinydep import answer\n\n\ndef doubled():\n    return 2 * answer()\n"
USESDEP_TEST = "from usesdep import doubled\n\n\ndef test_doubled():\n    assert doubled() == 84\n"
HOG_TESTS = {
    "tests/test_hog.py": "def test_small():\n    assert sum(range(10)) == 45\n\n\n"
    "def test_hog():\n    blob = bytearray(1 << 30)\n    assert len(blob) == 1 << 30\n",
    "tests/test_spin.py": "def test_spin():\n    while True:\n        pass\n",
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel_from_installed(dist: metadata.Distribution, dest: Path) -> Path:
    """A pure-Python wheel of an installed distribution: its files as installed, with a fresh RECORD.

    Scripts (outside site-packages) are left out: pip writes them anew from entry_points.txt.
    """
    info_dir = next(f.parts[0] for f in dist.files or () if f.parts[0].endswith(".dist-info"))
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    wheel = dest / f"{name}-{dist.version}-py3-none-any.whl"
    skipped = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
    rows = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for file in dist.files or ():
            if file.parts[0] == ".." or "__pycache__" in file.parts or file.name in skipped:
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            archive.writestr(str(file), data)
            rows.append([str(file), _record_hash(data), str(len(data))])
        record = io.StringIO()
        csv.writer(record).writerows([*rows, [f"{info_dir}/RECORD", "", ""]])
        archive.writestr(f"{info_dir}/RECORD", record.getvalue())
    return wheel


def _repack_with_requirements(names: list[str], dest: Path) -> None:
    """Wheels of `names` and, transitively, of what they require on this interpreter."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if key in seen:
            continue
        seen.add(key)
        _wheel_from_installed(dist, dest)
        for text in dist.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)


def _git_repo(clones: Path, repo: str, files: dict[str, str]) -> Instance:
    """A one-commit repository under `clones` and an instance at that commit."""
    path = clones / repo.replace("/", "__")
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    write_files(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    base = git(path, "rev-parse", "HEAD").strip()
    return Instance(f"{repo.replace('/', '__')}-1", repo, base, "issue", version="1.0")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest, setuptools and tinydep as wheels, made without any index."""
    pytest.importorskip("setuptools")
    root = tmp_path_factory.mktemp("wheels")
    house = root / "wheelhouse"
    house.mkdir()
    _repack_with_requirements(["pytest", "setuptools"], house)
    source = root / "tinydep"
    write_files(
        source,
        {
            "pyproject.toml": PYPROJECT.format(name="tinydep", dependencies=""),
            "tinydep/__init__.py": "def answer():\n    return 42\n",
        },
    )
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*build, "-w", str(house), str(source)], check=True, capture_output=True)
    return house


@pytest.fixture
def no_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip sees no configured package source (a machine's pip.conf may add find-links or local indexes),
    and any install that reached for an index fails fast instead of quietly using one."""
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "1")


@pytest.mark.usefixtures("no_index")
def test_env_from_wheelhouse_runs_the_repository_tests(wheelhouse: Path, tmp_path: Path) -> None:
    files = {
        "pyproject.toml": PYPROJECT.format(name="usesdep", dependencies='"tinydep"'),
        "usesdep/__init__.py": USESDEP,
        "tests/test_usesdep.py": USESDEP_TEST,
    }
    instance = _git_repo(tmp_path / "clones", "acme/usesdep", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse)
    backend = LocalBackend(repos, envs, isolation=ISOLATION, timeout_s=120)
    test_id = "tests/test_usesdep.py::test_doubled"

    run = backend.run_tests(instance, [test_id])
    assert run.status == "ok", run.log
    assert run.results == {test_id: "PASSED"}, run.log
    # No spec: one environment of the inferred recipe that collected the tests (the project editable).
    ready = [p.parent.name for p in (tmp_path / "envs" / "auto" / "acme__usesdep").glob("*/.swerl-ready")]
    assert len(ready) == 1 and ready[0].startswith("editable-")

    broken = build_git_patch(
        {"usesdep/__init__.py": USESDEP}, {"usesdep/__init__.py": USESDEP.replace("2 *", "3 *")}
    )
    run = backend.run_tests(instance, [test_id], [broken])
    assert run.status == "ok", run.log
    assert run.results == {test_id: "FAILED"}


@pytest.mark.usefixtures("no_index")
def test_a_short_wheelhouse_names_the_repository_and_the_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    tree = tmp_path / "tree"
    write_files(tree, {"requirements.txt": "tinydep\n"})
    instance = Instance("acme__usesdep-1", "acme/usesdep", "0" * 40, "issue", version="1.0")
    envs = EnvManager(tmp_path / "envs", wheelhouse=empty)

    with pytest.raises(EnvSetupError) as failure:
        envs.python_for(instance, tree)
    message = str(failure.value)
    assert "acme/usesdep" in message
    assert f"wheels come from {empty}" in message and "No matching distribution found for pytest" in message
    assert "add the missing wheel" in message
    assert not list((tmp_path / "envs" / "auto").glob("*/[!.]*"))  # nothing half-made left (locks stay)

    def no_second_attempt(*args: object, **kwargs: object) -> None:
        raise AssertionError("a failed environment was attempted again")

    monkeypatch.setattr("swerl.execution.envs.subprocess.run", no_second_attempt)
    with pytest.raises(EnvSetupError, match="acme/usesdep"):
        envs.python_for(instance, tree)


def test_specs_load_and_pythons_are_found_by_version(tmp_path: Path) -> None:
    specs = load_env_specs()
    assert specs["pydicom/pydicom"]["2.3"].python == "3.10" and "*" in specs["psf/requests"]
    custom = tmp_path / "specs.json"
    custom.write_text(json.dumps({"a/b": {"1.0": {"python": "3.9", "apt": ["x"]}}}))
    with pytest.raises(UserError, match="unknown keys"):
        load_env_specs(custom)
    version = "{}.{}".format(*sys.version_info[:2])
    found = find_python(version)
    probe = [found, "-c", "import sys; print(sys.version_info[:2])"]
    assert subprocess.run(probe, capture_output=True, text=True).stdout.strip() == str(sys.version_info[:2])
    with pytest.raises(EnvSetupError, match=r"no Python 2\.1 on this machine"):
        find_python("2.1")


def test_a_missing_wheelhouse_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        EnvManager(tmp_path / "envs", wheelhouse=tmp_path / "nowhere")


def _hog_backend(root: Path, cpu_s: int) -> tuple[LocalBackend, Instance]:
    """A stdlib-only repository (shared interpreter) whose tests hog memory or spin, under limits."""
    instance = _git_repo(root / "clones", "acme/hog", HOG_TESTS)
    repos = RepoCache(root / "repos", mirror_dir=root / "clones", offline=True)
    limits = RunLimits(memory_mb=256, cpu_s=cpu_s)
    backend = LocalBackend(repos, EnvManager(root / "envs"), isolation=ISOLATION, timeout_s=60, limits=limits)
    return backend, instance


@pytest.fixture(scope="module")
def hog_backend(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalBackend, Instance]:
    """Two CPU seconds: enough to kill a spinner fast, too few to start pytest on a loaded machine."""
    return _hog_backend(tmp_path_factory.mktemp("hog"), cpu_s=2)


def test_a_memory_hog_fails_its_test_and_the_run_goes_on(tmp_path: Path) -> None:
    # CPU seconds generous enough for pytest's start under load, so only the memory limit is under test.
    backend, instance = _hog_backend(tmp_path, cpu_s=60)
    run = backend.run_tests(instance, ["tests/test_hog.py"])
    assert run.status == "ok", run.log
    assert run.results == {"tests/test_hog.py::test_small": "PASSED", "tests/test_hog.py::test_hog": "FAILED"}
    assert "MemoryError" in run.log


def test_a_cpu_spinner_is_killed_and_reported(hog_backend: tuple[LocalBackend, Instance]) -> None:
    backend, instance = hog_backend
    run = backend.run_tests(instance, ["tests/test_spin.py"])
    assert run.status == "error"
    assert not run.results
    assert "pytest was killed by signal 9 (Killed)" in run.log
    assert "under the test limits (256 MiB memory and 2 CPU seconds per process)" in run.log


def test_a_pytest_that_cannot_start_is_an_error_not_a_run_without_tests(tmp_path: Path) -> None:
    # The tree is on PYTHONPATH and shadows a module pytest imports at start: Python exits 1 with a
    # traceback, the status pytest gives "some tests failed", but no test ran.
    files = {"pluggy/__init__.py": "raise ImportError('shadowed by the repository')\n", **HOG_TESTS}
    instance = _git_repo(tmp_path / "clones", "acme/shadow", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=60)
    run = backend.run_tests(instance, ["tests/test_hog.py"])
    assert run.status == "error"
    assert not run.results
    assert "shadowed by the repository" in run.log


LOCALE_TESTS = {
    "tests/test_locale.py": "import os\n\n"
    "if (os.environ.get('LANG'), [k for k in os.environ if k.startswith('LC_')]) != ('C.UTF-8', []):\n"
    "    raise ImportError(f\"no UTF-8 locale: LANG={os.environ.get('LANG')}\")\n\n\n"
    "def test_locale():\n    pass\n"
}


def test_inferred_environments_have_a_utf8_locale_and_a_fixed_interpreter_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Python 3.6 does not coerce the C locale: an inferred environment sets C.UTF-8 for its collection
    # check and its runs alike, whatever the caller's locale; a fixed interpreter gets no locale.
    monkeypatch.setenv("LANG", "POSIX")
    monkeypatch.setenv("LC_ALL", "POSIX")
    instance = _git_repo(tmp_path / "clones", "acme/locale", LOCALE_TESTS)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=60)
    with caplog.at_level("WARNING"):
        run = backend.run_tests(instance, ["tests/test_locale.py"])
    assert run.results == {"tests/test_locale.py::test_locale": "PASSED"}, run.log
    assert "no recipe collected" not in caplog.text
    fixed = EnvManager(tmp_path / "envs", python=sys.executable)
    run = LocalBackend(repos, fixed, isolation=ISOLATION, timeout_s=60).run_tests(
        instance, ["tests/test_locale.py"]
    )
    assert run.results == {"tests/test_locale.py": "ERROR"} and "no UTF-8 locale: LANG=None" in run.log


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="memory_mb must be positive"):
        RunLimits(memory_mb=0)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="swerl")
    agentless_cli.register(parser.add_subparsers(dest="group", required=True))
    return parser.parse_args(argv)


def test_run_options_reach_the_local_backend(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    common = ["agentless", "run", "--dataset", "d.jsonl", "--model", "m", "--out", str(tmp_path / "out")]
    common += ["--cache-dir", str(tmp_path / "cache"), "--regression", "--unsafe-no-isolation"]
    args = _parse([*common, "--wheelhouse", str(wheels), "--test-memory-mb", "512", "--test-cpu-s", "30"])
    backend = agentless_cli._backend(args)
    assert isinstance(backend, LocalBackend)
    assert backend.envs.wheelhouse == wheels.resolve()
    assert backend.limits == RunLimits(memory_mb=512, cpu_s=30)
    assert agentless_cli._backend(_parse(common)).limits == RunLimits()  # off unless asked for
    for bad in (["--test-memory-mb", "0"], ["--wheelhouse", str(tmp_path / "nowhere")]):
        with pytest.raises(SystemExit):
            _parse([*common, *bad])


# -- the local harness: each patch judged on its own fresh tree, by swebench's rules ---------------------

SRC_PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "srcpkg"
version = "1.0"
dependencies = ["tinydep"]

[tool.setuptools.packages.find]
where = ["src"]
"""
# `_version.py` is written by the install step and ignored by git (as setuptools_scm does): a fresh tree
# lacks it, so the environment must carry the install's artifacts into each run's tree.
SRCPKG = """\
from tinydep import answer

from srcpkg._version import version


def doubled():
    return 3 * answer()
"""
SRC_INSTALL = "python -m pip install -e . && echo \"version = '1.0'\" > src/srcpkg/_version.py"
SRC_TESTS = """\
import pytest

import srcpkg


def test_answer():
    assert srcpkg.answer() == 42


def test_skipped():
    pytest.skip("not on this platform")


@pytest.mark.parametrize("text", ["a b"])
def test_space(text):
    assert " " in text


def test_needs_extra():
    import tinydep_extra  # noqa: F401  (installed in the harness's image, not here)


def test_git_sees_the_history():  # versioneer counts commits at import time
    import subprocess

    done = subprocess.run(["git", "rev-list", "--count", "HEAD"], capture_output=True, text=True)
    assert done.returncode == 0 and int(done.stdout) >= 1, done.stderr
"""
SRC_F2P = "\n\ndef test_doubled():\n    assert srcpkg.doubled() == 84\n"
TEST_FILE = "tests/test_srcpkg.py"
# pytest prints `PASSED tests/test_srcpkg.py::test_space[a b]`; the harness's parser splits on spaces, so the
# dataset lists the id cut at the space, and grading prefix-matches it.
P2P = [f"{TEST_FILE}::test_answer", f"{TEST_FILE}::test_space[a", f"{TEST_FILE}::test_git_sees_the_history"]
ENV_FAILING = f"{TEST_FILE}::test_needs_extra"


def _eval_script(base: str, test_patch: str) -> str:
    """An eval script of the shape swebench 5.x datasets carry (container lines included)."""
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            "source /opt/miniconda3/bin/activate",
            "conda activate testbed",
            "cd /testbed",
            "python -m pip install -e .",
            f"git checkout {base} {TEST_FILE}",
            "git apply -v - <<'EOF_1'",
            test_patch + "EOF_1",
            ": '>>>>> Start Test Output'",
            f"pytest -rA {TEST_FILE}",
            ": '>>>>> End Test Output'",
            f"git checkout {base} {TEST_FILE}",
        ]
    )


@pytest.fixture
def src_instance(tmp_path: Path) -> Instance:
    """A `src/`-layout repository with a dependency, and an instance in the swebench 5.x row shape."""
    files = {"pyproject.toml": SRC_PYPROJECT, "src/srcpkg/__init__.py": SRCPKG, TEST_FILE: SRC_TESTS}
    files[".gitignore"] = "_version.py\n"
    bare = _git_repo(tmp_path / "clones", "acme/srcpkg", files)
    test_patch = build_git_patch({TEST_FILE: SRC_TESTS}, {TEST_FILE: SRC_TESTS + SRC_F2P})
    gold = build_git_patch(
        {"src/srcpkg/__init__.py": SRCPKG}, {"src/srcpkg/__init__.py": SRCPKG.replace("3 *", "2 *")}
    )
    extra = {"eval_script": _eval_script(bare.base_commit, test_patch), "log_parser": "parse_log_pytest"}
    return Instance(
        bare.instance_id,
        bare.repo,
        bare.base_commit,
        "doubled() is wrong",
        patch=gold,
        test_patch=test_patch,
        fail_to_pass=(f"{TEST_FILE}::test_doubled",),
        pass_to_pass=(*P2P, ENV_FAILING),
        version="1.0",
        extra={**extra, "eval_type": "pass_and_fail", "image": "unused"},
    )


def _harness(tmp_path: Path, wheelhouse: Path) -> LocalBackend:
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    specs = {"acme/srcpkg": {"*": EnvSpec(install=SRC_INSTALL)}}
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse, specs=specs)
    return LocalBackend(repos, envs, isolation=ISOLATION)


NOOP = build_git_patch({"src/srcpkg/__init__.py": SRCPKG}, {"src/srcpkg/__init__.py": "# touched\n" + SRCPKG})


@pytest.mark.usefixtures("no_index")
def test_each_patch_is_judged_on_its_own_tree(
    src_instance: Instance, wheelhouse: Path, tmp_path: Path
) -> None:
    """The stale-tree case: one environment, patches in a row; whichever built the environment first must
    not decide the next verdict (a `src/` layout is not shadowed by PYTHONPATH, so the install must point
    at each run's fresh tree)."""
    backend = _harness(tmp_path, wheelhouse)
    verdicts = []
    for i, patch in enumerate([NOOP, src_instance.patch, NOOP, src_instance.patch]):
        run = backend.evaluate(src_instance, patch, tmp_path / "logs" / f"{i}.txt")
        verdicts.append(run.report["resolved"])
        assert run.report["patch_successfully_applied"], run.log
        f2p = run.report["tests_status"]["FAIL_TO_PASS"]
        assert f2p["success" if i % 2 else "failure"] == [f"{TEST_FILE}::test_doubled"], run.log
    assert verdicts == [False, False, False, False]  # strict: test_needs_extra fails here even with gold
    built = [p for p in (tmp_path / "envs" / "acme__srcpkg").iterdir() if p.is_dir()]
    assert len(built) == 2  # one environment throughout (and the version's base it was copied from)
    p2p = run.report["tests_status"]["PASS_TO_PASS"]
    assert p2p == {"success": P2P, "failure": [ENV_FAILING]}  # the cut id is prefix-matched


def test_a_skipped_pass_to_pass_test_is_kept_and_a_skipped_fail_to_pass_is_not(tmp_path: Path) -> None:
    """The harness's rule, through its own grading: (pytest's `-rA` names no skipped test, unittest's
    verbose output, read by the django parser, does)."""
    from swerl.execution.harness import eval_plan, grade_log

    log = tmp_path / "log.txt"
    lines = ["test_a (t.T.test_a) ... ok", "test_b (t.T.test_b) ... skipped 'no db'"]
    log.write_text("\n".join([": '>>>>> Start Test Output'", *lines, ": '>>>>> End Test Output'"]) + "\n")
    instance = Instance("a__b-1", "a/b", "0" * 40, "issue", extra={"log_parser": "parse_log_django"})
    f2p, p2p = "test_a (t.T.test_a)", "test_b (t.T.test_b)"
    plan = eval_plan(dataclasses.replace(instance, fail_to_pass=(f2p,), pass_to_pass=(p2p,)))
    kept = grade_log(
        dataclasses.replace(instance, fail_to_pass=(f2p,), pass_to_pass=(p2p,)), plan, "x", str(log)
    )
    assert kept["resolved"]
    flipped = dataclasses.replace(instance, fail_to_pass=(p2p,), pass_to_pass=(f2p,))
    assert not grade_log(flipped, plan, "x", str(log))["resolved"]


@pytest.mark.usefixtures("no_index")
def test_gold_run_lists_environment_failures_and_both_verdicts(
    src_instance: Instance, wheelhouse: Path, tmp_path: Path
) -> None:
    from swerl.execution.evaluate import evaluate_local, predictions_for

    backend = _harness(tmp_path, wheelhouse)
    gold = evaluate_local([src_instance], predictions_for("gold", [src_instance]), backend, tmp_path / "gold")
    iid = src_instance.instance_id
    assert gold["resolved_ids"] == [] and gold["resolved_without_env_failures_ids"] == [iid]
    assert gold["cannot_judge_ids"] == [iid] and gold["unresolved_ids"] == []  # the gold patch fails here
    failures = json.loads((tmp_path / "gold" / "env_failures.json").read_text())
    assert list(failures[iid]) == [ENV_FAILING]
    assert "ModuleNotFoundError: No module named 'tinydep_extra'" in failures[iid][ENV_FAILING]
    assert (tmp_path / "gold" / "logs" / iid / "test_output.txt").exists()

    noop = {iid: {"instance_id": iid, "model_name_or_path": "m", "model_patch": NOOP}}
    again = evaluate_local([src_instance], noop, backend, tmp_path / "noop", env_failures=failures)
    assert again["cannot_judge_ids"] == [iid] and again["resolved_without_env_failures_ids"] == []
    assert again["unresolved_ids"] == [] and again["error_ids"] == [iid]
    empty = evaluate_local([src_instance], predictions_for("empty", [src_instance]), backend, tmp_path / "e")
    assert empty["empty_patch_ids"] == [iid] and empty["resolved_instances"] == 0

    rerun = evaluate_local(
        [src_instance], predictions_for("gold", [src_instance]), backend, tmp_path / "gold2"
    )
    assert rerun == gold  # two runs, one report


@pytest.mark.usefixtures("no_index")
def test_patch_fallbacks_and_test_file_reset(
    src_instance: Instance, wheelhouse: Path, tmp_path: Path
) -> None:
    backend = _harness(tmp_path, wheelhouse)
    # The first context line is off: `git apply` refuses the hunk, `patch --fuzz` takes it (the harness too).
    fuzzy = re.sub(r"(@@[^\n]*@@\n) [^\n]*\n", r"\1 # drifted\n", src_instance.patch, count=1)
    assert fuzzy != src_instance.patch
    run = backend.evaluate(src_instance, fuzzy, tmp_path / "fuzzy.txt")
    assert run.report["tests_status"]["FAIL_TO_PASS"]["success"] == [f"{TEST_FILE}::test_doubled"], run.log
    assert "patch --batch --forward --fuzz=5" in run.log

    # A patch that rewrites the test file to fake the fix: the file is reset to the base before the test
    # patch, so the fake is gone and the instance stays unresolved.
    cheat = build_git_patch(
        {TEST_FILE: SRC_TESTS},
        {TEST_FILE: SRC_TESTS.replace("import srcpkg\n", "import srcpkg\nsrcpkg.doubled = lambda: 84\n")},
    )
    run = backend.evaluate(src_instance, cheat, tmp_path / "cheat.txt")
    assert run.report["tests_status"]["FAIL_TO_PASS"]["failure"] == [f"{TEST_FILE}::test_doubled"], run.log

    run = backend.evaluate(
        src_instance,
        "diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n",
        tmp_path / "bad.txt",
    )
    assert not run.report["patch_successfully_applied"]
    assert ">>>>> Patch Apply Failed" in run.log


def test_a_run_without_results_is_an_environment_failure_of_the_whole_instance() -> None:
    from swerl.execution.evaluate import run_failure_reason

    log = "ImportError while loading conftest\nE   AttributeError: `np.Inf` was removed\n: '>>>>> End'\n"
    assert run_failure_reason(log) == "E   AttributeError: `np.Inf` was removed"
    assert run_failure_reason("collected 0 items\n") == "collected 0 items"


def test_failure_reasons_come_from_the_summary_or_the_tests_section() -> None:
    from swerl.execution.evaluate import failure_reason

    log = "\n".join(
        [
            "________________ RequestsTestCase.test_get ________________",
            "    def test_get(self):",
            "E           ConnectionError: Max retries exceeded (name resolution)",
            "________________ RequestsTestCase.test_post ________________",
            "E   AssertionError",
            "FAILED t.py::RequestsTestCase::test_other - KeyError: 'x'",
            "FAILED t.py::RequestsTestCase::test_post - AssertionEr...",
        ]
    )
    assert failure_reason(log, "t.py::RequestsTestCase::test_post", "FAILED") == "E   AssertionError"
    assert failure_reason(log, "t.py::RequestsTestCase::test_get", "FAILED").startswith("E           Conn")
    assert failure_reason(log, "t.py::RequestsTestCase::test_other", "FAILED") == "KeyError: 'x'"
    assert failure_reason(log, "t.py::test_missing", "MISSING") == "MISSING"
    # Object addresses differ every run: two runs must write one report.
    log = "FAILED t.py::test_x - ConnectionError(<Conn object at 0x7f6502bd5400>: refused)"
    assert failure_reason(log, "t.py::test_x", "FAILED") == "ConnectionError(<Conn object at 0x...>: refused)"


def test_a_gold_instance_that_cannot_run_here_is_an_error_of_the_run(tmp_path: Path) -> None:
    """No repository here is this run's failure: it is reported as an error, never as an environment
    failure of the instance (which would tell the user it is a limit of their machine)."""
    from swerl.execution.evaluate import evaluate_local, predictions_for

    (tmp_path / "clones").mkdir()
    missing = Instance("acme__gone-1", "acme/gone", "0" * 40, "issue", patch="diff --git a/x b/x\n")
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION)
    report = evaluate_local([missing], predictions_for("gold", [missing]), backend, tmp_path / "out")
    assert report["error_ids"] == ["acme__gone-1"] and report["env_failure_ids"] == []
    assert report["instances"]["acme__gone-1"]["error"].startswith("GitError: acme/gone: no clone under")
    assert json.loads((tmp_path / "out" / "env_failures.json").read_text()) == {}
    assert "GitError" in (tmp_path / "out" / "logs" / "acme__gone-1" / "run_instance.log").read_text()


# -- environments as the harness builds them, and nothing of the machine touched ---------------------------


def _commit(path: Path, files: dict[str, str]) -> str:
    write_files(path, files)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "change")
    return git(path, "rev-parse", "HEAD").strip()


@pytest.mark.usefixtures("no_index")
def test_each_instance_is_installed_at_its_own_base_commit_from_one_base(
    wheelhouse: Path, tmp_path: Path
) -> None:
    """Two instances of one version whose base commits differ: one base venv, each instance's install
    ran on its own base commit (pytest 5.4's later base commits need wcwidth, its setup commit does not)."""
    first = _git_repo(tmp_path / "clones", "acme/x", {"marker.txt": "old\n"})
    later = _commit(tmp_path / "clones" / "acme__x", {"marker.txt": "new\n"})
    install = "cp marker.txt ../installed-from.txt"
    envs = EnvManager(
        tmp_path / "envs", wheelhouse=wheelhouse, specs={"acme/x": {"*": EnvSpec(install=install)}}
    )
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    second = dataclasses.replace(first, instance_id="acme__x-2", base_commit=later)
    seen = []
    for instance in (first, second, first):
        tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / f"tree-{len(seen)}")
        env = envs.env_for(instance, tree)
        assert env.testbed is not None
        seen.append((env.testbed.parent / "installed-from.txt").read_text())
    assert seen == ["old\n", "new\n", "old\n"]
    built = sorted(p.name for p in (tmp_path / "envs" / "acme__x").iterdir() if p.is_dir())
    assert len(built) == 3 and all(name.startswith(built[0]) for name in built)  # a base and two copies


FAKE_PYTHON = '#!/bin/sh\necho "$@" >> {log}\nexit 1\n'


@pytest.fixture
def fake_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `python` (and `pip`) first on PATH that records every call: the machine's own interpreter."""
    bin_dir = tmp_path / "machine-bin"
    bin_dir.mkdir()
    log = tmp_path / "machine-python-calls.txt"
    for name in ("python", "python3", "pip"):
        (bin_dir / name).write_text(FAKE_PYTHON.format(log=log), encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


@pytest.mark.usefixtures("no_index")
def test_a_relative_root_from_another_directory_installs_nothing_outside(
    wheelhouse: Path, tmp_path: Path, fake_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default cache dir is relative: the install steps run inside the testbed, where a relative venv
    path on PATH does not resolve, so `python -m pip install -e .` reached the machine's own Python."""
    files = {"pyproject.toml": PYPROJECT.format(name="usesdep", dependencies='"tinydep"'), **USESDEP_FILES}
    instance = _git_repo(tmp_path / "clones", "acme/usesdep", files)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    repos = RepoCache(Path("rel-cache/repos"), mirror_dir=Path("../clones"), offline=True)
    envs = EnvManager(Path("rel-cache/envs"), wheelhouse=wheelhouse)
    backend = LocalBackend(repos, envs, isolation=ISOLATION, work_root=Path("rel-work"), timeout_s=120)
    assert repos.root.is_absolute() and envs.root.is_absolute() and backend.work_root.is_absolute()

    run = backend.run_tests(instance, ["tests/test_usesdep.py::test_doubled"])
    assert run.results == {"tests/test_usesdep.py::test_doubled": "PASSED"}, run.log
    assert not fake_python.exists(), fake_python.read_text()  # the machine's python was never called
    assert list((elsewhere / "rel-cache" / "envs" / "auto" / "acme__usesdep").glob("*/.swerl-ready"))


USESDEP_FILES = {"usesdep/__init__.py": USESDEP, "tests/test_usesdep.py": USESDEP_TEST}


def test_no_install_runs_when_the_environment_interpreter_is_not_its_own(
    tmp_path: Path, fake_python: Path
) -> None:
    """Whatever a step did to the venv, the next step's `python` and `pip` are checked first: an install
    that would reach another interpreter stops the build with a clear error, having installed nothing."""
    spec = EnvSpec(pre_install=("rm ../venv/bin/python ../venv/bin/python3*",), with_pytest=False)
    envs = EnvManager(tmp_path / "envs", specs={"acme/x": {"*": spec}})
    tree = tmp_path / "tree"
    write_files(tree, {"setup.py": "raise SystemExit('never built')\n"})
    instance = Instance("acme__x-1", "acme/x", "1" * 40, "issue", version="1.0")
    with pytest.raises(EnvSetupError, match=r"are not those of .*nothing was installed"):
        envs.env_for(instance, tree)
    calls = fake_python.read_text().splitlines()
    assert calls and not any("pip install" in call for call in calls), calls  # only the check's probe
    assert not any(p.is_dir() for p in (tmp_path / "envs" / "acme__x").iterdir() if "@" in p.name)


@pytest.mark.usefixtures("no_index")
def test_a_broken_environment_is_never_marked_ready(wheelhouse: Path, tmp_path: Path) -> None:
    """Every install step succeeded, but pytest cannot be imported: the smoke check fails the build."""
    spec = EnvSpec(install="rm -r ../venv/lib/python*/site-packages/_pytest")
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse, specs={"acme/x": {"*": spec}})
    tree = tmp_path / "tree"
    write_files(tree, {"README": "x\n"})
    instance = Instance("acme__x-1", "acme/x", "1" * 40, "issue", version="1.0")
    with pytest.raises(EnvSetupError, match="cannot run pytest"):
        envs.env_for(instance, tree)
    assert not [p for p in (tmp_path / "envs" / "acme__x").glob("*@*") if p.is_dir()]


BUILD_SCRIPT = """\
import sys
import time
from pathlib import Path
from swerl.execution.envs import EnvManager, EnvSpec
from swerl.execution.instances import Instance

root, tree, install, house = sys.argv[1:5]
envs = EnvManager(Path(root), wheelhouse=Path(house), specs={"acme/x": {"*": EnvSpec(install=install)}})
env = envs.env_for(Instance("acme__x-1", "acme/x", "1" * 40, "issue", version="1.0"), Path(tree))
print(env.python)
"""


def _builder(tmp_path: Path, install: str, wheelhouse: Path) -> subprocess.Popen[bytes]:
    script = tmp_path / "build.py"
    script.write_text(BUILD_SCRIPT, encoding="utf-8")
    argv = [
        sys.executable,
        str(script),
        str(tmp_path / "envs"),
        str(tmp_path / "tree"),
        install,
        str(wheelhouse),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


@pytest.mark.slow
@pytest.mark.usefixtures("no_index")
def test_concurrent_builders_build_once_and_a_killed_build_is_rebuilt(
    wheelhouse: Path, tmp_path: Path
) -> None:
    """Two processes and two threads ask for one environment at once: one build, the others wait on its
    lock (`--workers 2` made venvs vanish under each other). Then a build killed with SIGKILL in the middle
    of its install leaves a directory without the ready marker, which the next run removes and rebuilds."""
    write_files(tmp_path / "tree", {"README": "x\n"})
    counter = tmp_path / "builds.txt"
    install = f"echo built >> {counter}"
    procs = [_builder(tmp_path, install, wheelhouse) for _ in range(2)]
    spec = EnvSpec(install=install)
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse, specs={"acme/x": {"*": spec}})
    instance = Instance("acme__x-1", "acme/x", "1" * 40, "issue", version="1.0")
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pythons = list(pool.map(lambda _: envs.env_for(instance, tmp_path / "tree").python, range(2)))
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()
        pythons.append(out.decode().strip())
    assert len(set(pythons)) == 1 and counter.read_text() == "built\n"

    started, slow = tmp_path / "started", tmp_path / "slow"
    slow.touch()
    install = f"echo built >> {counter}; if [ -e {slow} ]; then touch {started}; sleep 120; fi"
    proc = _builder(tmp_path, install, wheelhouse)
    deadline = time.monotonic() + 240
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert started.exists(), proc.communicate()[1].decode()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    half = [
        p
        for p in (tmp_path / "envs" / "acme__x").glob("*@*")
        if p.is_dir() and not (p / ".swerl-ready").exists()
    ]
    assert len(half) == 1 and (half[0] / "testbed").is_dir()  # killed mid-install: no marker
    slow.unlink()
    envs = EnvManager(
        tmp_path / "envs", wheelhouse=wheelhouse, specs={"acme/x": {"*": EnvSpec(install=install)}}
    )
    env = envs.env_for(instance, tmp_path / "tree")
    assert (half[0] / ".swerl-ready").exists() and env.testbed == half[0] / "testbed"
    assert subprocess.run([env.python, "-c", "import pytest"], check=False).returncode == 0
    assert counter.read_text() == "built\n" * 3


def test_tests_see_the_harness_environment_and_nothing_of_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No PYTHONHASHSEED (sympy turns hash randomisation off when it is set), no token of ours; the
    locale of an inferred environment (this one), so that Python coerces none."""
    monkeypatch.setenv("SWERL_TEST_SECRET", "leaked")
    probe = (
        "import os, sys\n\n\ndef test_env():\n"
        "    assert sys.flags.hash_randomization == 1\n"
        "    names = {n for n in os.environ if not n.startswith('PYTEST_')}\n"
        "    names -= {'PWD', 'SHLVL', '_'}  # bash's own\n"
        "    assert names == {'PATH', 'HOME', 'PYTHONPATH', 'LANG'}, sorted(names)\n"
        "    assert os.environ['LANG'] == 'C.UTF-8'\n"
    )
    instance = _git_repo(tmp_path / "clones", "acme/plain", {"tests/test_env.py": probe})
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=120)
    run = backend.run_tests(instance, ["tests/test_env.py::test_env"])
    assert run.results == {"tests/test_env.py::test_env": "PASSED"}, run.log


def test_a_sandbox_that_does_not_start_is_an_error_of_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bubblewrap refusing to start (a path to bind that is missing, as with the relative cache dir) is
    this machine's failure: an error, not a test log read as every test failing."""
    require_isolation()
    from swerl.execution import local
    from swerl.execution.evaluate import evaluate_local

    instance = _git_repo(tmp_path / "clones", "acme/plain", {"tests/test_a.py": "def test_a():\n    pass\n"})
    instance = dataclasses.replace(instance, patch="", fail_to_pass=("tests/test_a.py::test_a",))
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation="bwrap", timeout_s=120)
    monkeypatch.setattr(local, "_interpreter_roots", lambda python: (str(tmp_path / "nowhere"),))
    with pytest.raises(local.SandboxStartError, match="did not start: bwrap: Can't find source path"):
        backend.run_tests(instance, ["tests/test_a.py::test_a"])
    gold = {
        instance.instance_id: {
            "instance_id": instance.instance_id,
            "model_name_or_path": "gold",
            "model_patch": "\n",
        }
    }
    report = evaluate_local([instance], gold, backend, tmp_path / "out")
    assert report["error_ids"] == [instance.instance_id] and report["env_failure_ids"] == []
    assert report["instances"][instance.instance_id]["error"].startswith("SandboxStartError")


@pytest.mark.usefixtures("no_index")
def test_an_instance_whose_fail_to_pass_test_cannot_run_here_is_undecidable_never_resolved(
    src_instance: Instance, wheelhouse: Path, tmp_path: Path
) -> None:
    """The test that decides the instance fails here even with the gold patch: leaving it out would
    resolve anything; the lenient verdict says "undecidable here" instead, for gold and for a model."""
    from swerl.execution.evaluate import evaluate_local, predictions_for

    decided_elsewhere = dataclasses.replace(
        src_instance, fail_to_pass=(*src_instance.fail_to_pass, ENV_FAILING), pass_to_pass=tuple(P2P)
    )
    iid = decided_elsewhere.instance_id
    backend = _harness(tmp_path, wheelhouse)
    gold = evaluate_local(
        [decided_elsewhere], predictions_for("gold", [decided_elsewhere]), backend, tmp_path / "g"
    )
    assert gold["undecidable_ids"] == [iid] and gold["resolved_without_env_failures_ids"] == []
    failures = json.loads((tmp_path / "g" / "env_failures.json").read_text())
    assert list(failures[iid]) == [ENV_FAILING]
    model = {iid: {"instance_id": iid, "model_name_or_path": "m", "model_patch": src_instance.patch}}
    again = evaluate_local([decided_elsewhere], model, backend, tmp_path / "m", env_failures=failures)
    assert again["undecidable_instances"] == 1 and again["resolved_without_env_failures"] == 0
    assert again["instances"][iid]["status"] == "error" and again["cannot_judge_ids"] == [iid]


def test_an_evaluation_interrupted_before_any_verdict_reruns_plainly(tmp_path: Path) -> None:
    from swerl.execution.evaluate import prepare_out_dir

    out = tmp_path / "out"
    (out / "logs" / "a__b-1").mkdir(parents=True)
    (out / "logs" / "a__b-1" / "patch.diff").write_text("x")
    prepare_out_dir(out, overwrite=False, resume=False)
    assert not (out / "logs").exists()  # logs without verdicts are dropped

    (out / "logs" / "a__b-1").mkdir(parents=True)
    (out / "logs" / "a__b-1" / "report.json").write_text("{}")
    (out / "logs" / "a__b-2").mkdir()
    with pytest.raises(UserError, match="already holds an evaluation"):
        prepare_out_dir(out, overwrite=False, resume=False)
    assert (out / "logs" / "a__b-1" / "report.json").exists()  # a verdict is never dropped


def test_mirrors_are_prepared_once_under_a_lock_from_a_relative_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = _git_repo(tmp_path / "clones", "acme/plain", {"a.txt": "a\n"})
    monkeypatch.chdir(tmp_path)
    repos = RepoCache(Path("cache"), mirror_dir=Path("clones"), offline=True)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        mirrors = set(pool.map(lambda _: repos.ensure(instance.repo, instance.base_commit), range(4)))
    assert mirrors == {tmp_path / "cache" / "acme__plain.git"}
    monkeypatch.chdir(tmp_path / "clones")
    tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")
    assert (tree / "a.txt").read_text() == "a\n"


def _plain_instance(tmp_path: Path, files: dict[str, str], test_cmd: str) -> Instance:
    """A stdlib repository (the shared interpreter, no environment to build) judged by `test_cmd`."""
    instance = _git_repo(tmp_path / "clones", "acme/plain", files)
    script = "\n".join([": '>>>>> Start Test Output'", test_cmd, ": '>>>>> End Test Output'"])
    return dataclasses.replace(
        instance,
        patch=build_git_patch({"a.py": "x = 1\n"}, {"a.py": "x = 2\n"}),
        fail_to_pass=("tests/test_a.py::test_a",),
        extra={"eval_script": script, "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail"},
    )


def test_tests_that_cannot_start_here_make_the_instance_undecidable_and_silence_is_an_error(
    tmp_path: Path,
) -> None:
    """With the gold patch every test errors at import (a module this machine lacks): an environment
    failure of the whole instance, undecidable here. A test command that printed nothing at all is no
    fact about the environment: an error of the run (the harness's `Test Exit Code` line was once listed
    as the instance's environment failure)."""
    from swerl.execution.evaluate import evaluate_local, predictions_for

    files = {
        "a.py": "x = 1\n",
        "tests/conftest.py": "import not_on_this_machine  # noqa\n",
        "tests/test_a.py": "def test_a():\n    pass\n",
    }
    instance = _plain_instance(tmp_path, files, "python -m pytest -rA tests/test_a.py")
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    backend = LocalBackend(repos, EnvManager(tmp_path / "envs"), isolation=ISOLATION, timeout_s=120)
    report = evaluate_local([instance], predictions_for("gold", [instance]), backend, tmp_path / "gold")
    row = report["instances"][instance.instance_id]
    assert row["status"] == "error" and row["cannot_judge"] and row["undecidable"], row
    assert "No module named 'not_on_this_machine'" in row["env_failures"]["*"]
    assert row["error"].startswith("cannot judge here: the tests give no results here")
    assert report["undecidable_ids"] == report["cannot_judge_ids"] == [instance.instance_id]
    assert report["unresolved_ids"] == []

    silent = dataclasses.replace(
        instance,
        extra={
            **instance.extra,
            "eval_script": instance.extra["eval_script"].replace(
                "python -m pytest -rA tests/test_a.py", "true"
            ),
        },
    )
    report = evaluate_local([silent], predictions_for("gold", [silent]), backend, tmp_path / "silent")
    assert report["error_ids"] == [instance.instance_id] and report["env_failure_ids"] == []
    assert report["cannot_judge_ids"] == []  # silence is the run's error, not a fact of this machine
    assert report["instances"][instance.instance_id]["error"].startswith("the tests gave no results")


# A project with a C extension: the install compiles it into the tree (an editable install builds in
# place), so every fresh tree gets the base commit's module with the install's artifacts, and a fix made
# only in C must be compiled into the tree it is judged on.
CEXT_C = """\
#include <Python.h>

static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(41); }

static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
"""
CEXT_SETUP = """\
from setuptools import Extension, setup

setup(name="cext", version="1.0", packages=["cext"], ext_modules=[Extension("cext._fast", ["cext/_fast.c"])])
"""
CEXT_TEST = "tests/test_cext.py"
CEXT_TESTS = "import cext\n\n\ndef test_imports():\n    assert cext.answer\n"
CEXT_F2P = f"{CEXT_TEST}::test_answer"


def _c_patch(new: str) -> str:
    return build_git_patch({"cext/_fast.c": CEXT_C}, {"cext/_fast.c": CEXT_C.replace("FromLong(41)", new)})


@pytest.fixture(scope="module")
def cext(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalBackend, Instance]:
    """The local backend over the environment of a repository whose C code answers 41, and an instance
    whose fix (42) is made in C alone."""
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) to build the test repository's extension")
    root = tmp_path_factory.mktemp("cext")
    files = {
        "setup.py": CEXT_SETUP,
        "pyproject.toml": PYPROJECT.split("\n\n")[0] + "\n",  # setuptools' backend, the project in setup.py
        "cext/__init__.py": "from cext._fast import answer\n",
        "cext/_fast.c": CEXT_C,
        CEXT_TEST: CEXT_TESTS,
        ".gitignore": "*.so\nbuild/\n*.egg-info/\n",
    }
    bare = _git_repo(root / "clones", "acme/cext", files)
    test_patch = build_git_patch(
        {CEXT_TEST: CEXT_TESTS},
        {CEXT_TEST: CEXT_TESTS + "\n\ndef test_answer():\n    assert cext.answer() == 42\n"},
    )
    apply = [f"git checkout {bare.base_commit} {CEXT_TEST}", "git apply -v - <<'EOF_1'", test_patch + "EOF_1"]
    run = [": '>>>>> Start Test Output'", f"pytest -rA {CEXT_TEST}", ": '>>>>> End Test Output'"]
    script = "\n".join([*apply, *run])
    extra = {"eval_script": script, "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail"}
    instance = dataclasses.replace(
        bare,
        patch=_c_patch("FromLong(42)"),
        test_patch=test_patch,
        fail_to_pass=(CEXT_F2P,),
        pass_to_pass=(f"{CEXT_TEST}::test_imports",),
        extra={**extra, "image": "unused"},
    )
    repos = RepoCache(root / "repos", mirror_dir=root / "clones", offline=True)
    # Built as the harness builds such a repository's image (its spec's install compiles in place).
    spec = EnvSpec(packages=("setuptools",), install="python setup.py build_ext --inplace")
    envs = EnvManager(root / "envs", wheelhouse=wheelhouse, specs={"acme/cext": {"*": spec}})
    return LocalBackend(repos, envs, isolation=ISOLATION, timeout_s=120), instance


@pytest.mark.usefixtures("no_index")
def test_a_fix_in_c_is_compiled_into_the_tree_it_is_judged_on(cext: tuple[LocalBackend, Instance]) -> None:
    """Before the fix the base commit's module answers 41; after it the fixed C answers 42, which only a
    build in that tree can give; the build stays in it (the next tree has the base commit's module)."""
    backend, instance = cext
    runs = [
        backend.run_tests(instance, [CEXT_TEST], patches, test_patch=instance.test_patch)
        for patches in ((), (instance.patch,), ())
    ]
    assert [run.status for run in runs] == ["ok"] * 3, runs[1].log
    assert [run.results[CEXT_F2P] for run in runs] == ["FAILED", "PASSED", "FAILED"], runs[1].log
    assert "building the extensions again" in runs[1].log
    assert not any("compiled sources changed" in run.log for run in (runs[0], runs[2]))

    noop = build_git_patch({CEXT_TEST: CEXT_TESTS}, {CEXT_TEST: "# touched\n" + CEXT_TESTS})
    python_only = backend.run_tests(instance, [CEXT_TEST], [noop])  # nothing compiled changed: no build
    assert python_only.status == "ok" and "compiled sources changed" not in python_only.log


@pytest.mark.usefixtures("no_index")
def test_c_that_does_not_compile_is_the_answers_fault_and_the_gold_fix_resolves(
    cext: tuple[LocalBackend, Instance], tmp_path: Path
) -> None:
    from swerl.execution.evaluate import evaluate_local

    backend, instance = cext
    broken = _c_patch("FromLong(42")
    run = backend.run_tests(instance, [CEXT_TEST], [broken], test_patch=instance.test_patch)
    assert run.status == "build_failed" and not run.results
    assert BUILD_FAILED in run.log and "error:" in run.log  # the compiler's own message is kept

    # A setup.py that builds without the extension when it does not compile (markupsafe's does) exits 0.
    lenient = (
        CEXT_SETUP.replace("setup(", "try:\n    setup(") + 'except SystemExit:\n    setup(name="cext")\n'
    )
    falls_back = broken + build_git_patch({"setup.py": CEXT_SETUP}, {"setup.py": lenient})
    run = backend.run_tests(instance, [CEXT_TEST], [falls_back], test_patch=instance.test_patch)
    assert run.status == "build_failed" and f"{BUILD_FAILED}: cext/_fast." in run.log, run.log

    iid = instance.instance_id
    predictions = {
        iid: {"instance_id": iid, "model_name_or_path": "m", "model_patch": broken},
    }
    report = evaluate_local([instance], predictions, backend, tmp_path / "broken")
    assert report["unresolved_ids"] == [iid] and report["error_ids"] == []
    log = (tmp_path / "broken" / "logs" / iid / "test_output.txt").read_text()
    assert BUILD_FAILED in log and ">>>>> Start Test Output" not in log  # no test ran
    reward = ExecutionReward(backend)._verdict(instance, log, {})
    assert (reward.reward, reward.kind, reward.error) == (0.0, "unresolved", "does_not_build")

    gold = {iid: {"instance_id": iid, "model_name_or_path": "gold", "model_patch": instance.patch}}
    assert evaluate_local([instance], gold, backend, tmp_path / "gold")["resolved_ids"] == [iid]


def test_the_rebuild_step_is_the_projects_setuptools_build(tmp_path: Path) -> None:
    cases = {
        "setup.py": ({"setup.py": ""}, "python setup.py build_ext --inplace --force"),
        "pyproject": (
            {"pyproject.toml": '[build-system]\nbuild-backend = "setuptools.build_meta"\n'},
            "python -c 'from setuptools import setup; setup()' build_ext --inplace --force",
        ),
        "meson": ({"pyproject.toml": '[build-system]\nbuild-backend = "mesonpy"\n', "setup.py": ""}, None),
    }
    for name, (files, expected) in cases.items():
        write_files(tmp_path / name, files)
        assert rebuild_command(tmp_path / name) == expected, name


def test_a_fixed_interpreter_given_relative_runs_the_tests_from_the_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tests run inside a checkout in a scratch folder: a relative --python must still name the
    # interpreter the user meant, not a missing file (every verdict "cannot judge").
    instance = _git_repo(tmp_path / "clones", "acme/relative", LOCALE_TESTS)
    (tmp_path / "py").symlink_to(Path(sys.executable).parent.parent)
    monkeypatch.chdir(tmp_path)
    fixed = EnvManager(tmp_path / "envs", python=os.path.join("py", "bin", Path(sys.executable).name))
    assert fixed.python == str(tmp_path / "py" / "bin" / Path(sys.executable).name)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    run = LocalBackend(repos, fixed, isolation=ISOLATION, timeout_s=60).run_tests(
        instance, ["tests/test_locale.py"]
    )
    assert "not found" not in run.log and run.results, run.log
