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
import shlex
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from swerl.edit_format.patch import PatchApplyError, apply_patch_to_contents
from swerl.errors import UserError
from swerl.execution.uninstalled import install_outputs, read_or_empty, setup_literal
from swerl.path_kinds import is_test_module, is_vendored_path

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

_NOT_FOR_TESTS = re.compile(
    r"doc|lint|flake|pep8|style|mypy|typ(e|ing)|format|black|isort|release|publish|bench|py2\d|pypy|jython"
)
"""Requirement files and tox environments of other jobs than the tests (docs, linters, releases) or of
other interpreters (`[testenv:py26]`'s unittest2, a PyPy's): what they install is not what these
tests import here, and an old release of one that fails to build would sink the recipe that installs
the test requirements."""


def requirement_files(root: Path) -> list[Path]:
    """The test and development requirement files of a tree, whatever their names: `*req*.txt` at the
    root (requirements-test.txt, test_requirements.txt, dev-requirements.txt, reqs.txt, ...) and the
    .txt files of a `requirements*/` folder, the runtime requirements.txt and those of other jobs
    (`_NOT_FOR_TESTS`) left out. (Files elsewhere count where the CI installs them: `ci_requirements`.)"""
    found = [*root.glob("*req*.txt"), *(p for d in root.glob("requirements*/") for p in d.glob("*.txt"))]
    return sorted(
        p
        for p in dict.fromkeys(found)
        if p.is_file()
        and p.relative_to(root).as_posix() != "requirements.txt"
        and not _NOT_FOR_TESTS.search(p.relative_to(root).as_posix().lower())
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

    decisions: tuple[str, ...] = ()
    """Why the recipe is what it is where that is not the default (the Python 2.7 of Python 2 code,
    test requirements the row's own patches add, pytest's configuration handed over): recorded with
    the row, not part of the environment's identity."""

    def key(self) -> str:
        """The environment's identity: rows whose recipes agree share one environment."""
        what = asdict(self) | {"requirements": list(self.requirements)}
        what.pop("decisions")
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]

    def to_json(self) -> str:
        """The recipe as recorded in a validated row (`env_recipe`) and read back by `recipe_from_json`
        (without `decisions` where there are none, as recipes were written before they were kept)."""
        raw = asdict(self) | {"requirements": list(self.requirements), "decisions": list(self.decisions)}
        if not self.decisions:
            raw.pop("decisions")
        return json.dumps(raw, sort_keys=True)


def recipe_from_json(text: str) -> Recipe:
    """A recorded recipe (a row's `env_recipe`); a malformed one is the row's error, not a guess."""
    try:
        raw = json.loads(text)
        recipe = Recipe(
            **{
                **raw,
                "requirements": tuple(raw.get("requirements", ())),
                "decisions": tuple(raw.get("decisions", ())),
            }
        )
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
    test_extra_requirements: tuple[str, ...] = ()
    """The requirements of `test_extra` where they are literal."""
    test_requirements: tuple[str, ...] = ()
    """Lines of the test and development requirement files and tox's deps, options and the project
    itself left out."""
    installable: bool = False
    compiled: bool = False
    sources: str = ""
    shadows: tuple[str, ...] = ()
    released: tuple[str, ...] = ()
    """Requirements named by a URL (`git+https://...#egg=PyTidyLib`), replaced by the name of their
    released package (`released`), or `URL left out` where the URL names none."""
    """Modules of `PYTEST_DEPENDENCIES` the tree has at its top level (its own code shadows pytest's)."""


def _requirement_lines(path: Path, seen: set[Path] | None = None) -> list[str]:
    """Requirements of a pip requirements file, following `-r` includes; options, editable and local
    paths (the project itself) are left out: the recipe installs the project its own way."""
    seen = seen if seen is not None else set()
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    lines: list[str] = []
    for raw in read_or_empty(path).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line.startswith(("-r ", "--requirement ")):
            lines += _requirement_lines(path.parent / line.split(None, 1)[1], seen)
        elif line and not line.startswith(("#", "-", ".", "/", "file:")):
            lines.append(line)
    return lines


def _cfg(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    with contextlib.suppress(configparser.Error):
        parser.read_string(read_or_empty(path))
    return parser


def _cfg_list(value: str) -> list[str]:
    """The lines of a multi-line ini value, comments left out: a `#` that starts the line or follows
    white space (a URL's `#egg=NAME` is no comment)."""
    lines = (re.split(r"(?:^|\s)#", line, maxsplit=1)[0].strip() for line in value.splitlines())
    return [line for line in lines if line]


def _ci_versions(root: Path) -> list[str]:
    """Python versions a CI configuration runs (Travis `python:` entries, GitHub Actions matrices)."""
    files = [root / ".travis.yml", *sorted((root / ".github" / "workflows").glob("*.y*ml"))]
    found: list[str] = []
    for path in files:
        in_python = False
        for line in read_or_empty(path).splitlines():
            stripped = line.strip()
            if "python" in stripped.lower() and ":" in stripped:
                in_python = True
                found += _VERSION.findall(stripped.split(":", 1)[1])
            elif in_python and stripped.startswith("-"):
                found += _VERSION.findall(stripped)
            elif stripped:
                in_python = False
    return found


PLUGIN_OPTIONS = (
    ("--cov", "pytest-cov"),
    ("--pep8", "pytest-pep8"),
    ("--flakes", "pytest-flakes"),
    ("--flake8", "pytest-flake8"),
    ("--mypy", "pytest-mypy"),
    ("--isort", "pytest-isort"),
    ("--black", "pytest-black"),
    ("--timeout", "pytest-timeout"),
    ("--benchmark-", "pytest-benchmark"),
)
"""Options of pytest's widespread plugins and the plugin that defines each: pytest stops with a usage
error (`unrecognized arguments: --cov=.`) at an option in `addopts` whose plugin is not installed."""


def pytest_addopts(root: Path) -> str:
    """The `addopts` of the configuration pytest reads at the tree's root: pytest.ini (or .pytest.ini),
    pyproject's `[tool.pytest.ini_options]`, tox.ini's `[pytest]`, setup.cfg's `[tool:pytest]` or
    `[pytest]`."""
    for name in ("pytest.ini", ".pytest.ini"):
        if (root / name).is_file():
            return _cfg(root / name).get("pytest", "addopts", fallback="")
    try:
        table = tomllib.loads(read_or_empty(root / "pyproject.toml")).get("tool", {}).get("pytest", {})
    except tomllib.TOMLDecodeError:
        table = {}
    if isinstance(table, dict) and "ini_options" in table:
        value = table["ini_options"].get("addopts", "")
        return " ".join(value) if isinstance(value, list) else str(value)
    tox = _cfg(root / "tox.ini")
    if tox.has_section("pytest"):
        return tox.get("pytest", "addopts", fallback="")
    setup_cfg = _cfg(root / "setup.cfg")
    section = next((s for s in ("tool:pytest", "pytest") if setup_cfg.has_section(s)), "")
    return setup_cfg.get(section, "addopts", fallback="") if section else ""


def plugin_requirements(root: Path) -> list[str]:
    """The plugins that the options of the tree's own pytest `addopts` need (`PLUGIN_OPTIONS`): the
    test setup of the date, which its CI installed from somewhere this tree may not say."""
    options = pytest_addopts(root).split()
    return [plugin for option, plugin in PLUGIN_OPTIONS if any(o.startswith(option) for o in options)]


def ci_files(root: Path) -> list[Path]:
    """The CI configurations of a tree (Travis, AppVeyor, GitHub Actions), where they exist."""
    found = [
        root / ".travis.yml",
        root / "appveyor.yml",
        *sorted((root / ".github" / "workflows").glob("*.y*ml")),
    ]
    return [p for p in found if p.is_file()]


_PIP_OPTIONS_WITH_VALUE = frozenset(
    {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "-f"}
    | {"--extra-index-url", "--find-links", "-t", "--target", "--prefix", "--root", "--src"}
)
"""pip install's options that take a value (a file, a URL, a folder), which is no requirement."""
_REQUIREMENT_WORD = re.compile(
    r"[A-Za-z0-9][\w.-]*(\[[\w,.-]+\])?([<>=!~]=?[\w.*+!-]+(,[<>=!~]=?[\w.*+!-]+)*)?"
)
_CI_TOOLS = re.compile(
    r"(pip|setuptools|wheel|tox(-[\w-]+)?|virtualenv|twine|(python-)?coveralls|codecov|pre-commit|check-manifest"
    r"|bump2?version|sphinx[\w-]*|mkdocs[\w-]*)",
    re.IGNORECASE,
)
"""What CI files install for the CI itself, its releases and its docs: not what the tests import."""


def _ci_requirement_file(root: Path, name: str) -> list[str]:
    """The lines of a requirement file the CI installs (`pip install -r tests/reqs.txt`), where it is
    one of the tree's and not the runtime requirements.txt or another job's (docs, linters)."""
    path = (root / name).resolve()
    inside = path.is_relative_to(root.resolve()) and path.is_file()
    relative = path.relative_to(root.resolve()).as_posix() if inside else ""
    if not inside or relative == "requirements.txt" or _NOT_FOR_TESTS.search(relative.lower()):
        return []
    return _requirement_lines(path)


def ci_requirements(root: Path) -> list[str]:
    """Packages the CI installs for the tests by name (`pip install pep8 mock` in .travis.yml) or from a
    requirement file (`pip install -r tests/reqs.txt`): the test requirements of repositories that
    declare them nowhere else (their tests import them all the same). Conditional lines (another
    interpreter's `unittest2`), variables, paths and the CI's own tools (`_CI_TOOLS`) are left out,
    and pytest, which the recipe chooses."""
    found: list[str] = []
    for path in ci_files(root):
        for raw in read_or_empty(path).splitlines():
            line = raw.strip().removeprefix("-").strip().removeprefix("run:").strip()
            if len(line) > 1 and line[0] == line[-1] and line[0] in "'\"":
                line = line[1:-1]  # a quoted YAML scalar
            if "pip" not in line or re.search(r"\bif\b|\[\[|\$\{\{", line):
                continue
            for command in re.split(r"&&|;|\|\|", line):
                try:
                    words = shlex.split(command)
                except ValueError:
                    continue
                at = next(
                    (i for i, w in enumerate(words[:-1]) if re.fullmatch(r"(.*/)?pip[23]?(\.\d+)?", w)),
                    -1,
                )
                if at < 0 or words[at + 1] != "install":
                    continue
                skip = False
                for previous, word in zip(words[at + 1 :], words[at + 2 :], strict=False):
                    if previous in ("-r", "--requirement"):
                        found += _ci_requirement_file(root, word)
                    if skip or word.startswith("-"):
                        skip = not skip and word in _PIP_OPTIONS_WITH_VALUE
                        continue
                    if _REQUIREMENT_WORD.fullmatch(word) and not _CI_TOOLS.fullmatch(
                        re.split(r"[<>=!~\[]", word, maxsplit=1)[0]
                    ):
                        found.append(word)
    return [r for r in dict.fromkeys(found) if not _is_pytest(r)]


_URL = re.compile(r"^(\w+\+)?\w+://|^(\w+\+)\w+:|\s@\s")
"""A requirement given as a URL (a VCS checkout, an archive) or a PEP 508 direct reference."""


def released(requirement: str) -> str:
    """A requirement as the release resolver can take as of a date: one named by a URL becomes the
    name it gives its package (`#egg=NAME`, `NAME @ URL`), which is resolved like any other; one that
    names none is left out (empty). A URL installs the branch as it is today, not as it was at the
    row's date, and needs a network the index may be the only way out to."""
    if not _URL.search(requirement):
        return requirement
    direct = re.match(r"^\s*([A-Za-z0-9][\w.-]*)(\[[^\]]*\])?\s*@\s", requirement)
    if direct:
        return direct.group(1) + (direct.group(2) or "")
    egg = re.search(r"[#&]egg=([A-Za-z0-9][\w.]*(?:-(?!\d)[\w.]+)*)", requirement)
    return egg.group(1) if egg else ""


def read_declarations(root: Path) -> Declarations:
    """Everything `recipes_for` needs from the tree at the base commit, read without running it."""
    pyproject_text = read_or_empty(root / "pyproject.toml")
    try:
        pyproject = tomllib.loads(pyproject_text) if pyproject_text else {}
    except tomllib.TOMLDecodeError:
        pyproject = {}
    project = pyproject.get("project", {}) or {}
    setup_py = read_or_empty(root / "setup.py")
    setup_cfg = _cfg(root / "setup.cfg")
    tox = _cfg(root / "tox.ini")

    requires_python = str(project.get("requires-python") or "")
    requires_python = requires_python or setup_cfg.get("options", "python_requires", fallback="")
    literal = setup_literal(setup_py, "python_requires") if setup_py else None
    requires_python = requires_python or (literal if isinstance(literal, str) else "")

    listed, listed_from = [], ""
    for source, versions in (
        ("classifiers", _CLASSIFIER.findall(pyproject_text + setup_py + read_or_empty(root / "setup.cfg"))),
        ("tox.ini", [f"{a}.{b}" for a, b in _TOX_ENV.findall(tox.get("tox", "envlist", fallback=""))]),
        ("CI", _ci_versions(root)),
    ):
        if versions:
            listed, listed_from = sorted(set(versions), key=_version_tuple), source
            break

    runtime: list[str] | None = list(project.get("dependencies", []) or [])
    extras: Mapping[str, Any] = dict(project.get("optional-dependencies", {}) or {})
    if setup_py:
        requires = setup_literal(setup_py, "install_requires")
        dynamic = "install_requires" in setup_py and not isinstance(requires, list | tuple)
        runtime = None if dynamic else [*runtime, *(requires or ())]
        setup_extras = setup_literal(setup_py, "extras_require")
        extras = {**extras, **(setup_extras if isinstance(setup_extras, dict) else {})}
    if setup_cfg.has_section("options") and runtime is not None:
        runtime += _cfg_list(setup_cfg.get("options", "install_requires", fallback=""))
    if setup_cfg.has_section("options.extras_require"):
        extras = {**extras, **dict(setup_cfg.items("options.extras_require"))}
    test_extra = next((name for name in TEST_EXTRAS if name in extras), "")

    test_requirements = [line for path in requirement_files(root) for line in _requirement_lines(path)]
    tests_require = setup_literal(setup_py, "tests_require") if setup_py else None
    if isinstance(tests_require, list | tuple):
        test_requirements += [str(line) for line in tests_require]
    test_requirements += _cfg_list(setup_cfg.get("options", "tests_require", fallback=""))
    test_requirements += plugin_requirements(root)
    test_requirements += ci_requirements(root)
    for section in tox.sections():
        if section != "testenv" and not (
            section.startswith("testenv:") and not _NOT_FOR_TESTS.search(section.lower())
        ):
            continue
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
        b"\0".join(read_or_empty(root / n).encode() for n in ("setup.py", "setup.cfg", "pyproject.toml"))
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
        runtime=None if runtime is None else tuple(dict.fromkeys(filter(None, map(released, runtime)))),
        test_extra=test_extra,
        test_extra_requirements=tuple(_as_lines(extras.get(test_extra, ()))),
        test_requirements=tuple(
            dict.fromkeys(r for r in filter(None, map(released, test_requirements)) if not _is_pytest(r))
        ),
        released=tuple(
            dict.fromkeys(
                released(r) or f"{r} left out"
                for r in [*(runtime or ()), *test_requirements]
                if released(r) != r
            )
        ),
        installable=installable,
        compiled=compiled,
        sources=sources,
        shadows=tuple(shadows),
    )


def _as_lines(value: Any) -> list[str]:
    """An extra's requirements as lines, whether a list (setup.py, pyproject) or a setup.cfg value."""
    if isinstance(value, str):
        return _cfg_list(value)
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


PYTEST_OWN = ("pytest", "py.test", "py", "pluggy")
"""pytest and the packages only pytest uses: the recipe chooses them by the date. A repository's own
pins of its old pytest (`pytest==2.5.2`, `py==1.4.17`) would replace them with releases that cannot
grade the runs, or that the chosen pytest cannot run with (pytest 4.6 calls `py`'s
`chars_on_current_line`, which 1.4 lacks: an INTERNALERROR in every run)."""


def _is_pytest(requirement: str) -> bool:
    """Whether a requirement line names pytest or a package only pytest uses (`PYTEST_OWN`)."""
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower() in PYTEST_OWN


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


PYTHON2_END = dt.date(2020, 1, 1)
"""Python 2's end of life: code of a later date that does not parse is newer Python than this
interpreter reads, not Python 2."""

PYTHON2_ONLY_MODULES = frozenset(
    [
        "urllib2",
        "urlparse",
        "StringIO",
        "cStringIO",
        "cPickle",
        "ConfigParser",
        "Queue",
        "httplib",
        "HTMLParser",
        "__builtin__",
        "commands",
        "Cookie",
        "cookielib",
        "xmlrpclib",
        "SocketServer",
        "thread",
        "md5",
        "sets",
        "exceptions",
    ]
)
"""Standard modules that Python 3 renamed or removed: importing one at import time is Python 2 code."""

_PYTHON2_SCAN_FILES = 2000
"""At most this many files are parsed for Python 2 evidence (the first found ends the scan)."""


def _import_time_imports(body: Sequence[ast.stmt]) -> Iterable[ast.Import | ast.ImportFrom]:
    """The imports a module always runs when it is imported: at its top level, in `with` blocks and
    class bodies there; not in functions (a branch run rarely, if ever), `if` blocks (`if PY2: import
    Queue`, the switch of code that runs on both) nor `try` blocks (a fallback such as `except
    ImportError`, which names one Python's module as the first choice)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _import_time_imports(node.body)


def _python2_import(path: Path, root: Path, module: ast.Module) -> str:
    """Evidence of Python 2 in the imports a module runs when imported (`_import_time_imports`): a
    module Python 3 renamed, or an implicit relative import (`import sibling` inside a package, which
    Python 3 reads as absolute)."""
    package = path.parent if (path.parent / "__init__.py").is_file() else None
    future = {
        a.name
        for n in module.body
        if isinstance(n, ast.ImportFrom) and n.module == "__future__"
        for a in n.names
    }
    if "absolute_import" in future:
        package = None  # Python 2 reads its imports as Python 3 does
    for node in _import_time_imports(module.body):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            top = name.split(".")[0]
            where = f"{path.relative_to(root)}:{node.lineno}"
            if top in PYTHON2_ONLY_MODULES:
                return f"imports {top}, a Python 2 module ({where})"
            sibling = package is not None and (
                (package / f"{top}.py").is_file() or (package / top / "__init__.py").is_file()
            )
            absolute = any(
                (base / f"{top}.py").is_file() or (base / top / "__init__.py").is_file()
                for base in (root, root / "src")
            )
            # A sibling named as a standard module (funcy's `types.py`) is what Python 3 does not
            # import: code that runs on both means the standard one.
            if sibling and not absolute and top not in sys.stdlib_module_names:
                return f"implicit relative import of {top} ({where})"
    return ""


_NOT_THE_CODE = frozenset(("setup.py", "ez_setup.py", "distribute_setup.py", "bootstrap.py", "fabfile.py"))
"""Scripts at a tree's root that are not the code its tests import: setup.py, and bootstrap scripts
copied into many projects (setuptools' ez_setup.py downloads with `urllib2` in a function)."""


def _is_test_file(name: str) -> bool:
    """A module a test run collects or starts from: its name says test (`test_x.py`, `x_test.py`,
    jsonpickle's `util_tests.py` and `runtests.py`), or it is pytest's conftest.py or a package's
    __init__.py."""
    return "test" in name or name in ("conftest.py", "__init__.py")


_TEST_DIRS = ("tests", "test", "testing")

_NOT_IMPORTED_DIRS = re.compile(r"bench|docs?$|examples?$")
"""Top-level packages of benchmarks, documentation and examples, which the tests do not import."""


def _code_files(root: Path) -> list[Path]:
    """The Python files a test run imports: the packages' modules (src/ and the top-level packages, less
    packages of benchmarks, docs and examples) and the test directories' test modules
    (`_is_test_file`). Not what no test imports: benchmarks (jsonpickle's `tests/benchmark.py`, which
    only Python 2 parses, in a package that runs on both), tooling at the root, vendored copies
    (`is_vendored_path`: tablib's `packages/dbfpy` comes as one twin per Python beside `dbfpy3`,
    chosen by a version switch, so its Python 2 twin says nothing about the package's own code).
    Files at the root count when they are tests, or when the root holds no package (a one-module
    project's module is there)."""
    packages = [p for p in _package_dirs(root) if not _NOT_IMPORTED_DIRS.match(p)]
    within = [
        p
        for top in dict.fromkeys(root / d for d in ("src", *packages, *_TEST_DIRS))
        if top.is_dir()
        for p in top.rglob("*.py")
        if not is_vendored_path(p.relative_to(root).as_posix(), nested_packages=True)
        and (top.name not in _TEST_DIRS or _is_test_file(p.name))
    ]
    one_module = not packages and not (root / "src").is_dir()
    at_root = [
        p for p in root.glob("*.py") if p.name not in _NOT_THE_CODE and (one_module or _is_test_file(p.name))
    ]
    return sorted(dict.fromkeys([*at_root, *within]))


def python2_evidence(root: Path, when: dt.date) -> str:
    """Why the code at `root` is Python 2 code, empty when nothing says so: a module of the package or
    its tests (`_code_files`) that Python 3 cannot parse (print statements, `except E, e`, `0777`), or an
    unguarded import that only Python 2 resolves (`_python2_import`). Only for trees dated before Python
    2's end of life. Python 3 reads such code only after 2to3 (run by some setup.py files at install),
    and its tests not at all: they need Python 2.7."""
    if when >= PYTHON2_END:
        return ""
    for path in _code_files(root)[:_PYTHON2_SCAN_FILES]:
        try:
            module = ast.parse(read_or_empty(path), filename=str(path))
        except SyntaxError as err:
            return f"Python 3 cannot parse {path.relative_to(root)}:{err.lineno} ({err.msg})"
        found = _python2_import(path, root, module)
        if found:
            return found
    return ""


DECLARATION_FILES = ("setup.py", "setup.cfg", "tox.ini", "pyproject.toml")
"""Files that declare requirements besides the requirement files (`requirement_files`)."""


def _declares(name: str) -> bool:
    """Whether a file of that name declares requirements (a declaration, a requirement file or a CI
    configuration, whose install lines `ci_requirements` reads)."""
    ci = name in (".travis.yml", "appveyor.yml") or name.startswith(".github/workflows/")
    return ci or name in DECLARATION_FILES or (name.endswith(".txt") and "req" in name)


def patch_test_requirements(root: Path, patches: Sequence[str]) -> list[str]:
    """Test requirements the row's own patches add (its test patch declares `freezegun`, which its new
    tests import): the declarations read again with the patches applied to the files that declare
    requirements, less those of the base commit. The environment serves the after-state too."""
    added: list[str] = []
    for patch in patches:
        sections = re.split(r"(?m)^(?=diff --git )", patch)
        wanted = [
            chunk
            for chunk in sections
            if (m := re.match(r"diff --git a/(\S+) b/(\S+)", chunk)) and _declares(m.group(2))
        ]
        if not wanted:
            continue
        names = [re.match(r"diff --git a/(\S+) b/", c).group(1) for c in wanted]
        try:
            after = apply_patch_to_contents(
                {n: read_or_empty(root / n) for n in names if (root / n).is_file()}, "".join(wanted)
            )
        except PatchApplyError:
            continue
        with tempfile.TemporaryDirectory(prefix="swerl-decl-") as tmp:
            overlay = Path(tmp)
            for name in {
                *DECLARATION_FILES,
                *(p.relative_to(root).as_posix() for p in [*requirement_files(root), *ci_files(root)]),
            }:
                if (root / name).is_file():
                    (overlay / name).parent.mkdir(parents=True, exist_ok=True)
                    (overlay / name).write_text(read_or_empty(root / name), encoding="utf-8")
            for name, text in after.items():
                target = overlay / name
                if text is None:
                    target.unlink(missing_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            before, later = read_declarations(root), read_declarations(overlay)
        old = {*before.test_requirements, *before.test_extra_requirements}
        added += [r for r in (*later.test_requirements, *later.test_extra_requirements) if r not in old]
    return [r for r in dict.fromkeys(added) if not _is_pytest(r)]


def cutoff_of(when: dt.date, pinned: bool = False) -> str:
    """The upload cutoff of a row's date: the first day of its month, so that rows of one month share
    their environments while nothing newer than the date is installed; the date itself for a
    repository that pins exact releases (`==`), since a pin may name one from earlier that month (the
    base commit, and so its pins, predate the row's date)."""
    return (when if pinned else when.replace(day=1)).isoformat()


RUNNERS = (
    ("pytest", re.compile(r"\b(py\.test|pytest)\b")),
    ("nose", re.compile(r"\b(nosetests|nose2?)\b")),
    ("unittest", re.compile(r"-m\s+unittest\b|\bsetup\.py\s+test\b|\btrial\b|\brun[_-]?tests\.py\b")),
)
"""Test runners told apart in a test command (the first that matches names it)."""


def _command_lines(root: Path) -> list[tuple[str, str]]:
    """(line, where) of the places a repository says how its tests run, in the order they are read:
    tox's commands, setup.cfg's `test` alias, the Makefile's `test` target, the CI's scripts."""
    tox = _cfg(root / "tox.ini")
    # A command continued over lines (`nosetests \` then its options) is one command.
    commands = tox.get("testenv", "commands", fallback="").replace("\\\n", " ")
    found = [(" ".join(line.split()), "tox.ini") for line in _cfg_list(commands)]
    setup_cfg = _cfg(root / "setup.cfg")
    found += [
        (f"setup.py test ({line})", "setup.cfg")
        for line in _cfg_list(setup_cfg.get("aliases", "test", fallback=""))
    ]
    makefile = read_or_empty(root / "Makefile")
    target = re.search(r"(?m)^tests?:.*\n((?:\t.*\n?)+)", makefile)
    found += [(line.strip(), "Makefile") for line in (target.group(1).splitlines() if target else ())]
    for path in [root / ".travis.yml", *sorted((root / ".github" / "workflows").glob("*.y*ml"))]:
        lines = (
            line.strip().removeprefix("- ").removeprefix("run:").strip()
            for line in read_or_empty(path).splitlines()
        )
        found += [(line, path.name) for line in lines if line and "install" not in line]
    return found


def declared_test_command(root: Path) -> tuple[str, str, str]:
    """(runner, command, where): the test command the repository declares at this commit, read from
    `_command_lines`; ("", "", "") where none names a runner. Recorded with the row: pytest runs every
    repository's tests here, as the harness does (it collects unittest test cases, and before pytest 8
    nose-style test functions and fixtures), and the test command says what the repository's own CI
    ran, which explains a row whose tests behave differently under pytest."""
    for line, where in _command_lines(root):
        for runner, pattern in RUNNERS:
            if pattern.search(line):
                return runner, line, where
    scripts = ("runtests.py", "run_tests.py", "run-tests.py", "tests/runtests.py")
    files = [name for name in scripts if (root / name).is_file()]
    return ("unittest", f"python {files[0]}", files[0]) if files else ("", "", "")


_IMPORTS_NOSE = re.compile(r"^\s*(import\s+nose\b|from\s+nose\b)", re.MULTILINE)


def nose_needed(root: Path, runner: str, command: str = "") -> str:
    """Why the tests need nose installed, empty when nothing says so: the declared test command runs
    it, setup.cfg configures it (`[nosetests]`), or the test package imports it (Python-Markdown's
    tests/__init__.py of 2011 stops without it). Projects of the nose years often declare it nowhere
    else: their CI or their documentation told the developer to install it."""
    if runner == "nose" and "nose2" not in command:
        return "the declared test command runs nose"
    if has_ini_section(read_or_empty(root / "setup.cfg"), "nosetests"):
        return "setup.cfg configures nosetests"
    for folder in ("tests", "test"):
        if _IMPORTS_NOSE.search(read_or_empty(root / folder / "__init__.py")):
            return f"{folder}/__init__.py imports nose"
    return ""


def merge_requirements(lines: Sequence[str]) -> tuple[str, ...]:
    """The requirement lines with each project named once (per environment marker): `odfpy` from
    setup.py and `odfpy==1.3.5` from requirements.txt become `odfpy==1.3.5`, extras and version
    constraints joined. uv merges such lines itself; pip 20.3 (Python 2.7's installer) refuses the
    whole install ("Double requirement given"). Lines named once stay as written (a recipe's
    requirements are part of its environment's identity); a line that does not parse as a requirement
    (an option) or names a URL stays as it is, in its place."""
    merged: dict[object, list[Any]] = {}  # key -> [line as written, parsed or None]
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            merged.setdefault(line, [line, None])
            continue
        key = (canonicalize_name(req.name), str(req.marker or "")) if not req.url else line
        if key not in merged:
            merged[key] = [line, req]
            continue
        first = merged[key][1]
        if first is not None and line != merged[key][0]:
            first.extras |= req.extras
            first.specifier &= req.specifier
            merged[key][0] = str(first)
    return tuple(written for written, _ in merged.values())


def recipes_for(
    tree: Path,
    when: dt.date,
    available: Sequence[str],
    *,
    preferred: str = "",
    base_commit: str = "",
    dated: bool = True,
    patches: Sequence[str] = (),
) -> list[Recipe]:
    """The recipes to try for the repository at `tree`, most faithful first (see the module docstring).

    `dated` False (installs from a wheelhouse, which is the resolution) leaves out the cutoff, the
    pytest bounds and the recipe with today's releases. `patches` (the row's test and gold patches)
    add the test requirements they declare. Python 2.7 is chosen first only for Python 2 code
    (`python2_evidence`); code of Python 2's years that lists 2.7 beside Python 3 gets 2.7's recipes
    after Python 3's (`python2_fallback`). 2.7 installs with pip, which cannot resolve as of a date,
    so its recipes have no cutoff (the releases pip takes are those whose Requires-Python admits 2.7)."""
    decl = read_declarations(tree)
    python3s = [v for v in available if v != "2.7"]
    added = [r for r in patch_test_requirements(tree, patches) if r not in decl.test_requirements]
    evidence = python2_evidence(tree, when) if "2.7" in _usable(decl, available) else ""
    at = partial(_recipes_at, tree, decl, when, available, dated=dated, base_commit=base_commit, added=added)
    if evidence:
        return at("2.7", [f"Python 2.7: {evidence}"])
    python, _why = choose_python(decl, when, python3s, preferred)
    fallback = python2_fallback(decl, when, available)
    if not fallback:
        return at(python, [])
    later = [r for r in at("2.7", [fallback]) if r.name != "editable-today"]
    return [*at(python, []), *later]


def python2_fallback(decl: Declarations, when: dt.date, available: Sequence[str]) -> str:
    """Why Python 2.7's recipes follow Python 3's, empty when they do not: code dated before Python 2's
    end of life that lists 2.7 among its Pythons ran its tests on both, and some of its test
    requirements may exist for Python 2 only (jsonpickle's tests of 2013 install jsonlib, a C
    extension for Python 2), or its code may predate the oldest Python 3 this machine has (tablib of
    early 2016 under 3.6, whose `re.LOCALE` on a str pattern 3.6 refuses). Python 3 stays first: it is
    the newer of the two the project ran on."""
    if when >= PYTHON2_END or "2.7" not in decl.listed_pythons or "2.7" not in _usable(decl, available):
        return ""
    return (
        f"Python 2.7 after Python 3's recipes: 2.7 is listed ({decl.listed_from}) and the code is of {when}"
    )


def _recipes_at(
    tree: Path,
    decl: Declarations,
    when: dt.date,
    available: Sequence[str],
    python: str,
    decisions: list[str],
    *,
    dated: bool,
    base_commit: str,
    added: Sequence[str],
) -> list[Recipe]:
    """The recipes of one Python (`recipes_for`), most faithful first; `decisions` grows with why."""
    if dated and not pytest_without(python, when, decl.shadows):
        # No pytest that this Python runs leaves the tree's own copy of its dependency alone (attrs of
        # 2015 under 3.6): the oldest newer Python that runs one, where the repository allows it.
        python3s = [v for v in available if v != "2.7"]
        newer = (v for v in _usable(decl, python3s) if _version_tuple(v) > _version_tuple(python))
        python = next((v for v in newer if pytest_without(v, when, decl.shadows)), python)
    dated_here = dated and python != "2.7"
    pytest_pin = pytest_requirement(python, when, decl.shadows) if dated else "pytest"
    if added:
        decisions.append(f"test requirements the row's patches add: {', '.join(added)}")
    test_requirements = (*decl.test_requirements, *added)
    runner, command, where = declared_test_command(tree)
    nose = nose_needed(tree, runner, command)
    if nose and not any(re.match(r"nose\s*([<>=!~;\[]|$)", r, re.IGNORECASE) for r in test_requirements):
        test_requirements += ("nose",)
        decisions.append(f"nose installed: {nose}")
    pinned = any("==" in line for line in (*(decl.runtime or ()), *test_requirements))
    cutoff = cutoff_of(when, pinned) if dated_here else ""
    if dated and not dated_here:
        decisions.append("no upload cutoff: pip, the resolver for Python 2.7, cannot resolve as of a date")
    if decl.released:
        decisions.append(f"requirements named by a URL taken as their releases: {', '.join(decl.released)}")
    from_ci = [r for r in ci_requirements(tree) if r in test_requirements]
    if from_ci:
        decisions.append(f"test requirements the CI files install: {', '.join(from_ci)}")
    if runner:
        decisions.append(f"test command `{command}` ({where}, {runner}): the tests run under pytest")
    if refused_pytest_section(tree):
        decisions.append(
            "setup.cfg's [pytest] section handed to pytest as an ini file (pytest >= 4 refuses it)"
        )
    sources = decl.sources + (f"@{base_commit[:12]}" if decl.compiled else "")
    recipes: list[Recipe] = []
    common = {"python": python, "pytest": pytest_pin, "decisions": tuple(decisions)}
    editable = {**common, "install": "editable", "sources": sources}
    if decl.installable:
        if decl.test_extra or test_requirements:
            test = {"requirements": merge_requirements(test_requirements), "extra": decl.test_extra}
            recipes.append(Recipe("test-extras", **editable, **test, cutoff=cutoff))
        recipes.append(Recipe("editable", **editable, cutoff=cutoff))
    requirements = merge_requirements((*(decl.runtime or ()), *test_requirements))
    generated = install_outputs(tree)
    uninstalled = {**common}
    if generated:
        # Recorded with this recipe only: the installing ones get these files from the install itself.
        note = f"not installed: what the install writes is written beside the code ({generated.why})"
        uninstalled["decisions"] = (*decisions, note)
    recipes.append(Recipe("pythonpath", **uninstalled, requirements=requirements, cutoff=cutoff))
    if decl.installable and dated_here:
        recipes.append(Recipe("editable-today", **editable))
    return recipes


PYTEST_INI_COPY = "swerl-pytest.ini"
"""The name of the copy of a `[pytest]` section of setup.cfg handed to pytest (`pytest_config_env`)."""


def _ini_section(text: str, name: str) -> str:
    """The raw lines of section `[name]` of an ini file (comments and continuation lines kept as
    written, which configparser would not), empty when there is none."""
    lines: list[str] = []
    inside = False
    for line in text.splitlines():
        header = re.match(r"^\[([^\]]+)\]\s*$", line)
        if header:
            inside = header.group(1).strip() == name
            continue
        if inside:
            lines.append(line)
    return "\n".join(lines).strip("\n")


def has_ini_section(text: str, name: str) -> bool:
    """Whether ini text has a `[name]` section (read line by line: configparser refuses many real
    setup.cfg files, with duplicate keys or `%` signs)."""
    return any(re.match(rf"^\[{re.escape(name)}\]\s*$", line) for line in text.splitlines())


def refused_pytest_section(tree: Path) -> str:
    """The body of a `[pytest]` section of the tree's setup.cfg that pytest would find and refuse,
    empty when there is none.

    Until pytest 3.x setup.cfg could configure pytest in a `[pytest]` section; from 4.0 on pytest stops
    with a usage error when the configuration file it finds is such a setup.cfg, so every test of the
    repositories that kept it (attrs and many others until 2016) ends in a collection error under any
    pytest a recipe installs (4.6 and later). pytest looks in the root for pytest.ini, then (from 6.0)
    pyproject.toml with `[tool.pytest.ini_options]`, then tox.ini with `[pytest]`, then setup.cfg with
    `[tool:pytest]` or `[pytest]`: only where none of the others configures pytest is the setup.cfg
    section the one it reads."""
    setup_cfg = read_or_empty(tree / "setup.cfg")
    if not has_ini_section(setup_cfg, "pytest") or has_ini_section(setup_cfg, "tool:pytest"):
        return ""
    if (tree / "pytest.ini").is_file() or has_ini_section(read_or_empty(tree / "tox.ini"), "pytest"):
        return ""
    if "[tool.pytest.ini_options]" in read_or_empty(tree / "pyproject.toml"):
        return ""
    return _ini_section(setup_cfg, "pytest") or "# an empty [pytest] section in setup.cfg"


def pytest_config_env(tree: Path, where: Path) -> dict[str, str]:
    """Environment variables that make pytest read the tree's configuration where it would refuse it:
    the refused `[pytest]` section of setup.cfg (`refused_pytest_section`) written to `where` as an ini
    file of the same content and handed to pytest with `-c`, the tree kept as its rootdir (with `-c`
    pytest would take the copy's folder). Through PYTEST_ADDOPTS, which pytest reads before it looks
    for a configuration file, so that every test command (`python -m pytest`, `pytest`, the harness's
    line) gets it. Read from the tree as it is when the tests run, so a patch that renames the section
    `[tool:pytest]` is read as pytest reads it. Empty when pytest reads the tree's own."""
    body = refused_pytest_section(tree)
    if not body:
        return {}
    where.mkdir(parents=True, exist_ok=True)
    ini = where / PYTEST_INI_COPY
    ini.write_text(f"[pytest]\n{body}\n", encoding="utf-8")
    return {"PYTEST_ADDOPTS": shlex.join(["-c", str(ini), "--rootdir", str(tree)])}


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
