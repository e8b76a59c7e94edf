"""Recipes inferred from a repository's declarations and its row's date, and the environments built
from them (offline: real venvs from a wheelhouse, real git repositories built here)."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
from pathlib import Path

import pytest
from calc_repo import write_files
from test_agentless_envs import (  # noqa: F401  (fixtures: wheelhouse, no_index)
    PYPROJECT,
    USESDEP,
    USESDEP_TEST,
    _git_repo,
    no_index,
    wheelhouse,
)

from swerl.errors import UserError
from swerl.execution.envs import READY, EnvManager, EnvSetupError
from swerl.execution.instances import Instance
from swerl.execution.recipes import (
    Recipe,
    choose_python,
    collect_targets,
    cutoff_of,
    pytest_requirement,
    pytest_without,
    read_declarations,
    recipe_from_json,
    recipes_for,
    row_date,
)
from swerl.git.clones import RepoCache

HERE = f"{sys.version_info[0]}.{sys.version_info[1]}"
"""The running interpreter's version: the wheelhouse's wheels are made from it."""
ALL = ("3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
MODERN = """\
[build-system]
requires = ["flit_core>=3.2"]
build-backend = "flit_core.buildapi"

[project]
name = "modern"
version = "1.0"
requires-python = ">=3.8"
dependencies = ["attrs>=20"]
classifiers = [
    "Programming Language :: Python :: 3.8",
    "Programming Language :: Python :: 3.9",
    "Programming Language :: Python :: 3.10",
    "Programming Language :: Python :: 3.11",
]

[project.optional-dependencies]
docs = ["sphinx"]
tests = ["pytest-mock"]
"""
OLD_SETUP = """\
from setuptools import setup

EXTRAS_REQUIRE = {"testing": ["mock"]}
setup(
    name="old",
    version="0.3",
    install_requires=["six>=1.5"],
    extras_require=EXTRAS_REQUIRE,
)
"""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "tree"
    write_files(root, files)
    return root


def test_pyproject_with_requires_python_classifiers_and_a_test_extra(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"pyproject.toml": MODERN, "modern/__init__.py": ""})
    # Mid-2022: 3.11 (October 2022) did not exist yet, 3.10 is the newest listed one that did.
    recipes = recipes_for(tree, dt.date(2022, 6, 15), ALL)
    assert [r.name for r in recipes] == ["test-extras", "editable", "pythonpath", "editable-today"]
    extras, editable, pythonpath, today = recipes
    assert {r.python for r in recipes} == {"3.10"}
    assert (extras.install, extras.extra, extras.cutoff) == ("editable", "tests", "2022-06-01")
    assert pythonpath.install == "" and pythonpath.requirements == ("attrs>=20",)
    assert today.cutoff == "" and editable.cutoff == "2022-06-01"
    assert extras.pytest == "pytest>=6.2.5,<7.2"  # 7.0 and 7.1 came out by then
    # After 3.11's release it is listed and chosen; before 3.8 existed, the oldest listed one here.
    assert recipes_for(tree, dt.date(2023, 3, 1), ALL)[0].python == "3.11"
    assert recipes_for(tree, dt.date(2019, 1, 1), ALL)[0].python == "3.8"


def test_setup_py_with_requirement_files(tmp_path: Path) -> None:
    files = {
        "setup.py": OLD_SETUP,
        "requirements.txt": "requests<3  # the client\n-e .\n",
        "test-requirements.txt": "-r requirements-dev.txt\npytest-timeout\n--index-url https://x\n",
        "requirements-dev.txt": "flake8\n",
        "old/__init__.py": "",
    }
    decl = read_declarations(_tree(tmp_path, files))
    assert decl.runtime == ("six>=1.5", "requests<3")
    assert decl.test_extra == "testing"
    assert decl.test_requirements == ("flake8", "pytest-timeout")
    assert decl.installable and not decl.compiled


def test_a_computed_install_requires_is_unknown_not_empty(tmp_path: Path) -> None:
    setup = (
        "from setuptools import setup\nreqs = open('r.txt').read().split()\nsetup(install_requires=reqs)\n"
    )
    assert read_declarations(_tree(tmp_path, {"setup.py": setup})).runtime is None


def test_tox_envlist_and_ci_matrix_name_the_python(tmp_path: Path) -> None:
    tox = "[tox]\nenvlist = py27, py35\n\n[testenv]\ndeps =\n    nose\n    py26: unittest2\n    {py27}: x\n"
    decl = read_declarations(_tree(tmp_path / "a", {"tox.ini": tox}))
    assert (decl.listed_pythons, decl.listed_from) == (("2.7", "3.5"), "tox.ini")
    assert decl.test_requirements == ("nose",)  # factor-conditional lines are left out
    # Only Pythons older than this machine's are listed: the next newer one it has.
    assert choose_python(decl, dt.date(2017, 5, 1), ALL)[0] == "3.6"

    workflow = "jobs:\n  test:\n    strategy:\n      matrix:\n        python-version: ['3.7', '3.9']\n"
    travis = "language: python\npython:\n  - 2.7\n  - 3.6\n"
    root = _tree(tmp_path / "b", {".github/workflows/ci.yml": workflow, ".travis.yml": travis})
    decl = read_declarations(root)
    assert (decl.listed_pythons, decl.listed_from) == (("2.7", "3.6", "3.7", "3.9"), "CI")
    assert choose_python(decl, dt.date(2020, 1, 1), ALL)[0] == "3.7"  # 3.9 came out in October 2020


def test_a_repository_that_names_no_python_gets_one_settled_by_its_date(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    decl = read_declarations(tree)
    assert [r.name for r in recipes_for(tree, dt.date(2021, 1, 1), ALL)] == ["pythonpath"]
    assert choose_python(decl, dt.date(2021, 1, 1), ALL)[0] == "3.8"  # 3.9: released three months before
    assert choose_python(decl, dt.date(2024, 1, 1), ALL, preferred="3.11")[0] == "3.11"
    assert choose_python(decl, dt.date(2024, 1, 1), ALL, preferred="3.13")[0] == "3.11"  # not settled
    assert choose_python(decl, dt.date(2011, 6, 1), ALL)[0] == "3.6"  # nothing here existed then


def test_requires_python_that_nothing_here_satisfies_is_a_one_line_error(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.14"\n'})
    with pytest.raises(UserError, match=r"requires-python '>=3\.14'"):
        recipes_for(tree, dt.date(2026, 1, 1), ALL)


@pytest.mark.parametrize(
    ("python", "when", "expected"),
    [
        ("3.6", dt.date(2016, 1, 1), "pytest>=4.6,<5.0"),  # older dates get the floor's line
        ("3.7", dt.date(2020, 4, 1), "pytest>=4.6,<6.0"),
        ("3.8", dt.date(2024, 12, 1), "pytest>=4.6,<8.4"),
        ("3.6", dt.date(2024, 12, 1), "pytest>=4.6,<7.1"),  # the last line that runs on 3.6
        ("3.12", dt.date(2023, 12, 1), "pytest>=7.3,<8.0"),
        ("3.13", dt.date(2026, 1, 1), "pytest>=8.2"),
    ],
)
def test_pytest_of_the_date_within_what_the_python_runs(python: str, when: dt.date, expected: str) -> None:
    assert pytest_requirement(python, when) == expected


@pytest.mark.parametrize(
    ("python", "when", "shadows", "expected"),
    [
        # more-itertools of 2016: pytest 4.6 imports it; 6.1 is the first line that no longer does.
        ("3.6", dt.date(2016, 11, 5), ("more_itertools",), "pytest>=6.1,<6.2"),
        # six of 2020: 5.0 dropped it, and 5.0 to 5.3 came out by then.
        ("3.8", dt.date(2020, 1, 8), ("six",), "pytest>=5.0,<5.4"),
        # iniconfig of 2021: every line since 6.0 needs it; the newest before that.
        ("3.8", dt.date(2021, 1, 5), ("iniconfig",), "pytest>=5.4,<6.0"),
        # tomli is needed below 3.11 only.
        ("3.12", dt.date(2023, 12, 1), ("tomli",), "pytest>=7.3,<8.0"),
        ("3.10", dt.date(2023, 12, 1), ("tomli",), "pytest>=6.2.5,<7.0"),
        # attrs: 7.3 (Python 3.7 and later) is the first line without it; 3.6 runs none, so the date's.
        ("3.7", dt.date(2015, 7, 22), ("attr",), "pytest>=7.3,<7.4"),
        ("3.6", dt.date(2015, 7, 22), ("attr",), "pytest>=4.6,<5.0"),
        # pluggy: every line needs it.
        ("3.8", dt.date(2020, 1, 8), ("pluggy",), "pytest>=4.6,<5.4"),
    ],
)
def test_a_tree_that_is_a_pytest_dependency_gets_a_pytest_that_does_not_import_it(
    python: str, when: dt.date, shadows: tuple[str, ...], expected: str
) -> None:
    assert pytest_requirement(python, when, shadows) == expected
    # Where every line requires the module, pytest_without says so and the date's line is kept.
    unavoidable = shadows == ("pluggy",) or (python, shadows) == ("3.6", ("attr",))
    assert pytest_without(python, when, shadows) == ("" if unavoidable else expected)


def test_a_dependency_of_pytest_is_found_in_the_tree_and_may_change_the_python(tmp_path: Path) -> None:
    classifiers = '["Programming Language :: Python :: 3.5"]'
    setup = f'from setuptools import setup\nsetup(name="attrs", classifiers={classifiers})\n'
    attrs = _tree(tmp_path / "attrs", {"setup.py": setup, "src/attr/__init__.py": "", "tests/test_a.py": ""})
    assert read_declarations(attrs).shadows == ("attr",)
    # 3.6 (the next newer Python than the listed 3.5) runs no pytest without attrs: 3.7 and pytest 7.3.
    recipes = recipes_for(attrs, dt.date(2015, 7, 22), ALL)
    assert {(r.python, r.pytest) for r in recipes if r.cutoff} == {("3.7", "pytest>=7.3,<7.4")}
    six = _tree(
        tmp_path / "six", {"setup.py": setup.replace("attrs", "six"), "six.py": "", "test_six.py": ""}
    )
    assert read_declarations(six).shadows == ("six",)
    assert recipes_for(six, dt.date(2017, 9, 17), ALL)[0].pytest == "pytest>=5.0,<5.4"
    # A module of that name deeper in the tree is no top-level module: it shadows nothing.
    plain = _tree(tmp_path / "plain", {"setup.py": setup, "pkg/six.py": "", "pkg/__init__.py": ""})
    assert read_declarations(plain).shadows == ()
    assert recipes_for(plain, dt.date(2017, 9, 17), ALL)[0].pytest == "pytest>=4.6,<5.0"


def test_row_dates_cutoffs_and_recorded_recipes(tmp_path: Path) -> None:
    assert row_date("2019-06-20T11:02:03Z", tmp_path) == dt.date(2019, 6, 20)
    assert row_date(dt.datetime(2020, 2, 3, 4, 5), tmp_path) == dt.date(2020, 2, 3)
    instance = _git_repo(tmp_path / "clones", "acme/dated", {"a.py": ""})
    clone = tmp_path / "clones" / "acme__dated"
    assert row_date("", clone) == dt.date(2025, 1, 1)  # the commit's date (fixed by the test's git)
    assert instance.base_commit and cutoff_of(dt.date(2019, 6, 20)) == "2019-06-01"
    # A pin may name a release of earlier that month: pinned repositories resolve as of the date itself.
    assert cutoff_of(dt.date(2024, 3, 23), pinned=True) == "2024-03-23"
    pinned = _tree(
        tmp_path / "pinned", {"setup.py": OLD_SETUP, "requirements/tests.txt": "packaging==24.0\n"}
    )
    assert recipes_for(pinned, dt.date(2024, 3, 23), ALL)[0].cutoff == "2024-03-23"

    recipe = Recipe("test-extras", "3.9", "pytest<7", ("mock",), "editable", "tests", "2021-03-01", "abc")
    assert recipe_from_json(recipe.to_json()) == recipe
    assert recipe_from_json(recipe.to_json()).key() == recipe.key()
    with pytest.raises(UserError, match="not a recipe"):
        recipe_from_json('{"name": "x", "python": "3.9", "colour": "red"}')
    with pytest.raises(UserError, match=r"Python '4\.0'"):
        recipe_from_json('{"name": "x", "python": "4.0"}')


def test_compiled_extensions_get_an_environment_per_base_commit(tmp_path: Path) -> None:
    files = {"setup.py": OLD_SETUP, "old/__init__.py": "", "old/_speedups.c": "int x;\n"}
    tree = _tree(tmp_path, files)
    first = recipes_for(tree, dt.date(2020, 1, 1), ALL, base_commit="a" * 40)[0]
    second = recipes_for(tree, dt.date(2020, 1, 1), ALL, base_commit="b" * 40)[0]
    assert first.key() != second.key() and first.sources.endswith("@aaaaaaaaaaaa")
    plain = _tree(tmp_path / "p", {"setup.py": OLD_SETUP, "old/__init__.py": ""})
    same = [recipes_for(plain, dt.date(2020, 1, 1), ALL, base_commit=c * 40)[0].key() for c in "ab"]
    assert same[0] == same[1]


def test_collection_targets_come_from_the_row(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"tests/test_a.py": "", "tests/test_b.py": "", "testing/x.py": ""})
    patch = "diff --git a/tests/test_b.py b/tests/test_b.py\n--- a/tests/test_b.py\n"
    assert collect_targets(tree, ["tests/test_a.py::test_x"], "") == ["tests/test_a.py"]
    assert collect_targets(tree, [], patch) == ["tests/test_b.py"]
    conftest = "diff --git a/tests/conftest.py b/tests/conftest.py\n"
    assert collect_targets(tree, [], conftest) == ["tests", "testing"]  # no tests in a conftest
    new_file = "diff --git a/tests/test_new.py b/tests/test_new.py\n"
    assert collect_targets(tree, [], new_file) == ["tests", "testing"]  # not at the base commit yet


@pytest.mark.slow  # three environments built: about 15 s alone, 40 s on a busy machine
@pytest.mark.usefixtures("no_index")
def test_the_first_recipe_that_collects_is_kept_shared_and_remembered(
    wheelhouse: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The test extra needs a wheel the wheelhouse lacks: the plain editable install is kept.
    pyproject = PYPROJECT.format(name="usesdep", dependencies='"tinydep"')
    pyproject += '\n[project.optional-dependencies]\ntests = ["notinthewheelhouse"]\n'
    files = {
        "pyproject.toml": pyproject,
        "usesdep/__init__.py": USESDEP,
        "tests/test_usesdep.py": USESDEP_TEST,
    }
    instance = _git_repo(tmp_path / "clones", "acme/usesdep", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse)
    tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")

    env = envs.env_for(instance, tree)
    recipe = json.loads(env.recipe)
    assert (recipe["name"], recipe["python"], recipe["install"]) == ("editable", HERE, "editable")
    assert env.testbed is not None and (env.testbed.parent / READY).is_file()
    assert not list((tmp_path / "envs" / "auto" / "acme__usesdep").glob("test-extras-*"))  # not half-made

    # Another row of the same declarations shares it; a new manager (a second run) builds nothing.
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("an environment was built again")

    monkeypatch.setattr(EnvManager, "_build_recipe", no_build)
    again = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse)
    other = Instance("acme__usesdep-2", instance.repo, instance.base_commit, "another issue", version="2.0")
    assert again.env_for(other, tree) == env

    # A row that carries its recipe gets exactly that one (here: no install, code through PYTHONPATH).
    monkeypatch.undo()
    recorded = Recipe("pythonpath", HERE, "pytest", ("tinydep",)).to_json()
    carried = Instance(
        "acme__usesdep-3", instance.repo, instance.base_commit, "i", extra={"env_recipe": recorded}
    )
    env = again.env_for(carried, tree)
    assert env.testbed is None and json.loads(env.recipe)["name"] == "pythonpath"
    assert "/auto/shared/pythonpath-" in env.python


@pytest.mark.slow  # two environments built
@pytest.mark.usefixtures("no_index")
def test_tests_that_collect_nowhere_keep_the_first_environment_built(
    wheelhouse: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A test module importing what no recipe installs: the first environment that could be built is
    kept, so the runs report the tests' own error (an instance undecidable here), not a build failure."""
    files = {
        "pyproject.toml": PYPROJECT.format(name="usesdep", dependencies='"tinydep"'),
        "usesdep/__init__.py": USESDEP,
        "tests/test_usesdep.py": "import not_installed_anywhere\n",
    }
    instance = _git_repo(tmp_path / "clones", "acme/broken", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse)
    tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")
    env = envs.env_for(instance, tree)
    assert json.loads(env.recipe)["name"] == "editable" and env.testbed is not None


@pytest.mark.usefixtures("no_index")
def test_when_no_recipe_can_be_built_the_error_names_each_step_and_its_log(tmp_path: Path) -> None:
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    files = {
        "pyproject.toml": PYPROJECT.format(name="usesdep", dependencies='"tinydep"'),
        "usesdep/__init__.py": "",
    }
    instance = _git_repo(tmp_path / "clones", "acme/broken", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")

    with pytest.raises(EnvSetupError) as failure:
        EnvManager(tmp_path / "envs", wheelhouse=empty).env_for(instance, tree)
    message = str(failure.value)
    assert message.startswith("could not create the test environment of acme/broken")
    assert f"recipe editable (Python {HERE})" in message and f"recipe pythonpath (Python {HERE})" in message
    assert "pip install -q pytest` exited with status 1" in message  # the step
    assert "No matching distribution found for pytest" in message  # the end of its log
    assert not list((tmp_path / "envs" / "auto").glob("*/[!.]*"))  # nothing half-made left


def _plain_project(tmp_path: Path) -> tuple[Instance, Path]:
    """A project with no dependencies and one passing test, and a checkout of its base commit."""
    files = {
        "pyproject.toml": PYPROJECT.format(name="plain", dependencies=""),
        "plain/__init__.py": "X = 1\n",
        "tests/test_plain.py": "from plain import X\n\n\ndef test_x():\n    assert X\n",
    }
    instance = _git_repo(tmp_path / "clones", "acme/plain", files)
    repos = RepoCache(tmp_path / "repos", mirror_dir=tmp_path / "clones", offline=True)
    tree = repos.checkout(instance.repo, instance.base_commit, tmp_path / "tree")
    return instance, tree


@pytest.mark.usefixtures("no_index")
def test_a_half_made_environment_is_rebuilt(wheelhouse: Path, tmp_path: Path) -> None:  # noqa: F811
    instance, tree = _plain_project(tmp_path)
    envs = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse)
    recipe = recipes_for(tree, dt.date(2025, 1, 1), envs.available_pythons(), preferred=HERE, dated=False)[0]
    killed = tmp_path / "envs" / "auto" / "acme__plain" / f"{recipe.name}-{recipe.key()}"
    (killed / "venv").mkdir(parents=True)  # what a build killed before its marker leaves
    env = envs.env_for(instance, tree)
    assert Path(env.python).is_relative_to(killed) and (killed / READY).is_file()


@pytest.mark.usefixtures("no_index")
def test_an_environment_copied_with_its_cache_is_built_again_where_it_now_is(
    wheelhouse: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    instance, tree = _plain_project(tmp_path)
    first = EnvManager(tmp_path / "envs", wheelhouse=wheelhouse).env_for(instance, tree)
    assert Path(first.python).is_relative_to(tmp_path / "envs")
    shutil.copytree(tmp_path / "envs", tmp_path / "copied", symlinks=True)
    # The copy's scripts and editable installs still name the original's paths: it is built again.
    env = EnvManager(tmp_path / "copied", wheelhouse=wheelhouse).env_for(instance, tree)
    assert Path(env.python).is_relative_to(tmp_path / "copied")
    ready = json.loads(next((tmp_path / "copied").rglob(READY)).read_text(encoding="utf-8"))
    assert Path(ready["python"]).is_relative_to(tmp_path / "copied")
    # Reached through a link, the cache is the same place: nothing is built again.
    (tmp_path / "link").symlink_to(tmp_path / "copied")
    marker = next((tmp_path / "copied").rglob(READY))
    before = marker.stat().st_mtime_ns
    EnvManager(tmp_path / "link", wheelhouse=wheelhouse).env_for(instance, tree)
    assert marker.stat().st_mtime_ns == before
