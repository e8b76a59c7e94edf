"""Install recipes inferred from a repository at its base commit and the date of its row.

A repository without a hand-written spec still says how it wants to be installed: which Pythons it
supports (requires-python, trove classifiers, tox's envlist, its CI matrix), what it depends on
(pyproject, setup.py, setup.cfg, requirement files, tox deps) and what its tests need on top (a test
extra such as `.[tests]`, a test requirements file). What it does not say is which releases of all that
existed when the PR was merged; old code breaks under today's releases (numpy 2, pytest 8, setuptools
without distutils), so a recipe carries a cutoff date (`cutoff_of`: the first day of the row's month, or
the row's date for a repository that pins exact releases) and the resolver installs nothing uploaded
after it where the index serves upload times.

Inference gives a short list of recipes, the most faithful first (test extras and requirement files
as of the date, then the bare project as of the date, then no install at all with the code found
through PYTHONPATH, then the bare project with today's releases); `EnvManager` keeps the first whose
environment collects the tests. A recipe is plain data (`Recipe.to_json`), recorded with every
environment and carried by validated rows, so that a later run builds exactly the same environment.

Everything here reads files and git metadata only; nothing runs repository code.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import datetime as dt
import hashlib
import json
import re
import subprocess
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from swerl.errors import UserError
from swerl.path_kinds import is_test_module

PYTHON_RELEASES: dict[str, dt.date] = {
    "2.7": dt.date(2010, 7, 3),
    "3.6": dt.date(2016, 12, 23),
    "3.7": dt.date(2018, 6, 27),
    "3.8": dt.date(2019, 10, 14),
    "3.9": dt.date(2020, 10, 5),
    "3.10": dt.date(2021, 10, 4),
    "3.11": dt.date(2022, 10, 24),
    "3.12": dt.date(2023, 10, 2),
    "3.13": dt.date(2024, 10, 7),
}
"""CPython feature releases this module can choose, with their release dates (python.org)."""

SETTLE = dt.timedelta(days=180)
"""How long after its release a Python counts as the default of a repository that names none: the
ecosystem (wheels, pytest) takes months to catch up with a new interpreter."""

PYTEST_LINES: tuple[tuple[str, dt.date], ...] = (
    ("3.0", dt.date(2016, 8, 18)),
    ("3.3", dt.date(2017, 11, 23)),
    ("3.6", dt.date(2018, 5, 23)),
    ("4.0", dt.date(2018, 11, 13)),
    ("4.6", dt.date(2019, 6, 5)),
    ("5.0", dt.date(2019, 6, 28)),
    ("5.4", dt.date(2020, 3, 12)),
    ("6.0", dt.date(2020, 7, 28)),
    ("6.2", dt.date(2020, 12, 12)),
    ("7.0", dt.date(2022, 2, 3)),
    ("7.2", dt.date(2022, 10, 25)),
    ("7.4", dt.date(2023, 6, 23)),
    ("8.0", dt.date(2024, 1, 27)),
    ("8.3", dt.date(2024, 7, 20)),
    ("8.4", dt.date(2025, 6, 2)),
)
"""pytest release lines and the date of their first release: a recipe takes the line of its date."""

PYTEST_LAST = {"2.7": "5.0", "3.6": "7.1", "3.7": "8.0", "3.8": "8.4"}
"""The first pytest line that no longer supports a Python (its upper bound there)."""

PYTEST_FIRST = {"3.10": "6.2.5", "3.11": "7.1", "3.12": "7.3", "3.13": "8.2"}
"""The first pytest release that runs on a Python (its lower bound there, whatever the date)."""

PYTEST_FLOOR = "4.6"
"""The oldest pytest a recipe takes: the first whose `-rA` summary lists passed tests, which test runs
are graded from. Older dates get the 4.6 line (pytest is installed without the cutoff)."""


@dataclass(frozen=True)
class PytestDependency:
    """A package pytest imports, and the pytest lines that require it (on Linux)."""

    module: str
    """Its import name: a tree with this module or package at its top level (or under `src/`) shadows
    pytest's copy, since the tree comes first on the path (PYTHONPATH, the editable install and the
    working directory of `python -m pytest`)."""
    since: str
    """The first pytest line that requires it."""
    until: str = ""
    """The first pytest line that no longer does (empty: every line since requires it)."""
    python_below: str = ""
    """Required only on Pythons older than this one (empty: on all)."""


PYTEST_DEPENDENCIES: tuple[PytestDependency, ...] = (
    PytestDependency("py", "3.0", "7.2"),
    PytestDependency("six", "3.3", "5.0"),
    PytestDependency("attr", "3.3", "7.3"),
    PytestDependency("pluggy", "3.3"),
    PytestDependency("more_itertools", "3.5", "6.1"),
    PytestDependency("atomicwrites", "3.6", "5.3"),
    PytestDependency("wcwidth", "4.5", "6.0"),
    PytestDependency("packaging", "4.6"),
    PytestDependency("importlib_metadata", "4.6", "8.0", python_below="3.8"),
    PytestDependency("iniconfig", "6.0"),
    PytestDependency("toml", "6.0", "7.0"),
    PytestDependency("tomli", "7.0", python_below="3.11"),
    PytestDependency("exceptiongroup", "7.2", python_below="3.11"),
    PytestDependency("pygments", "8.4"),
)
"""pytest's own dependencies, from its setup.py, setup.cfg and pyproject.toml at each release's tag (those
of Windows and of Pythons older than 3.6 left out). A repository that is one of them (more-itertools, six,
attrs) shadows pytest's copy with its own code of the row's date, which a pytest of a later date cannot
import (more-itertools of 2016 lacks `always_iterable`, which pytest 4.6 imports; attrs of 2015 lacks
`frozen`): such a repository gets the pytest line nearest its date that does not import it."""

TEST_EXTRAS = ("test", "tests", "testing", "dev")
"""Extras that hold what the tests need, in the order they are preferred."""

_REQUIREMENT_FILES = (
    "requirements.txt",
    "requirements-test.txt",
    "requirements_test.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-dev.txt",
    "requirements_dev.txt",
    "dev-requirements.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "requirements/testing.txt",
    "requirements/dev.txt",
    "requirements/base.txt",
)
_VERSION = re.compile(r"(?<![\d.])([23]\.\d{1,2})(?![\d.])")
_CLASSIFIER = re.compile(r"Programming Language :: Python :: ([23]\.\d{1,2})\b")
_TOX_ENV = re.compile(r"\bpy([23])(\d{1,2})\b")
_TOX_FACTOR = re.compile(r"^[\w,-]+:\s")
"""A tox deps line that applies to some environments only (`py26: unittest2`)."""
COMPILED_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".pyx", ".pxd", ".pxi")
"""Sources of compiled extensions (C, C++, Cython): a tree whose extensions were built from them needs
them built again once a patch changes one (`LocalBackend`), and a project with them is keyed by its
base commit (`Recipe.sources`)."""


@dataclass(frozen=True)
class Recipe:
    """How one environment is built: the Python version, pytest of the date, pip requirements installed
    next (requirement files, tox deps; runtime dependencies where the project is not installed), what of
    the project is installed (`-e .`, `-e .[tests]`, or
    nothing: the code is found through PYTHONPATH), and the upload cutoff of the resolution."""

    name: str
    python: str
    pytest: str = "pytest"
    """pytest's requirement, installed first and without the cutoff (see `PYTEST_FLOOR`)."""
    requirements: tuple[str, ...] = ()
    install: str = ""
    """`editable` (the project installed in editable mode with its dependencies) or empty (nothing
    installed: the code is found through PYTHONPATH)."""
    extra: str = ""
    """The project's extra installed with it (`tests` for `.[tests]`)."""
    cutoff: str = ""
    """ISO date; nothing uploaded on or after it is installed (where the resolver can tell)."""
    sources: str = ""
    """Digest of the files the install reads (setup.py, setup.cfg, pyproject.toml) and, for projects
    with compiled extensions, of the base commit: installed artifacts (egg-info with the version, built
    extensions) are copied into every tree the environment tests, so they must be those of its code."""

    def key(self) -> str:
        """The environment's identity: rows whose recipes agree share one environment."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    def to_json(self) -> str:
        """The recipe as recorded in a validated row (`env_recipe`) and read back by `recipe_from_json`."""
        return json.dumps(asdict(self) | {"requirements": list(self.requirements)}, sort_keys=True)


def recipe_from_json(text: str) -> Recipe:
    """A recorded recipe (a row's `env_recipe`); a malformed one is the row's error, not a guess."""
    try:
        raw = json.loads(text)
        recipe = Recipe(**{**raw, "requirements": tuple(raw.get("requirements", ()))})
    except (json.JSONDecodeError, TypeError) as err:
        raise UserError(
            f"env_recipe is not a recipe this version of swerl reads: {err}: {text[:200]}"
        ) from err
    if recipe.python not in PYTHON_RELEASES:
        raise UserError(f"env_recipe names Python {recipe.python!r}, not one of {', '.join(PYTHON_RELEASES)}")
    return recipe


def row_date(created_at: object, tree: Path) -> dt.date:
    """The date a row's environment is resolved at: its `created_at` (the PR's merge date in SWE-bench
    rows), else the base commit's committer date, else today."""
    if isinstance(created_at, dt.datetime):
        return created_at.date()
    if isinstance(created_at, dt.date):
        return created_at
    text = str(created_at or "").strip()
    if text:
        try:
            return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).date()
        except ValueError:
            pass
    if (tree / ".git").exists():
        done = subprocess.run(
            ["git", "-C", str(tree), "log", "-1", "--format=%cs"], capture_output=True, text=True, check=False
        )
        with_date = done.stdout.strip()
        if done.returncode == 0 and with_date:
            return dt.date.fromisoformat(with_date)
    return dt.date.today()


@dataclass(frozen=True)
class Declarations:
    """What a repository states about its Python and dependencies, read statically."""

    requires_python: str = ""
    listed_pythons: tuple[str, ...] = ()
    """Versions named by classifiers, else tox's envlist, else the CI matrix (the first that names any)."""
    listed_from: str = ""
    runtime: tuple[str, ...] | None = ()
    """Runtime requirements; None when setup.py computes them (they are then known only to its install)."""
    test_extra: str = ""
    test_requirements: tuple[str, ...] = ()
    """Lines of the test and development requirement files and tox's deps, options and the project
    itself left out."""
    installable: bool = False
    compiled: bool = False
    sources: str = ""
    shadows: tuple[str, ...] = ()
    """Modules of `PYTEST_DEPENDENCIES` the tree has at its top level (its own code shadows pytest's)."""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _literal_keyword(setup_py: str, name: str) -> Any:
    """The literal value of `name=` in a setup.py's call, directly or through a module-level name
    bound to a literal (`EXTRAS_REQUIRE = {...}`, `setup(extras_require=EXTRAS_REQUIRE)`); None when
    absent or computed."""
    try:
        tree = ast.parse(setup_py)
    except SyntaxError:
        return None
    bound = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == name:
            value = bound.get(node.value.id, node.value) if isinstance(node.value, ast.Name) else node.value
            try:
                return ast.literal_eval(value)
            except ValueError:
                return None
    return None


def _requirement_lines(path: Path, seen: set[Path] | None = None) -> list[str]:
    """Requirements of a pip requirements file, following `-r` includes; options, editable and local
    paths (the project itself) are left out: the recipe installs the project its own way."""
    seen = seen if seen is not None else set()
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    lines: list[str] = []
    for raw in _read(path).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            lines += _requirement_lines(path.parent / line.split(None, 1)[1], seen)
        elif line and not line.startswith(("#", "-", ".", "/", "file:")):
            lines.append(line)
    return lines


def _cfg(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with contextlib.suppress(configparser.Error):
        parser.read_string(_read(path))
    return parser


def _cfg_list(value: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]


def _ci_versions(root: Path) -> list[str]:
    """Python versions a CI configuration runs (Travis `python:` entries, GitHub Actions matrices)."""
    files = [root / ".travis.yml", *sorted((root / ".github" / "workflows").glob("*.y*ml"))]
    found: list[str] = []
    for path in files:
        in_python = False
        for line in _read(path).splitlines():
            stripped = line.strip()
            if "python" in stripped.lower() and ":" in stripped:
                in_python = True
                found += _VERSION.findall(stripped.split(":", 1)[1])
            elif in_python and stripped.startswith("-"):
                found += _VERSION.findall(stripped)
            elif stripped:
                in_python = False
    return found


def read_declarations(root: Path) -> Declarations:
    """Everything `recipes_for` needs from the tree at the base commit, read without running it."""
    pyproject_text = _read(root / "pyproject.toml")
    try:
        pyproject = tomllib.loads(pyproject_text) if pyproject_text else {}
    except tomllib.TOMLDecodeError:
        pyproject = {}
    project = pyproject.get("project", {}) or {}
    setup_py = _read(root / "setup.py")
    setup_cfg = _cfg(root / "setup.cfg")
    tox = _cfg(root / "tox.ini")

    requires_python = str(project.get("requires-python") or "")
    requires_python = requires_python or setup_cfg.get("options", "python_requires", fallback="")
    literal = _literal_keyword(setup_py, "python_requires") if setup_py else None
    requires_python = requires_python or (literal if isinstance(literal, str) else "")

    listed, listed_from = [], ""
    for source, versions in (
        ("classifiers", _CLASSIFIER.findall(pyproject_text + setup_py + _read(root / "setup.cfg"))),
        ("tox.ini", [f"{a}.{b}" for a, b in _TOX_ENV.findall(tox.get("tox", "envlist", fallback=""))]),
        ("CI", _ci_versions(root)),
    ):
        if versions:
            listed, listed_from = sorted(set(versions), key=_version_tuple), source
            break

    runtime: list[str] | None = list(project.get("dependencies", []) or [])
    extras: Mapping[str, Any] = dict(project.get("optional-dependencies", {}) or {})
    if setup_py:
        requires = _literal_keyword(setup_py, "install_requires")
        dynamic = "install_requires" in setup_py and not isinstance(requires, list | tuple)
        runtime = None if dynamic else [*runtime, *(requires or ())]
        setup_extras = _literal_keyword(setup_py, "extras_require")
        extras = {**extras, **(setup_extras if isinstance(setup_extras, dict) else {})}
    if setup_cfg.has_section("options") and runtime is not None:
        runtime += _cfg_list(setup_cfg.get("options", "install_requires", fallback=""))
    if setup_cfg.has_section("options.extras_require"):
        extras = {**extras, **dict(setup_cfg.items("options.extras_require"))}
    test_extra = next((name for name in TEST_EXTRAS if name in extras), "")

    test_requirements = [line for name in _REQUIREMENT_FILES[1:] for line in _requirement_lines(root / name)]
    for section in ("testenv", "testenv:py", "testenv:test", "testenv:tests"):
        for line in _cfg_list(tox.get(section, "deps", fallback="")):
            if not line.startswith(("-", ".")) and "{" not in line and not _TOX_FACTOR.match(line):
                test_requirements.append(line)
    if runtime is not None:
        runtime += _requirement_lines(root / "requirements.txt")

    installable = bool(setup_py) or "build-system" in pyproject or bool(project)
    compiled = installable and any(
        path.suffix in COMPILED_SUFFIXES
        for top in ("src", *_package_dirs(root))
        for path in (root / top).rglob("*")
    )
    sources = hashlib.sha256(
        b"\0".join(_read(root / n).encode() for n in ("setup.py", "setup.cfg", "pyproject.toml"))
    ).hexdigest()[:12]
    tops = [root, root / "src"]
    shadows = [
        dep.module
        for dep in PYTEST_DEPENDENCIES
        if any(
            (top / dep.module / "__init__.py").is_file() or (top / f"{dep.module}.py").is_file()
            for top in tops
        )
    ]
    return Declarations(
        requires_python=requires_python,
        listed_pythons=tuple(listed),
        listed_from=listed_from,
        runtime=None if runtime is None else tuple(dict.fromkeys(runtime)),
        test_extra=test_extra,
        test_requirements=tuple(dict.fromkeys(test_requirements)),
        installable=installable,
        compiled=compiled,
        sources=sources,
        shadows=tuple(shadows),
    )


def _package_dirs(root: Path) -> list[str]:
    """Top-level directories that hold Python code (where C sources of extensions usually live)."""
    return [p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()]


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _usable(decl: Declarations, available: Sequence[str]) -> list[str]:
    """The versions among `available` that the repository's requires-python allows, oldest first."""
    try:
        allowed = SpecifierSet(decl.requires_python or "")
    except InvalidSpecifier:
        allowed = SpecifierSet()
    return sorted((v for v in available if allowed.contains(f"{v}.0")), key=_version_tuple)


def choose_python(
    decl: Declarations, when: dt.date, available: Sequence[str], preferred: str = ""
) -> tuple[str, str]:
    """(version, why): the Python the repository's declarations allow at `when`, among `available`.

    requires-python filters; the versions the repository lists (classifiers, tox, CI) decide, the
    newest of them released by `when` (the oldest where none was); a repository listing only versions
    this machine lacks gets the next newer one it has. One listing nothing gets the newest Python
    settled by `when`, or `preferred` (the running interpreter, which needs no build) where that one
    qualifies too."""
    usable = _usable(decl, available)
    if not usable:
        raise UserError(
            f"no Python here satisfies requires-python {decl.requires_python!r} "
            f"(this machine has {', '.join(available) or 'none'})"
        )
    if decl.listed_pythons:
        listed = [v for v in usable if v in decl.listed_pythons]
        dated = [v for v in listed if PYTHON_RELEASES[v] <= when]
        if dated:
            return dated[-1], f"the newest listed by {decl.listed_from} at {when}"
        if listed:
            return listed[0], f"the oldest listed by {decl.listed_from} (none existed at {when})"
        newest_listed = _version_tuple(decl.listed_pythons[-1])
        newer = [v for v in usable if _version_tuple(v) > newest_listed]
        if newer:
            return newer[0], f"{decl.listed_from} lists only older Pythons than this machine has"
    settled = [v for v in usable if PYTHON_RELEASES[v] + SETTLE <= when]
    if preferred in settled:
        return preferred, f"the running interpreter, settled at {when}"
    if settled:
        return settled[-1], f"the newest Python settled at {when}"
    return usable[0], f"the oldest Python here (none was settled at {when})"


def pytest_requirement(python: str, when: dt.date, shadows: Sequence[str] = ()) -> str:
    """pytest as of `when`: below the first line released after the date, within what `python` runs,
    and never older than `PYTEST_FLOOR` (then within the floor's line). A tree that `shadows` some of
    pytest's dependencies gets the line nearest the date that requires none of them (`pytest_without`)
    where `python` runs one, else the date's line all the same."""
    return pytest_without(python, when, shadows) or pytest_without(python, when, ())


def pytest_without(python: str, when: dt.date, shadows: Sequence[str]) -> str:
    """The requirement of the pytest line nearest `when` that `python` runs and that requires none of
    the modules in `shadows` (see `PYTEST_DEPENDENCIES`); empty when every such line requires one.

    The date's range (from the floor up to the first line released after the date) when none of its
    lines requires them; else its newest line that requires none; else the oldest later one."""
    lower = max(PYTEST_FLOOR, PYTEST_FIRST.get(python, PYTEST_FLOOR), key=_version_tuple)
    upper = next((line for line, first in PYTEST_LINES if first > when), "")
    last = PYTEST_LAST.get(python, "")
    if last and (not upper or _version_tuple(last) < _version_tuple(upper)):
        upper = last
    if upper and _version_tuple(upper) <= _version_tuple(lower):
        upper = next((line for line, _ in PYTEST_LINES if _version_tuple(line) > _version_tuple(lower)), "")
    deps = [
        dep
        for dep in PYTEST_DEPENDENCIES
        if dep.module in shadows
        and (not dep.python_below or _version_tuple(python) < _version_tuple(dep.python_below))
    ]

    def requires(line: str) -> bool:
        return any(
            _version_tuple(dep.since) <= _version_tuple(line)
            and (not dep.until or _version_tuple(line) < _version_tuple(dep.until))
            for dep in deps
        )

    # Consecutive bounds delimit lines that require the same dependencies; those `python` runs count.
    bounds = {lower, upper, last, *(line for line, _ in PYTEST_LINES)}
    bounds |= {bound for dep in deps for bound in (dep.since, dep.until)}
    ordered = sorted(
        (b for b in bounds if b and _version_tuple(b) >= _version_tuple(lower)), key=_version_tuple
    )
    segments = [
        (start, end)
        for start, end in zip(ordered, [*ordered[1:], ""], strict=True)
        if not (last and _version_tuple(start) >= _version_tuple(last))
    ]
    dated = [s for s in segments if not upper or _version_tuple(s[0]) < _version_tuple(upper)]
    if not any(requires(start) for start, _ in dated):
        return f"pytest>={lower}" + (f",<{upper}" if upper else "")
    free = [s for s in segments if not requires(s[0])]
    if not free:
        return ""
    free_dated = [s for s in free if s in dated]
    start, end = free_dated[-1] if free_dated else free[0]
    return f"pytest>={start}" + (f",<{end}" if end else "")


def cutoff_of(when: dt.date, pinned: bool = False) -> str:
    """The upload cutoff of a row's date: the first day of its month, so that rows of one month share
    their environments while nothing newer than the date is installed; the date itself for a
    repository that pins exact releases (`==`), since a pin may name one from earlier that month (the
    base commit, and so its pins, predate the row's date)."""
    return (when if pinned else when.replace(day=1)).isoformat()


def recipes_for(
    tree: Path,
    when: dt.date,
    available: Sequence[str],
    *,
    preferred: str = "",
    base_commit: str = "",
    dated: bool = True,
) -> list[Recipe]:
    """The recipes to try for the repository at `tree`, most faithful first (see the module docstring).

    `dated` False (installs from a wheelhouse, which is the resolution) leaves out the cutoff, the
    pytest bounds and the recipe with today's releases."""
    decl = read_declarations(tree)
    python, _why = choose_python(decl, when, available, preferred)
    if dated and not pytest_without(python, when, decl.shadows):
        # No pytest that this Python runs leaves the tree's own copy of its dependency alone (attrs of
        # 2015 under 3.6): the oldest newer Python that runs one, where the repository allows it.
        newer = (v for v in _usable(decl, available) if _version_tuple(v) > _version_tuple(python))
        python = next((v for v in newer if pytest_without(v, when, decl.shadows)), python)
    pytest_pin = pytest_requirement(python, when, decl.shadows) if dated else "pytest"
    pinned = any("==" in line for line in (*(decl.runtime or ()), *decl.test_requirements))
    cutoff = cutoff_of(when, pinned) if dated else ""
    sources = decl.sources + (f"@{base_commit[:12]}" if decl.compiled else "")
    recipes: list[Recipe] = []
    common = {"python": python, "pytest": pytest_pin}
    editable = {**common, "install": "editable", "sources": sources}
    if decl.installable:
        if decl.test_extra or decl.test_requirements:
            test = {"requirements": decl.test_requirements, "extra": decl.test_extra}
            recipes.append(Recipe("test-extras", **editable, **test, cutoff=cutoff))
        recipes.append(Recipe("editable", **editable, cutoff=cutoff))
    requirements = (*(decl.runtime or ()), *decl.test_requirements)
    recipes.append(Recipe("pythonpath", **common, requirements=requirements, cutoff=cutoff))
    if decl.installable and dated:
        recipes.append(Recipe("editable-today", **editable))
    return recipes


def collect_targets(tree: Path, tests: Iterable[str], test_patch: str) -> list[str]:
    """What the collection check hands pytest: the row's test modules that exist at the base commit
    (from its test lists and its test patch; a conftest.py or helper holds no tests to collect), else
    the usual test directories, else the tree."""
    names = [t.split("::", 1)[0] for t in tests]
    names += re.findall(r"^diff --git a/(\S+) b/", test_patch, flags=re.MULTILINE)
    present = [n for n in dict.fromkeys(names) if is_test_module(n) and (tree / n).is_file()]
    if present:
        return present
    return [d for d in ("tests", "test", "testing") if (tree / d).is_dir()] or ["."]
