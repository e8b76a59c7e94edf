"""Python environments for running a repository's tests locally, built as the harness builds its images.

What an environment is built from: an `EnvSpec` (the Python version, found on this machine through
PATH, pyenv or uv; pinned packages; install steps that need no root), as SWE-bench builds its images per
repository and version. `load_env_specs` reads them from JSON (the built-in `env_specs.json` or the
user's). Without a spec, a recipe inferred from the repository at its base commit and the row's date
(`recipes.py`): the first of a short list whose environment collects the row's tests is kept and
remembered; environments are keyed by the recipe (Python, requirement set, install, cutoff), so rows
that agree share one. stdlib-only code whose Python is the running interpreter's runs in that
interpreter when it has pytest, finding the code through PYTHONPATH: nothing to build.

Two levels, as the harness's environment and instance images: a base venv per (repository, version)
with Python and the spec's packages, and per instance a copy of it in which the install steps run on the
instance's base commit, in a `testbed` directory beside the venv. The code under test is never the
environment's: each test run replaces the testbed with its own fresh tree (`LocalBackend`), so the
editable install, whatever the layout, always resolves to that tree.

Safety of the machine: every path is absolute from construction on, every install step runs only after
the `python` and `pip` it would find are checked to be the environment's own, and pip refuses to install
outside a virtual environment (PIP_REQUIRE_VIRTUALENV). Nothing half-made is reused: an environment is
marked ready last (`READY`), each is built under its own lock, and an unmarked directory is rebuilt.

Without network access, `wheelhouse` makes every install take wheels from a directory, no index. The venvs
stay self-contained (pytest is installed into each, not borrowed from the base interpreter through
system site-packages): the base interpreter is often the trainer's environment, whose packages and pytest
plugins would otherwise leak into every repository's tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import glob
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swerl.errors import UserError
from swerl.execution.instances import Instance
from swerl.execution.recipes import (
    PYTHON_RELEASES,
    Recipe,
    collect_targets,
    pytest_config_env,
    recipe_from_json,
    recipes_for,
    row_date,
)
from swerl.execution.uninstalled import write_install_outputs
from swerl.git import repo_slug, run_git

UNDATED = ("setuptools", "wheel", "nose")
"""Packages resolved without the recipe's cutoff. setuptools and wheel: the build tools (see
`_install`). nose: a test runner, chosen like pytest rather than by the date; its releases before 1.3.7
(June 2015) are sdists that reach Python 3 only through 2to3 at build, which today's setuptools no
longer runs, so they install as Python 2 code (a SyntaxError in nose/core.py at the first import), and
1.3.7 was its last release."""


USE_2TO3_REFUSED = "use_2to3 is invalid"
"""What setuptools >= 58 says when a source distribution's setup.py asks for 2to3 (feedparser 5.1.3,
pinned by jsonpickle's tests in 2013): such sdists reached Python 3 only through 2to3 at build."""

SETUPTOOLS_WITH_2TO3 = "setuptools<58"
"""The build constraint of the one retry of such an install (`_install`): the last setuptools that runs
2to3. Only on that failure: older build tools for every build would cost what today's resolver needs."""


class EnvSetupError(UserError, RuntimeError):
    """A test environment could not be created (no network for pip, a failing install, ...)."""


_EXTENSIONS = (".so", ".pyd")
"""Suffixes of compiled extension modules (`_speedups.cpython-311-x86_64-linux-gnu.so`, `.abi3.so`)."""


def has_module(python: str, module: str) -> bool:
    """Whether `python` imports `module` (run outside any tree, so it is the installed one)."""
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False, cwd="/")
    return done.returncode == 0


def has_pytest(python: str) -> bool:
    return has_module(python, "pytest")


@dataclass(frozen=True)
class EnvSpec:
    """How to build the environment of one (repository, version), as the harness's images are built.

    `python` is a version ("3.9") looked up on this machine; `packages` are pip requirements installed
    first (the harness's pinned packages); `pre_install` and `install` are shell lines run in the testbed
    with the environment's `bin` first on PATH (so `python` and `pip` are its own). Nothing runs as root:
    system packages (apt) are out of reach and must already be on the machine.
    """

    python: str | None = None
    packages: tuple[str, ...] = ()
    pre_install: tuple[str, ...] = ()
    install: str = "python -m pip install -e ."
    with_pytest: bool = True
    """Install pytest before the packages (off for pytest itself, which brings its own)."""

    def key(self) -> str:
        """A short digest of the spec: a changed spec gets a new environment, never a stale one."""
        text = json.dumps([self.python, self.packages, self.pre_install, self.install, self.with_pytest])
        return hashlib.sha256(text.encode()).hexdigest()[:10]


BUILTIN_SPECS = Path(__file__).with_name("env_specs.json")


def load_env_specs(path: str | Path = BUILTIN_SPECS) -> dict[str, dict[str, EnvSpec]]:
    """Specs from JSON: `{"owner/name": {"version": {"python", "packages", "pre_install", "install", ...}}}`.

    A repository's `"*"` entry applies to versions it does not list.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise UserError(f"{path}: cannot read environment specs: {err}") from err
    specs: dict[str, dict[str, EnvSpec]] = {}
    for repo, versions in data.items():
        if repo.startswith("_"):
            continue  # comments
        for version, raw in versions.items():
            unknown = set(raw) - {"python", "packages", "pre_install", "install", "with_pytest"}
            if unknown:
                raise UserError(f"{path}: {repo} {version}: unknown keys {sorted(unknown)}")
            specs.setdefault(repo, {})[version] = EnvSpec(
                python=raw.get("python"),
                packages=tuple(raw.get("packages", ())),
                pre_install=tuple(raw.get("pre_install", ())),
                install=raw.get("install", EnvSpec.install),
                with_pytest=bool(raw.get("with_pytest", True)),
            )
    return specs


def python_candidates(version: str) -> list[str]:
    """Where an interpreter of `version` may live: PATH, pyenv (PYENV_ROOT, ~/.pyenv, /root/.pyenv), uv."""
    found = [shutil.which(f"python{version}") or ""]
    roots = [os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"]
    for root in dict.fromkeys(r for r in roots if r):
        found += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), reverse=True)
    uv_root = os.environ.get("UV_PYTHON_INSTALL_DIR") or str(Path.home() / ".local/share/uv/python")
    found += sorted(glob.glob(f"{uv_root}/cpython-{version}.*/bin/python{version}"), reverse=True)
    return [f for f in dict.fromkeys(found) if f]


def find_python(version: str) -> str:
    """An interpreter of `version` that runs (a pyenv shim may exist for a version it does not serve)."""
    for candidate in python_candidates(version):
        probe = "import sys; print('%d.%d' % sys.version_info[:2])"
        done = subprocess.run([candidate, "-c", probe], capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip() == version:
            return candidate
    raise EnvSetupError(
        f"no Python {version} on this machine (looked on PATH, in pyenv and uv installs): install it "
        f"(pyenv install {version}, uv python install {version}) or pass --python"
    )


INFERRED_LANG = "C.UTF-8"
"""The locale of inferred environments. The harness's images (ubuntu:22.04 with TZ and nothing else
set) run in the C locale, which Python 3.7 and later coerce to C.UTF-8 (PEP 538); Python 3.6, which
repositories of 2016-2018 get, does not: its stdout and filesystem encodings stay ASCII, and code that
checks for that (click before 7.0 refuses to run) fails in every test. The CI these repositories ran on
had a UTF-8 locale (Travis set en_US.UTF-8, GitHub's runners set C.UTF-8). C.UTF-8 is what 3.7's
coercion gives and is built into glibc since 2.35, so it needs no generated locales."""


@dataclass(frozen=True)
class TestEnv:
    """An interpreter to run an instance's tests with, and where the code under test must be put.

    `testbed` is set for environments that install the project: their install (editable) points at that
    directory, so each run puts its own fresh tree there, under `lock`, and the environment never holds
    code of its own. Without a testbed the tree can be anywhere and is found through PYTHONPATH.
    """

    __test__ = False  # not a pytest test class, despite the name

    python: str
    testbed: Path | None = None
    recipe: str = ""
    """How the environment was built, as JSON, recorded with every run in it so that a validated
    instance says which environment its test lists hold for: for an inferred one its `Recipe` (python,
    recipe name, pytest, requirement set, install, cutoff), which a validated row carries as
    `env_recipe` to be rebuilt exactly; for a built-in spec its name and key. Empty for a fixed
    interpreter (`--python`)."""
    lang: str = ""
    """The locale the tests run with (LANG); empty for none, as in the harness's images."""
    uninstalled: bool = False
    """An inferred environment that does not install the project: what its install would have written
    and its code reads (`uninstalled.py`) is written beside each tree it runs."""

    @property
    def artifacts(self) -> Path | None:
        """Files the install made in the testbed (egg-info with entry points, generated version files,
        built extensions), kept aside to be put into every fresh tree, as the harness's image has them."""
        return None if self.testbed is None else self.testbed.parent / "artifacts"

    def restore_artifacts(self, tree: Path) -> None:
        """Copy the install's artifacts into `tree` (a fresh checkout just moved to the testbed)."""
        if self.artifacts is not None and self.artifacts.is_dir():
            shutil.copytree(self.artifacts, tree, symlinks=True, dirs_exist_ok=True)

    def built_extensions(self) -> list[str]:
        """The extension modules the install compiled into the tree (relative paths), which imports
        find there: those of the base commit, put into every fresh tree with the artifacts. Copies
        under `build/` are the build's intermediate output, not what is imported."""
        if self.artifacts is None or not self.artifacts.is_dir():
            return []
        found = (p.relative_to(self.artifacts) for p in self.artifacts.rglob("*") if p.suffix in _EXTENSIONS)
        return sorted(str(p) for p in found if p.parts[0] != "build")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive use of the testbed across threads and processes (one tree at a time)."""
        if self.testbed is None:
            yield
            return
        with (self.testbed.parent / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


_log = logging.getLogger(__name__)

COLLECT_TIMEOUT_S = 300.0
"""How long a recipe's collection check may take (a hanging import fails the recipe, not the run)."""

READY = ".swerl-ready"
"""The file that says an environment is complete: written last, atomically, after every install step and
the smoke check succeeded. A directory without it is half-made (a failure, a run killed at any point) and
is removed and built again, never used."""


def is_ready(env: Path) -> bool:
    """Whether `env` is complete *where it is*. A virtual environment and the editable installs in it
    name their own absolute paths, so a cache folder copied or moved elsewhere holds environments that
    still run the old location's interpreter and import the old location's source tree: one whose marker
    names another place is not ready here, and is built again rather than used."""
    try:
        recorded = json.loads((env / READY).read_text(encoding="utf-8")).get("python")
    except (OSError, ValueError, AttributeError):
        return False
    if not isinstance(recorded, str):
        return False
    # The folders compared resolved (not the interpreter, a link to the base Python), so a cache reached
    # through a symbolic link is still the same place.
    return os.path.realpath(os.path.dirname(recorded)) == os.path.realpath(env / "venv" / "bin")


def _own_python(env: Path) -> str:
    return str((env / "venv" / "bin" / "python").absolute())


def _mark_ready(env: Path) -> None:
    """Record completion, and where: a temporary file renamed into place, so the marker is whole or absent."""
    tmp = env / f"{READY}.tmp"
    tmp.write_text(json.dumps({"python": _own_python(env)}) + "\n", encoding="utf-8")
    os.replace(tmp, env / READY)


@contextlib.contextmanager
def env_lock(env: Path) -> Iterator[None]:
    """One builder of `env` at a time, across threads and processes (`--workers N`, two runs sharing a
    cache): an fcntl lock on `<parent>/.<name>.lock`, beside the directory so that removing a half-made
    environment never removes its lock. Each call opens the file anew, so threads exclude each other too."""
    env.parent.mkdir(parents=True, exist_ok=True)
    with (env.parent / f".{env.name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class EnvManager:
    """Hands out test environments for instances; creates venvs under `root` when it has to.

    As the harness builds an environment image per (repository, version) and an instance image per
    instance from it: a base venv per (repository, version, spec) holds the Python and the spec's
    packages; each instance gets a copy of it in which the spec's `pre_install` and `install` steps run
    on a checkout of the instance's base commit (dependencies change within a version: pytest 5.4's base
    commits differ in whether they need wcwidth). Both are cached, the instance's keyed by its base commit.
    """

    root: Path
    base_python: str = field(default_factory=lambda: sys.executable)
    python: str | None = None
    """A fixed interpreter for every repository (the user prepared it); disables env creation."""
    wheelhouse: Path | None = None
    """Install wheels from this directory and never contact an index (`pip --no-index --find-links`; pip
    still adds find-links of its own config), for machines without network access. It must hold pytest,
    the build backends the repositories declare (setuptools, wheel, ...) and every dependency, all for
    the environment's Python version. Other pip settings (a private index, a proxy) need no option here:
    pip reads them from its own config and `PIP_*` variables, which the installs inherit."""
    specs: dict[str, dict[str, EnvSpec]] = field(default_factory=dict)
    """Per repository and version, how to build its environment (`load_env_specs`); an instance without
    one gets an inferred recipe (`recipes.py`)."""
    _available: list[str] | None = field(default=None, repr=False)
    _uv_path: str | None = field(default=None, repr=False)
    _failed: dict[Path, str] = field(default_factory=dict, repr=False)
    """Why creating a venv failed, so that the next instance of that repository fails at once instead of
    repeating a slow install (pip retries an unreachable index for minutes)."""

    def __post_init__(self) -> None:
        # Absolute once, here: the install steps run inside the testbed, where a relative venv path on
        # PATH no longer resolves and `python` would be whatever else PATH finds (the machine's own).
        self.root = Path(self.root).resolve()
        # A fixed interpreter given as a relative path (`--python runs/py/bin/python`) is exec'd by the
        # tests' shims from inside the checkout, where it names nothing: every run would be "cannot
        # judge". abspath, not resolve: a venv's python is a symlink that must stay the venv's.
        if self.python and os.sep in self.python:
            self.python = os.path.abspath(self.python)
        if self.wheelhouse is not None:
            self.wheelhouse = Path(self.wheelhouse).resolve()
            if not self.wheelhouse.is_dir():
                raise ValueError(f"wheelhouse {self.wheelhouse} is not a directory")

    def spec_for(self, instance: Instance) -> EnvSpec | None:
        versions = self.specs.get(instance.repo, {})
        return versions.get(instance.version) or versions.get("*")

    def env_for(self, instance: Instance, tree: Path) -> TestEnv:
        """The environment to run `instance`'s tests in (`tree` is a pristine checkout of its base
        commit, from which a new instance environment is installed).

        A built-in (or user) spec wins; a row that carries the recipe it was validated with
        (`env_recipe`) gets exactly that one; any other is given the first inferred recipe whose
        environment collects its tests (`recipes.py`)."""
        if self.python:
            return TestEnv(self.python)
        spec = self.spec_for(instance)
        if spec is None:
            return self._inferred_env(instance, tree)
        key = instance.version or instance.environment_setup_commit[:12] or instance.base_commit[:12]
        base = self.root / repo_slug(instance.repo) / f"{key}-{spec.key()}"
        env = base.with_name(f"{base.name}@{instance.base_commit[:12]}")
        owner = f"{instance.repo} (environment {key}, base commit {instance.base_commit[:12]})"
        self._build_instance(env, base, tree, spec, owner)
        recipe = json.dumps({"name": "spec", "python": spec.python or "", "spec": spec.key()})
        return TestEnv(str(env / "venv" / "bin" / "python"), env / "testbed", recipe)

    def available_pythons(self) -> list[str]:
        """The Python versions a recipe may choose: those this machine has an interpreter of that can
        create virtual environments, and 2.7 where it has one (it has no venv module: its venvs are
        made by `virtualenv`, `_virtualenv`; a recipe takes it only for Python 2 code)."""
        if self._available is None:
            found = []
            for version in PYTHON_RELEASES:
                try:
                    python = find_python(version)
                except EnvSetupError:
                    continue
                probe = [python, "-c", "import venv, ensurepip"]
                if (
                    version == "2.7"
                    or subprocess.run(probe, capture_output=True, check=False).returncode == 0
                ):
                    found.append(version)
            self._available = found
        return self._available

    def _virtualenv(self, owner: str) -> str:
        """virtualenv, which makes the venvs of Python 2.7, installed once into a tool venv of our own:
        its 20.21 line, the last that creates them (with the pip 20.3 and setuptools 44 it carries)."""
        tool = self.root / "tools-virtualenv"
        spec = EnvSpec(packages=("virtualenv>=20.16,<20.22",), with_pytest=False)
        self._build_base(tool, spec, f"{owner} (the tool virtualenv, for Python 2.7)")
        return str(tool / "venv" / "bin" / "virtualenv")

    def _inferred_env(self, instance: Instance, tree: Path) -> TestEnv:
        """The environment of a repository without a spec: the recorded recipe, the remembered choice
        of an earlier run, or the first inferred recipe whose environment collects the row's tests."""
        owner = f"{instance.repo} (base commit {instance.base_commit[:12]})"
        recorded = instance.extra.get("env_recipe")
        if recorded:
            return self._recipe_env(owner, instance.repo, tree, recipe_from_json(str(recorded)))
        when = row_date(instance.extra.get("created_at"), tree)
        preferred = version_of(self.base_python)
        candidates = recipes_for(
            tree,
            when,
            self.available_pythons(),
            preferred=preferred,
            base_commit=instance.base_commit,
            dated=self.wheelhouse is None,
            patches=(instance.test_patch, instance.patch),
        )
        candidates = [self._interpreter_instead(r, preferred) for r in candidates]
        digest = hashlib.sha256("\n".join(r.to_json() for r in candidates).encode()).hexdigest()[:16]
        choice = self.root / "auto" / repo_slug(instance.repo) / "choices" / f"{digest}.json"
        if choice.is_file():
            remembered = recipe_from_json(choice.read_text(encoding="utf-8"))
            return self._recipe_env(owner, instance.repo, tree, remembered)
        if choice in self._failed:
            raise EnvSetupError(self._failed[choice])
        targets = collect_targets(tree, [*instance.fail_to_pass, *instance.pass_to_pass], instance.test_patch)
        failures: list[str] = []
        fallback: tuple[Recipe, TestEnv] | None = None
        for recipe in candidates:
            try:
                env = self._recipe_env(owner, instance.repo, tree, recipe)
            except EnvSetupError as err:
                failures.append(f"recipe {recipe.name} (Python {recipe.python}): {_abridged(str(err))}")
                _log.info("%s: %s", owner, failures[-1])
                continue
            try:
                self._collect(owner, env, tree, targets)
            except EnvSetupError as err:
                failures.append(f"recipe {recipe.name} (Python {recipe.python}): {_abridged(str(err))}")
                _log.info("%s: %s", owner, failures[-1])
                fallback = fallback or (recipe, env)
                continue
            _remember(choice, recipe)
            return env
        if fallback is not None:
            # Every environment that could be built fails to collect: the tests themselves cannot
            # start here (a module this machine lacks). Kept, so the runs say so as test errors.
            _log.warning("%s: no recipe collected %s; keeping recipe %s", owner, targets, fallback[0].name)
            _remember(choice, fallback[0])
            return fallback[1]
        message = (
            f"could not create the test environment of {owner}: no recipe could be built "
            f"({', '.join(targets)}):\n" + "\n".join(failures)
        )
        self._failed[choice] = message
        raise EnvSetupError(message)

    def _interpreter_instead(self, recipe: Recipe, preferred: str) -> Recipe:
        """The running interpreter in place of a PYTHONPATH recipe that would only add pytest to a venv
        of that very Python: nothing to build (the fast path of stdlib-only code)."""
        bare = recipe.name == "pythonpath" and not recipe.requirements
        if bare and recipe.python == preferred and has_pytest(self.base_python):
            return Recipe("interpreter", recipe.python, decisions=recipe.decisions)
        return recipe

    def _recipe_env(self, owner: str, repo: str, tree: Path, recipe: Recipe) -> TestEnv:
        """The environment of `recipe`, built if it is not ready: for recipes that install the project
        one per repository (and sources), for the others one shared by every repository with the same
        requirements."""
        text = recipe.to_json()
        if recipe.name == "interpreter" and version_of(self.base_python) == recipe.python:
            return TestEnv(self.base_python, None, text, INFERRED_LANG, uninstalled=True)
        folder = repo_slug(repo) if recipe.install else "shared"
        env = self.root / "auto" / folder / f"{recipe.name}-{recipe.key()}"
        who = f"{owner}, recipe {recipe.name}, Python {recipe.python}"
        self._build(env, who, lambda: self._build_recipe(env, who, tree, recipe), True)
        python = str(env / "venv" / "bin" / "python")
        testbed = env / "testbed" if recipe.install else None
        return TestEnv(python, testbed, text, INFERRED_LANG, uninstalled=testbed is None)

    def _build_recipe(self, env: Path, owner: str, tree: Path, recipe: Recipe) -> None:
        """A venv of the recipe's Python with its requirements and, for an installing recipe, the
        project installed at `env/testbed`.

        Three steps: the tools without the cutoff (pytest of the date, and for an install a pip that
        installs any project in editable mode plus the build backend the project declares); the
        dependencies as of the cutoff (the project's, read by the resolver from its setup.py or
        pyproject with the recipe's extra, and the requirement lines); the project itself, editable,
        without dependencies or build isolation, by the venv's pip, which falls back to `setup.py
        develop` for projects older than editable wheels."""
        base = find_python(recipe.python)
        venv_hint = f"{base} cannot create venvs (Debian/Ubuntu: install python3-venv)."
        make = [base, "-m", "venv", str(env / "venv")]
        python2 = recipe.python == "2.7"
        if python2:
            make = [self._virtualenv(owner), "-q", "--no-download", "-p", base, str(env / "venv")]
        _step(owner, make, venv_hint, self._pip_env(env))
        testbed = env / "testbed"
        if recipe.install:
            shutil.copytree(tree, testbed, symlinks=True)
        sources = ["-r", str(env / "requirements.txt")] if recipe.requirements else []
        if sources:
            (env / "requirements.txt").write_text("\n".join(recipe.requirements) + "\n", encoding="utf-8")
        if self.wheelhouse is not None or python2 or self._uv() is None:
            tools = [recipe.pytest]
            project = ["-e", f".[{recipe.extra}]" if recipe.extra else "."] if recipe.install else []
        else:
            tools = [recipe.pytest, *(["pip>=21.3", *_build_requires(testbed)] if recipe.install else [])]
            if recipe.install:
                sources += ["-r", _declaration_file(testbed)] + (
                    ["--extra", recipe.extra] if recipe.extra else []
                )
            project = []
        self._install(env, owner, tools, env, "")
        if sources:
            self._install(env, owner, sources, testbed if recipe.install else env, recipe.cutoff)
        if project:
            self._install(env, owner, project, testbed, recipe.cutoff)
        elif recipe.install:
            editable = [
                "python",
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                "--no-build-isolation",
                "-e",
                ".",
            ]
            self._pip_step(env, owner, editable, testbed)
        if recipe.install:
            _keep_artifacts(testbed, env / "artifacts")

    def _install(self, env: Path, owner: str, args: list[str], cwd: Path, cutoff: str) -> None:
        """Install `args` into `env`: from a wheelhouse with pip; else with uv, as of `cutoff` when it is
        set (`--exclude-newer`; `UNDATED` exempt: the build tools setuptools and wheel, since a build
        environment of the date lacks what today's resolver needs to build at all, and nose). Why
        uv: pip resolves as of a date only from 26.0 on, which Pythons before 3.9 cannot run, and here
        it would also take today's releases from the machine's local indexes, which serve no upload
        times. Without uv an undated install falls back to the venv's pip; a dated one fails (its
        recipe is then skipped), since nothing newer than its date may come in. A build that today's
        setuptools refuses for its 2to3 is tried once more with a setuptools that runs it
        (`SETUPTOOLS_WITH_2TO3`)."""
        python2 = version_of(str(env / "venv" / "bin" / "python")) == "2.7"  # uv installs for Python 3 only
        uv = self._uv() if self.wheelhouse is None and not python2 else None
        if uv is None and not cutoff:
            self._pip_step(env, owner, ["python", "-m", "pip", "install", "-q", *args], cwd)
            return
        if uv is None:
            raise EnvSetupError(
                f"could not create the test environment of {owner}: resolving as of {cutoff} needs uv "
                "(not on PATH and not installable here, or a wheelhouse is used)"
            )
        dated = []
        if cutoff:
            today = dt.date.today().isoformat()
            dated = ["--exclude-newer", cutoff]
            dated += [f"--exclude-newer-package={tool}={today}" for tool in UNDATED]
        python = str(env / "venv" / "bin" / "python")
        install = [uv, "pip", "install", "-q"]
        what = ["--python", python, *dated, *args]
        try:
            self._pip_step(env, owner, [*install, *what], cwd)
        except EnvSetupError as err:
            if USE_2TO3_REFUSED not in str(err):
                raise
            constraints = env / "build-constraints.txt"
            constraints.write_text(f"{SETUPTOOLS_WITH_2TO3}\n", encoding="utf-8")
            self._pip_step(env, owner, [*install, "--build-constraints", str(constraints), *what], cwd)

    def _uv(self) -> str | None:
        """uv, for installs as of a date: on PATH, else installed once into a tool venv of our own."""
        if self._uv_path is None:
            found = shutil.which("uv") or ""
            if not found:
                tool = self.root / "tools-uv"
                try:
                    self._build_base(tool, EnvSpec(packages=("uv",), with_pytest=False), "the resolver uv")
                    found = str(tool / "venv" / "bin" / "uv")
                except EnvSetupError:
                    found = ""
            self._uv_path = found
        return self._uv_path or None

    def _collect(self, owner: str, env: TestEnv, tree: Path, targets: list[str]) -> None:
        """The recipe's test: pytest collects the row's test files in `tree` without an error, the code
        found as the test runs find it: through the install (the tree put in the testbed, under the
        environment's lock, with the install's artifacts) or through PYTHONPATH.

        Collection imports repository code outside the sandbox, as the install steps before it do:
        building an environment trusts the repository at its base commit, never a patch."""
        # The locale the runs have, not ours (LC_* of the caller's shell would override LANG).
        values = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "LANG", "LANGUAGE") and not k.startswith("LC_")
        }
        if env.lang:
            values["LANG"] = env.lang
        values["PATH"] = f"{Path(env.python).parent}:{values.get('PATH', '/usr/bin:/bin')}"
        values["PYTHONDONTWRITEBYTECODE"] = "1"
        argv = [env.python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *targets]
        hint = "The install succeeded but pytest cannot collect the tests in this environment."
        if env.testbed is None:
            with tempfile.TemporaryDirectory(prefix="swerl-collect-") as where:
                generated = write_install_outputs(tree, Path(where) / "metadata") if env.uninstalled else []
                values["PYTHONPATH"] = ":".join([*code_paths(tree), *generated])
                values |= pytest_config_env(tree, Path(where))
                _step(owner, argv, hint, values, cwd=tree, timeout_s=COLLECT_TIMEOUT_S)
            return
        with env.lock():
            shutil.rmtree(env.testbed, ignore_errors=True)
            shutil.copytree(tree, env.testbed, symlinks=True)
            env.restore_artifacts(env.testbed)
            values |= pytest_config_env(env.testbed, env.testbed.parent / "config")
            _step(owner, argv, hint, values, cwd=env.testbed, timeout_s=COLLECT_TIMEOUT_S)

    def python_for(self, instance: Instance, tree: Path) -> str:
        """The interpreter of `env_for` (for callers that only need to know which one it is)."""
        return self.env_for(instance, tree).python

    def _build_base(self, env: Path, spec: EnvSpec, owner: str) -> None:
        """A venv at `env/venv` with pytest and the spec's packages (the harness's environment image)."""

        def build() -> None:
            base = find_python(spec.python) if spec.python else self.base_python
            venv_hint = f"{base} cannot create venvs (Debian/Ubuntu: install python3-venv)."
            _step(owner, [base, "-m", "venv", str(env / "venv")], venv_hint, self._pip_env(env))
            packages = [*(["pytest"] if spec.with_pytest else []), *spec.packages]
            if packages:
                self._pip_step(env, owner, ["python", "-m", "pip", "install", "-q", *packages], env)

        self._build(env, owner, build, has_pytest=spec.with_pytest)

    def _build_instance(self, env: Path, base: Path, tree: Path, spec: EnvSpec, owner: str) -> None:
        """A copy of the base venv with the project at `env/testbed` installed by the spec's steps (the
        harness's instance image: pre_install and install run at the instance's base commit)."""

        def build() -> None:
            self._build_base(base, spec, f"{owner.split(' (')[0]} (environment {base.name})")
            shutil.copytree(base / "venv", env / "venv", symlinks=True)
            _relocate_scripts(env / "venv", base / "venv")
            testbed = env / "testbed"
            shutil.copytree(tree, testbed, symlinks=True)
            for line in [*spec.pre_install, spec.install]:
                self._pip_step(env, owner, ["bash", "-c", line], testbed)
            _keep_artifacts(testbed, env / "artifacts")

        self._build(env, owner, build, has_pytest=True)

    def _build(self, env: Path, owner: str, build: Callable[[], None], has_pytest: bool) -> None:
        """Build `env` once: under its lock, readiness first; a directory without the ready marker is
        removed and built again; the marker is written last, after the smoke check.

        Raises EnvSetupError naming `owner` and what to do; what the failure left is removed."""
        with env_lock(env):
            if is_ready(env):
                return
            if env in self._failed:
                raise EnvSetupError(self._failed[env])
            shutil.rmtree(env, ignore_errors=True)
            env.mkdir(parents=True)
            try:
                build()
                self._smoke_check(env, owner, has_pytest)
            except EnvSetupError as err:
                shutil.rmtree(env, ignore_errors=True)
                self._failed[env] = str(err)
                raise
            _mark_ready(env)

    def _pip_step(self, env: Path, owner: str, cmd: list[str], cwd: Path) -> None:
        """One install step, run only once the interpreter and pip it would find are the environment's."""
        values = self._pip_env(env)
        self._check_interpreter(env, owner, values, cwd)
        _step(owner, cmd, self._pip_hint(), values, cwd=cwd)

    def _check_interpreter(self, env: Path, owner: str, values: dict[str, str], cwd: Path) -> None:
        """Refuse to install anything unless `python` and `pip`, as a step's shell finds them, belong to
        `env/venv`: an install that reached another interpreter would change the machine's own Python."""
        venv = os.path.realpath(env / "venv")
        probe = 'python -c "import sys; print(sys.prefix)" && pip --version'
        done = subprocess.run(
            ["bash", "-c", probe], capture_output=True, text=True, env=values, cwd=cwd, check=False
        )
        lines = done.stdout.splitlines()
        prefix = os.path.realpath(lines[0]) if done.returncode == 0 and lines else ""
        pip_at = lines[1].split(" from ", 1)[-1] if len(lines) > 1 else ""
        if prefix != venv or not os.path.realpath(pip_at.rsplit(" (", 1)[0]).startswith(venv + "/"):
            found = (done.stdout + done.stderr).strip()[-500:] or f"exit status {done.returncode}"
            raise EnvSetupError(
                f"could not create the test environment of {owner}: the interpreter and pip that its "
                f"install steps would use are not those of {env / 'venv'} ({found}); nothing was installed. "
                "Remove that directory to build it again."
            )

    def _smoke_check(self, env: Path, owner: str, has_pytest: bool) -> None:
        """The built environment runs: its interpreter is its own and, once it should have pytest,
        imports it (the repository's own pytest for pytest itself, whose base environment has none yet),
        from outside the testbed so that the import is the installed one."""
        values = self._pip_env(env)
        self._check_interpreter(env, owner, values, env)
        if not has_pytest:
            return
        hint = "The install steps succeeded but left an environment that cannot run pytest."
        _step(owner, [str(env / "venv" / "bin" / "python"), "-c", "import pytest"], hint, values, cwd=env)

    def _pip_env(self, env: Path) -> dict[str, str]:
        """The environment of setup commands: the venv first on PATH, pip bound to the wheelhouse and
        refusing to install outside a virtual environment."""
        values = {**os.environ, "PATH": f"{env / 'venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        values["VIRTUAL_ENV"] = str(env / "venv")
        values["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        values["PIP_REQUIRE_VIRTUALENV"] = "1"
        values.pop("PYTHONHOME", None)
        values.pop("PYTHONPATH", None)
        if self.wheelhouse is not None:
            values["PIP_NO_INDEX"] = "1"
            values["PIP_FIND_LINKS"] = str(self.wheelhouse)
        return values

    def _pip_hint(self) -> str:
        """What to do about a failed install: the two usual causes are no network and a short wheelhouse."""
        if self.wheelhouse is not None:
            return (
                f"No index is used, wheels come from {self.wheelhouse}: add the missing wheel (pytest, "
                "a build backend such as setuptools or wheel, or a dependency; built for this Python) "
                "from a connected machine with `pip download -d DIR ...` or `pip wheel -w DIR ...`."
            )
        return (
            "Without network access pass --wheelhouse DIR (a directory of wheels, see docs/agentless.md); "
            "or --python with an interpreter that has pytest and the repository's dependencies; or "
            "--backend docker."
        )


def _relocate_scripts(venv: Path, origin: Path) -> None:
    """Point a copied venv's scripts (pip, pytest, activate: their shebangs name the venv) at the copy,
    so that none of them runs the base venv's interpreter."""
    old, new = str(origin).encode(), str(venv).encode()
    for script in (venv / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        data = script.read_bytes()
        if old in data:
            script.write_bytes(data.replace(old, new))


def _keep_artifacts(testbed: Path, dest: Path) -> None:
    """Copy the files git does not track (ignored ones included) out of the installed testbed (a
    checkout; a plain directory, as a user's `--python` project may be, has nothing to tell apart)."""
    if not (testbed / ".git").exists():
        return
    listed = run_git(testbed / ".git", "ls-files", "--others", "-z", cwd=testbed).decode(
        "utf-8", "surrogateescape"
    )
    for name in filter(None, listed.split("\0")):
        if "__pycache__" in name.split("/"):
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(testbed / name, target, follow_symlinks=False)


def _step(
    owner: str,
    cmd: list[str],
    hint: str,
    env: dict[str, str],
    cwd: Path | None = None,
    timeout_s: float | None = None,
) -> None:
    """Run one setup command; on failure raise with whose environment it was, the command, its output
    (pip names the missing package there) and `hint`."""
    try:
        done = subprocess.run(cmd, capture_output=True, check=False, env=env, cwd=cwd, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        said = ((err.stdout or b"") + (err.stderr or b"")).decode(errors="replace")
        raise EnvSetupError(
            f"could not create the test environment of {owner}: `{' '.join(cmd)}` ran past {timeout_s:g} s:"
            f"\n{_tail(said, 2000)}\n{hint}"
        ) from err
    if done.returncode == 0:
        return
    output = _tail((done.stdout + done.stderr).decode(errors="replace"), 2000)
    raise EnvSetupError(
        f"could not create the test environment of {owner}: `{' '.join(cmd)}` exited with status "
        f"{done.returncode}:\n{output}\n{hint}"
    )


def _abridged(message: str, head: int = 500, tail: int = 900) -> str:
    """A failed step's message kept short: its start (which step, which command) and its end (the log's
    last lines, where the cause is)."""
    return message if len(message) <= head + tail else f"{message[:head]} [...] {message[-tail:]}"


def _tail(text: str, size: int) -> str:
    """The end of a log, where pip and pytest say what failed."""
    return text.strip()[-size:]


@functools.cache
def version_of(python: str) -> str:
    """`3.11` for an interpreter (empty when it does not run)."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def code_paths(tree: Path) -> list[str]:
    """Where code that is not installed is found: the tree's root and, for a `src/` layout, its `src`."""
    return [str(tree)] + ([str(tree / "src")] if (tree / "src").is_dir() else [])


def _build_system(tree: Path) -> dict[str, Any]:
    """The project's `[build-system]` table (empty without a readable pyproject.toml)."""
    try:
        data = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        data = {}
    table = data.get("build-system", {})
    return table if isinstance(table, dict) else {}


def _build_requires(tree: Path) -> list[str]:
    """The build backend a project declares (`[build-system].requires`), setuptools and wheel for one
    that declares none (a bare setup.py)."""
    return list(_build_system(tree).get("requires", [])) or ["setuptools", "wheel"]


def rebuild_command(tree: Path) -> str | None:
    """The shell line that compiles a tree's extensions again in place, with the environment's own
    interpreter and build tools (no install, no network): setuptools' `build_ext --inplace --force`,
    for a setup.py or a pyproject whose backend is setuptools (which also reads `ext-modules` there).
    None for another backend (meson-python, scikit-build-core, ...): none of those has that step."""
    backend = str(_build_system(tree).get("build-backend", ""))
    step = "build_ext --inplace --force"
    if (tree / "setup.py").is_file() and (not backend or backend.startswith("setuptools")):
        return f"python setup.py {step}"
    if backend.startswith("setuptools"):
        return f"python -c 'from setuptools import setup; setup()' {step}"
    return None


def _declaration_file(tree: Path) -> str:
    """The file the resolver reads the project's dependencies from: pyproject.toml where it has a
    `[project]` table, else setup.py, else setup.cfg."""
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file() and "[project]" in pyproject.read_text(encoding="utf-8", errors="replace"):
        return str(pyproject)
    return str(tree / "setup.py") if (tree / "setup.py").is_file() else str(tree / "setup.cfg")


def _remember(choice: Path, recipe: Recipe) -> None:
    """Record the recipe kept for a set of candidates, whole or not at all (written, then renamed)."""
    choice.parent.mkdir(parents=True, exist_ok=True)
    tmp = choice.with_name(f".{choice.name}.{os.getpid()}.tmp")
    tmp.write_text(recipe.to_json(), encoding="utf-8")
    os.replace(tmp, choice)
