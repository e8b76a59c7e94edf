"""Python environments for running a repository's tests locally.

Fast path: a repository that declares no dependencies (stdlib-only code tested with pytest) runs under
one shared interpreter that has pytest, the base interpreter itself when it has pytest, else one venv
created once. Other repositories get a venv per (repository, environment key) where the dependencies
are installed once (`pip install -e` of a pristine copy); at test time the exported tree is first on
`PYTHONPATH`, so the code under test is the patched copy, not the installed one. Packages with compiled
extensions are out of reach of this shortcut; use the Docker backend for them.

Without network access, `wheelhouse` makes every install take wheels from a directory, no index. The venvs
stay self-contained (pytest is installed into each, not borrowed from the base interpreter through
system site-packages): the base interpreter is often the trainer's environment, whose packages and pytest
plugins would otherwise leak into every repository's tests.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from agentless.instances import Instance
from agentless.repos import repo_slug


class EnvSetupError(RuntimeError):
    """A test environment could not be created (no network for pip, a failing install, ...)."""


def _setup_py_requires(path: Path) -> list[str] | None:
    """`install_requires` of a setup.py when it is a literal list; None when it can't be read statically."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return [str(v) for v in value]
    return []


def declared_requirements(root: Path) -> list[str] | None:
    """Runtime requirements the repository declares; None when they can't be determined statically.

    Reads pyproject.toml `[project].dependencies`, a literal `install_requires` in setup.py, and
    requirements.txt. An empty list means "stdlib only": the fast path applies.
    """
    found: list[str] = []
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError:
            return None
        found += list(data.get("project", {}).get("dependencies", []) or [])
    setup_py = root / "setup.py"
    if setup_py.exists():
        requires = _setup_py_requires(setup_py)
        if requires is None:
            return None
        found += requires
    requirements = root / "requirements.txt"
    if requirements.exists():
        for line in requirements.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                found.append(line)
    return found


def has_pytest(python: str) -> bool:
    done = subprocess.run([python, "-c", "import pytest"], capture_output=True, check=False)
    return done.returncode == 0


@dataclass
class EnvManager:
    """Hands out an interpreter for a repository; creates venvs under `root` when it has to."""

    root: Path
    base_python: str = field(default_factory=lambda: sys.executable)
    python: str | None = None
    """A fixed interpreter for every repository (the user prepared it); disables env creation."""
    wheelhouse: Path | None = None
    """Install wheels from this directory and never contact an index (`pip --no-index --find-links`; pip
    still adds find-links of its own config), for machines without network access. It must hold pytest,
    the build backends the repositories declare (setuptools, wheel, ...) and every dependency, all for
    `base_python`'s version. Other pip settings (a private index, a proxy) need no option here: pip reads
    them from its own config and `PIP_*` variables, which the installs inherit."""
    _shared: str | None = field(default=None, repr=False)
    _failed: dict[Path, str] = field(default_factory=dict, repr=False)
    """Why creating a venv failed, so that the next instance of that repository fails at once instead of
    repeating a slow install (pip retries an unreachable index for minutes)."""

    def __post_init__(self) -> None:
        if self.wheelhouse is not None:
            self.wheelhouse = Path(self.wheelhouse).resolve()
            if not self.wheelhouse.is_dir():
                raise ValueError(f"wheelhouse {self.wheelhouse} is not a directory")

    def shared_python(self) -> str:
        """The fast-path interpreter: the base one when it has pytest, else a venv with just pytest."""
        if self._shared is None:
            if has_pytest(self.base_python):
                self._shared = self.base_python
            else:
                self._shared = self._create(
                    self.root / "shared-pytest", None, "the shared pytest environment"
                )
        return self._shared

    def python_for(self, instance: Instance, tree: Path) -> str:
        """The interpreter to run `instance`'s tests with (`tree` is an export of its base commit)."""
        if self.python:
            return self.python
        requirements = declared_requirements(tree)
        if requirements == []:
            return self.shared_python()
        key = instance.environment_setup_commit or instance.version or instance.base_commit
        venv = self.root / repo_slug(instance.repo) / key[:40]
        return self._create(venv, tree, f"{instance.repo} (environment {key[:40]})")

    def _create(self, venv: Path, project: Path | None, owner: str) -> str:
        """A venv with pytest and, given `project`, an editable install of a pristine copy of it.

        Raises EnvSetupError naming `owner` and what to do. A half-made venv (this failure, or an
        interrupted earlier run) is removed, so that the next attempt starts clean.
        """
        python = venv / "bin" / "python"
        if (venv / ".swerl-ready").exists():
            return str(python)
        if venv in self._failed:
            raise EnvSetupError(self._failed[venv])
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if self.wheelhouse is not None:
            pip += ["--no-index", "--find-links", str(self.wheelhouse)]
        venv_hint = f"{self.base_python} cannot create venvs (Debian/Ubuntu: install python3-venv)."
        try:
            _step(owner, [self.base_python, "-m", "venv", str(venv)], venv_hint)
            _step(owner, [*pip, "pytest"], self._pip_hint())
            if project is not None:
                pristine = venv / "src"
                shutil.copytree(project, pristine, symlinks=True)
                _step(owner, [*pip, "-e", str(pristine)], self._pip_hint())
        except EnvSetupError as err:
            shutil.rmtree(venv, ignore_errors=True)
            self._failed[venv] = str(err)
            raise
        (venv / ".swerl-ready").write_text("ok\n", encoding="utf-8")
        return str(python)

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


def _step(owner: str, cmd: list[str], hint: str) -> None:
    """Run one setup command; on failure raise with whose environment it was, the command, its output
    (pip names the missing package there) and `hint`."""
    done = subprocess.run(cmd, capture_output=True, check=False)
    if done.returncode == 0:
        return
    output = done.stderr.decode(errors="replace").strip()[-2000:]
    raise EnvSetupError(
        f"could not create the test environment of {owner}: `{' '.join(cmd)}` exited with status "
        f"{done.returncode}:\n{output}\n{hint}"
    )
