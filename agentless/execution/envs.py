"""Python environments for running a repository's tests locally.

Fast path: a repository that declares no dependencies (stdlib-only code tested with pytest) runs under
one shared interpreter that has pytest, the base interpreter itself when it has pytest, else one venv
created once. Other repositories get a venv per (repository, environment key) where the dependencies
are installed once (`pip install -e` of a pristine copy); at test time the exported tree is first on
`PYTHONPATH`, so the code under test is the patched copy, not the installed one. Packages with compiled
extensions are out of reach of this shortcut; use the Docker backend for them.
"""

from __future__ import annotations

import ast
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
    _shared: str | None = field(default=None, repr=False)

    def shared_python(self) -> str:
        """The fast-path interpreter: the base one when it has pytest, else a venv with just pytest."""
        if self._shared is None:
            if has_pytest(self.base_python):
                self._shared = self.base_python
            else:
                self._shared = self._create(self.root / "shared-pytest", ["pytest"], None)
        return self._shared

    def python_for(self, instance: Instance, tree: Path) -> str:
        """The interpreter to run `instance`'s tests with (`tree` is an export of its base commit)."""
        if self.python:
            return self.python
        requirements = declared_requirements(tree)
        if requirements == []:
            return self.shared_python()
        key = instance.environment_setup_commit or instance.version or instance.base_commit
        return self._create(self.root / repo_slug(instance.repo) / key[:40], ["pytest"], tree)

    def _create(self, venv: Path, packages: list[str], project: Path | None) -> str:
        python = venv / "bin" / "python"
        marker = venv / ".swerl-ready"
        if marker.exists():
            return str(python)
        venv.parent.mkdir(parents=True, exist_ok=True)
        steps = [
            [self.base_python, "-m", "venv", str(venv)],
            [str(python), "-m", "pip", "install", "-q", *packages],
        ]
        if project is not None:
            pristine = venv / "src"
            subprocess.run(["cp", "-a", f"{project}/.", str(pristine)], check=True)
            steps.append([str(python), "-m", "pip", "install", "-q", "-e", str(pristine)])
        for step in steps:
            done = subprocess.run(step, capture_output=True, check=False)
            if done.returncode != 0:
                message = done.stderr.decode(errors="replace")[-2000:]
                raise EnvSetupError(f"creating {venv} failed at {' '.join(step[:5])}: {message}")
        marker.write_text("ok\n", encoding="utf-8")
        return str(python)
