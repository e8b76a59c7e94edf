"""Test environments built with no network (a wheelhouse) and the local backend's resource limits.

Everything is real: wheels, git repositories, venvs created by `EnvManager` and pytest runs in the
local backend. The wheelhouse is made offline: pytest and setuptools (needed in the venv and in pip's
isolated build environment) are repacked from this interpreter's installed distributions, since `pip
download` needs an index; the repository's own dependency `tinydep` is built from source with `pip wheel`.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from agentless.execution.envs import EnvManager, EnvSetupError
from agentless.execution.local import LocalBackend, RunLimits
from agentless.instances import Instance
from agentless.repos import RepoCache
from swerl.cli import agentless as agentless_cli
from swerl.edit_format import build_git_patch
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


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")


def _git_repo(clones: Path, repo: str, files: dict[str, str]) -> Instance:
    """A one-commit repository under `clones` and an instance at that commit."""
    path = clones / repo.replace("/", "__")
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    _write(path, files)
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
    _write(
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
    assert run.results == {test_id: "PASSED"}
    assert (tmp_path / "envs" / "acme__usesdep" / "1.0" / ".swerl-ready").exists()

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
    _write(tree, {"requirements.txt": "tinydep\n"})
    instance = Instance("acme__usesdep-1", "acme/usesdep", "0" * 40, "issue", version="1.0")
    envs = EnvManager(tmp_path / "envs", wheelhouse=empty)

    with pytest.raises(EnvSetupError) as failure:
        envs.python_for(instance, tree)
    message = str(failure.value)
    assert "acme/usesdep" in message
    assert f"--find-links {empty}" in message and "No matching distribution found for pytest" in message
    assert "add the missing wheel" in message
    assert not (tmp_path / "envs" / "acme__usesdep" / "1.0").exists()  # nothing half-made left

    def no_second_attempt(*args: object, **kwargs: object) -> None:
        raise AssertionError("a failed environment was attempted again")

    monkeypatch.setattr("agentless.execution.envs.subprocess.run", no_second_attempt)
    with pytest.raises(EnvSetupError, match="acme/usesdep"):
        envs.python_for(instance, tree)


def test_a_missing_wheelhouse_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is not a directory"):
        EnvManager(tmp_path / "envs", wheelhouse=tmp_path / "nowhere")


@pytest.fixture(scope="module")
def hog_backend(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalBackend, Instance]:
    """A stdlib-only repository (shared interpreter) whose tests hog memory or spin, under limits."""
    root = tmp_path_factory.mktemp("hog")
    instance = _git_repo(root / "clones", "acme/hog", HOG_TESTS)
    repos = RepoCache(root / "repos", mirror_dir=root / "clones", offline=True)
    limits = RunLimits(memory_mb=256, cpu_s=2)
    backend = LocalBackend(repos, EnvManager(root / "envs"), isolation=ISOLATION, timeout_s=60, limits=limits)
    return backend, instance


def test_a_memory_hog_fails_its_test_and_the_run_goes_on(hog_backend: tuple[LocalBackend, Instance]) -> None:
    backend, instance = hog_backend
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
