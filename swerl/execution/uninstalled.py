"""What an install would have generated, for code that is found through PYTHONPATH instead.

An inferred recipe that does not install the project (`pythonpath`: its editable install could not
be built, or there is nothing to install) runs the tree as checked out. Two kinds of project cannot
import like that, because their install writes files their code reads:

- setuptools_scm's version file (`write_to` / `version_file`, e.g. `pkg/_version.py`), which the
  package imports and git does not track: an `ImportError` before any test runs;
- the distribution's own metadata, read at import by `pkg_resources.get_distribution(__name__)` or
  `importlib.metadata.version("pkg")`: `DistributionNotFound` / `PackageNotFoundError`.

Both are written here, as the install would have written them, and nothing else: the version file
into the tree (only where it is missing), the metadata (a minimal `NAME.egg-info`, which both
`pkg_resources` and `importlib.metadata` find on a path entry) into a folder outside it that joins
PYTHONPATH. The version is the one the project states literally, else `UNKNOWN_VERSION`: without an
install there is no `git describe` of the row's history to ask. Everything is read statically; no
repository code runs.
"""

from __future__ import annotations

import ast
import configparser
import contextlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UNKNOWN_VERSION = "0.0.0"
"""The version written where the project states none (setuptools_scm projects compute theirs from git
tags at install): parseable by every version parser, old `pkg_resources` and `distutils` included."""

_SCM_TEMPLATE = (
    "# written by swerl in place of setuptools_scm's install step (the code is not installed)\n"
    "__version__ = version = {version!r}\n"
    "__version_tuple__ = version_tuple = {version_tuple!r}\n"
)
"""setuptools_scm's default template for a `.py` version file (the names every release of it wrote)."""

_SCAN_FILES = 400
"""How many of the package's modules are read for calls that look up its own distribution."""


@dataclass(frozen=True)
class InstallOutputs:
    """What the project's install would write that its code reads: empty fields where it writes
    nothing the code needs."""

    name: str = ""
    """The distribution's name, where its code reads its own metadata (else empty)."""
    version: str = UNKNOWN_VERSION
    version_file: str = ""
    """setuptools_scm's version file, relative to the tree (empty: none is declared)."""
    template: str = ""
    """The declared template of that file (`write_to_template`), empty for setuptools_scm's default."""
    why: str = ""
    """What in the tree asks for it (recorded with the recipe)."""

    def __bool__(self) -> bool:
        return bool(self.name or self.version_file)


def read_or_empty(path: Path) -> str:
    """A text file of the tree as text; "" where it is absent or unreadable (a recipe reads what a
    repository may or may not have)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def setup_literal(setup_py: str, name: str) -> Any:
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


def _scm_file(tree: Path, setup: dict[str, object], pyproject: dict[str, object]) -> tuple[str, str, str]:
    """(version file, template, where declared) of setuptools_scm, empty strings where none is."""
    table = pyproject.get("tool", {})
    scm = table.get("setuptools_scm") if isinstance(table, dict) else None
    if isinstance(scm, dict):
        target = scm.get("version_file") or scm.get("write_to")
        template = scm.get("version_file_template") or scm.get("write_to_template") or ""
        if isinstance(target, str) and target:
            return target, str(template), "pyproject.toml [tool.setuptools_scm]"
    options = setup.get("use_scm_version")
    if isinstance(options, dict):
        target = options.get("write_to") or options.get("version_file")
        template = options.get("write_to_template") or options.get("version_file_template") or ""
        if isinstance(target, str) and target:
            return target, str(template), "setup.py use_scm_version"
    return "", "", ""


def _declared_name_and_version(
    tree: Path, setup: dict[str, object], pyproject: dict[str, object]
) -> tuple[str, str]:
    """The distribution's name and literal version from pyproject's `[project]`, setup.cfg's
    `[metadata]` or setup.py's call (empty where none is literal)."""
    project = pyproject.get("project", {})
    project = project if isinstance(project, dict) else {}
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(read_or_empty(tree / "setup.cfg"))
    except configparser.Error:
        cfg = configparser.ConfigParser(interpolation=None)
    metadata = dict(cfg.items("metadata")) if cfg.has_section("metadata") else {}
    names = [project.get("name"), metadata.get("name"), setup.get("name")]
    versions = [project.get("version"), metadata.get("version"), setup.get("version")]
    name = next((n for n in names if isinstance(n, str) and re.fullmatch(r"[\w.-]+", n)), "")
    version = next((v for v in versions if isinstance(v, str) and re.fullmatch(r"\d[\w.+-]*", v)), "")
    return name, version


def _reads_own_metadata(tree: Path, name: str) -> str:
    """A module of the package that looks up its own distribution (`get_distribution(__name__)`,
    `version("pkg")`, `metadata.distribution(__package__)`), as `path:line`; empty where none does."""
    wanted = "|".join(re.escape(n) for n in {name, name.replace("-", "_"), name.lower()})
    call = re.compile(
        r"\b(get_distribution|require|version|distribution|metadata)\(\s*"
        rf"(__name__|__package__|['\"]({wanted})['\"])",
        re.IGNORECASE,
    )
    tops = [tree / "src", *(p for p in tree.iterdir() if (p / "__init__.py").is_file())]
    files = [p for top in tops if top.is_dir() for p in sorted(top.rglob("*.py"))][:_SCAN_FILES]
    for path in files:
        if any(part.lower().startswith("test") for part in path.relative_to(tree).parts):
            continue
        for number, line in enumerate(read_or_empty(path).splitlines(), start=1):
            if call.search(line) and not line.lstrip().startswith("#"):
                return f"{path.relative_to(tree)}:{number}"
    return ""


def install_outputs(tree: Path) -> InstallOutputs:
    """What the project's install at `tree` would write that its code reads (see the module)."""
    try:
        pyproject = tomllib.loads(read_or_empty(tree / "pyproject.toml"))
    except tomllib.TOMLDecodeError:
        pyproject = {}
    setup_py = read_or_empty(tree / "setup.py")
    setup = (
        {key: setup_literal(setup_py, key) for key in ("use_scm_version", "name", "version")}
        if setup_py
        else {}
    )
    version_file, template, declared = _scm_file(tree, setup, pyproject)
    name, version = _declared_name_and_version(tree, setup, pyproject)
    reader = _reads_own_metadata(tree, name) if name else ""
    reasons = []
    if version_file:
        reasons.append(f"setuptools_scm writes {version_file} ({declared})")
    if reader:
        reasons.append(f"{reader} reads the distribution {name}'s metadata")
    return InstallOutputs(
        name=name if reader else "",
        version=version or UNKNOWN_VERSION,
        version_file=version_file,
        template=template,
        why="; ".join(reasons),
    )


def _version_tuple(version: str) -> tuple[int | str, ...]:
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"[.+]", version))


def write_install_outputs(tree: Path, where: Path) -> list[str]:
    """Write what `install_outputs(tree)` names: the version file into `tree` where it is missing,
    the distribution's metadata under `where`. The path entries to add to PYTHONPATH (`where`, when
    metadata was written there)."""
    outputs = install_outputs(tree)
    if outputs.version_file:
        target = tree / outputs.version_file
        if not target.exists() and target.resolve().is_relative_to(tree.resolve()):
            target.parent.mkdir(parents=True, exist_ok=True)
            fields = {"version": outputs.version, "version_tuple": _version_tuple(outputs.version)}
            text = _SCM_TEMPLATE.format(**fields) if target.suffix == ".py" else outputs.version
            if outputs.template:
                with contextlib.suppress(KeyError, IndexError, ValueError):  # other braces: the default
                    text = outputs.template.format(**fields)
            target.write_text(text if text.endswith("\n") else f"{text}\n", encoding="utf-8")
    if not outputs.name:
        return []
    info = where / f"{re.sub(r'[^A-Za-z0-9.]+', '_', outputs.name)}.egg-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "PKG-INFO").write_text(
        f"Metadata-Version: 1.1\nName: {outputs.name}\nVersion: {outputs.version}\n", encoding="utf-8"
    )
    return [str(where)]
