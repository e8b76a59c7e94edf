"""The test setup a repository declares at its base commit, read as its date ran it: pytest's settings
kept in setup.cfg's `[pytest]` section, test requirements from every place they are declared (the
row's own patches included), and Python 2 code given Python 2.7 (offline: trees and git repositories
built here)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from calc_repo import build_calc, write_files

from swerl.edit_format import build_git_patch
from swerl.execution.envs import EnvManager, EnvSetupError, find_python
from swerl.execution.local import _interpreter_roots
from swerl.execution.recipes import (
    Recipe,
    declared_test_command,
    merge_requirements,
    patch_test_requirements,
    pytest_config_env,
    python2_evidence,
    read_declarations,
    recipe_from_json,
    recipes_for,
    refused_pytest_section,
)
from swerl.execution.uninstalled import install_outputs, write_install_outputs

ALL = ("2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13")
OLD = dt.date(2013, 5, 1)
SETUP = "from setuptools import setup\nsetup(name='old', version='0.1', packages=['old'])\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    write_files(root, files)
    return root


def test_a_pytest_section_of_setup_cfg_is_read_through_a_copy_as_pytest_would_have(tmp_path: Path) -> None:
    # pytest >= 4 stops with a usage error on this setup.cfg; its options (here: run only test_sub)
    # must still be what the run obeys, in the test runs of validate and of the reward alike.
    section = "[pytest]\naddopts = -k sub\n"
    reward, instance = build_calc(tmp_path, {"setup.cfg": f"[metadata]\nname = calc\n\n{section}"})
    reward.backend.envs.python = sys.executable  # the run is what is tested, not an environment build
    run = reward.backend.run_tests(instance, ["tests/test_ops.py"])
    assert run.status == "ok", run.log[-800:]
    assert run.results == {"tests/test_ops.py::test_sub": "PASSED"}


def test_only_a_section_pytest_would_refuse_is_handed_over(tmp_path: Path) -> None:
    cfg = "[pytest]\nnorecursedirs = build\n"
    assert refused_pytest_section(_tree(tmp_path / "a", {"setup.cfg": cfg})) == "norecursedirs = build"
    others = {
        "p": {"pytest.ini": "[pytest]\n"},
        "t": {"tox.ini": "[pytest]\n"},
        "c": {"setup.cfg": "[tool:pytest]\n"},
    }
    for name, other in others.items():
        files = {"setup.cfg": cfg + other.pop("setup.cfg", ""), **other}
        assert refused_pytest_section(_tree(tmp_path / name, files)) == "", name
    tree = _tree(tmp_path / "b", {"setup.cfg": cfg})
    values = pytest_config_env(tree, tmp_path / "config")
    assert values["PYTEST_ADDOPTS"].startswith("-c ") and values["PYTEST_ADDOPTS"].endswith(
        f"--rootdir {tree}"
    )
    assert (tmp_path / "config" / "swerl-pytest.ini").read_text() == "[pytest]\nnorecursedirs = build\n"
    assert pytest_config_env(_tree(tmp_path / "c", {"setup.cfg": "[metadata]\n"}), tmp_path / "x") == {}


def test_test_requirements_come_from_every_place_they_are_declared(tmp_path: Path) -> None:
    setup = SETUP.replace("packages=['old']", "packages=['old'], tests_require=['mock', 'pytest>=2.3']")
    tox = (
        "[testenv]\ndeps = nose\n\n[testenv:py33]\ndeps = pretend\n\n[testenv:docs]\ndeps = sphinx\n"
        "\n[testenv:flake8]\ndeps = flake8\n\n[testenv:py26]\ndeps = unittest2\n"
    )
    files = {
        "setup.py": setup,
        "tox.ini": tox,
        "reqs-testing.txt": "railroad\npytest==2.9.1\npy==1.4.17\n",
        "requirements/ci.txt": "freezegun\n",
        "requirements-docs.txt": "sphinx-rtd-theme\n",
        "requirements.txt": "six\n",
        "old/__init__.py": "",
    }
    decl = read_declarations(_tree(tmp_path, files))
    # Docs and linters are not what the tests import; pytest and its `py` are the recipe's choice.
    assert set(decl.test_requirements) == {"mock", "nose", "pretend", "railroad", "freezegun"}
    assert decl.runtime == ("six",)


def test_requirements_the_rows_patches_add_are_installed_and_recorded(tmp_path: Path) -> None:
    old_tox = "[tox]\nenvlist = py27\n\n[testenv]\ndeps =\n    nose\n"
    tree = _tree(tmp_path, {"setup.py": SETUP, "tox.ini": old_tox, "old/__init__.py": ""})
    test_patch = build_git_patch(
        {"tox.ini": old_tox},
        {"tox.ini": old_tox + "    freezegun\n", "requirements-test.txt": "pretend\n"},
    )
    assert patch_test_requirements(tree, [test_patch, ""]) == ["pretend", "freezegun"]
    recipes = recipes_for(tree, dt.date(2021, 3, 2), ALL, patches=[test_patch])
    assert recipes[0].name == "test-extras"
    assert recipes[0].requirements == ("nose", "pretend", "freezegun")
    assert recipes[0].decisions == ("test requirements the row's patches add: pretend, freezegun",)
    # A patch that does not fit the base commit adds nothing (its row fails to apply anyway).
    assert patch_test_requirements(tree, [test_patch.replace("nose", "nope")]) == []


@pytest.mark.parametrize(
    ("files", "found"),
    [
        ({"old/core.py": "print 'hello'\n"}, "Python 3 cannot parse old/core.py:1"),
        ({"tests/__init__.py": "from test_core import *\n", "tests/test_core.py": ""}, "implicit relative"),
        ({"old/net.py": "import urllib2\n"}, "imports urllib2"),
        ({"old/net.py": "try:\n    import cPickle\nexcept ImportError:\n    import pickle\n"}, ""),
        ({"old/core.py": "from . import net\nimport old.net\n", "old/net.py": ""}, ""),
    ],
)
def test_python2_code_is_told_by_its_syntax_and_imports(
    tmp_path: Path, files: dict[str, str], found: str
) -> None:
    tree = _tree(tmp_path, {"setup.py": SETUP, "old/__init__.py": "", **files})
    assert found in python2_evidence(tree, OLD) and bool(found) == bool(python2_evidence(tree, OLD))
    # After Python 2's end of life a file Python 3 cannot parse is newer Python, not older.
    assert python2_evidence(tree, dt.date(2021, 1, 1)) == ""


def test_python2_code_gets_python_27_without_a_cutoff_and_says_why(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"setup.py": SETUP, "old/__init__.py": "", "old/core.py": "print 'x'\n"})
    recipes = recipes_for(tree, OLD, ALL)
    assert [r.name for r in recipes] == ["editable", "pythonpath"]  # no "today": 2.7 has no date
    assert {(r.python, r.pytest, r.cutoff) for r in recipes} == {("2.7", "pytest>=4.6,<5.0", "")}
    assert recipes[0].decisions[0].startswith("Python 2.7: Python 3 cannot parse old/core.py:1")
    # Where this machine has no 2.7 (or the repository excludes it), Python 3 as before.
    assert recipes_for(tree, OLD, ALL[1:])[0].python == "3.6"
    # Python 3 code listing 2.7 among its Pythons keeps its Python 3.
    plain = _tree(tmp_path / "plain", {"setup.py": SETUP, "old/__init__.py": "x = 1\n"})
    assert recipes_for(plain, OLD, ALL)[0].python == "3.6"


def test_code_of_python_2s_years_listing_27_gets_27_after_python_3(tmp_path: Path) -> None:
    # jsonpickle's tests of 2013 install jsonlib, a C extension for Python 2 only: every Python 3
    # recipe fails to build, and the project, which lists 2.6, 2.7 and 3.2, ran those tests under 2.7.
    classifiers = ", ".join(f"'Programming Language :: Python :: {v}'" for v in ("2.6", "2.7", "3.2"))
    setup = f"from setuptools import setup\nsetup(name='old', classifiers=[{classifiers}])\n"
    tree = _tree(tmp_path, {"setup.py": setup, "old/__init__.py": "x = 1\n"})
    recipes = recipes_for(tree, OLD, ALL)
    assert [(r.name, r.python) for r in recipes] == [
        ("editable", "3.6"),
        ("pythonpath", "3.6"),
        ("editable-today", "3.6"),
        ("editable", "2.7"),
        ("pythonpath", "2.7"),
    ]
    assert recipes[3].cutoff == "" and recipes[3].pytest == "pytest>=4.6,<5.0"
    assert (
        recipes[3].decisions[0].startswith("Python 2.7 after Python 3's recipes: 2.7 is listed (classifiers)")
    )
    assert not any("2.7" in d for d in recipes[0].decisions)
    # Not after Python 2's end of life, not where 2.7 is not listed, not where this machine lacks it.
    assert {r.python for r in recipes_for(tree, dt.date(2020, 6, 1), ALL)} == {"3.6"}
    assert "2.7" not in {r.python for r in recipes_for(tree, OLD, ALL[1:])}
    plain = _tree(tmp_path / "plain", {"setup.py": SETUP, "old/__init__.py": "x = 1\n"})
    assert "2.7" not in {r.python for r in recipes_for(plain, OLD, ALL)}


def test_decisions_are_recorded_but_are_not_the_environments_identity() -> None:
    plain = Recipe("editable", "3.6", install="editable")
    why = Recipe("editable", "3.6", install="editable", decisions=("Python 2.7: ...",))
    assert plain.key() == why.key()
    assert "decisions" not in json.loads(plain.to_json())  # recipes recorded before keep their keys
    assert recipe_from_json(why.to_json()) == why


def test_the_sandbox_finds_the_directories_of_a_python_27() -> None:
    try:
        python = find_python("2.7")
    except EnvSetupError:
        pytest.skip("no Python 2.7 on this machine")
    roots = _interpreter_roots(python)
    assert any(str(Path(python).resolve()).startswith(root + "/") for root in roots)


def test_the_declared_test_command_is_read_and_recorded(tmp_path: Path) -> None:
    travis = "language: python\npython:\n  - 2.7\ninstall:\n  - pip install nose\nscript:\n  - nosetests -v\n"
    make = "all:\n\techo\n\ntest:\n\t$(PYTHON) tests/run_tests.py\n"
    tox = "[testenv]\ncommands =\n    sqlformat --version\n    py.test \\\n      --cov=old tests\n"
    assert declared_test_command(_tree(tmp_path / "t", {".travis.yml": travis})) == (
        "nose",
        "nosetests -v",
        ".travis.yml",
    )
    assert declared_test_command(_tree(tmp_path / "m", {"Makefile": make}))[:2] == (
        "unittest",
        "$(PYTHON) tests/run_tests.py",
    )
    tree = _tree(tmp_path / "x", {"tox.ini": tox, "Makefile": make, "setup.py": SETUP, "old/__init__.py": ""})
    assert declared_test_command(tree) == ("pytest", "py.test --cov=old tests", "tox.ini")
    recipe = recipes_for(tree, dt.date(2021, 1, 1), ALL)[0]
    assert (
        "test command `py.test --cov=old tests` (tox.ini, pytest): the tests run under pytest"
        in recipe.decisions
    )
    assert declared_test_command(_tree(tmp_path / "none", {"setup.py": SETUP})) == ("", "", "")


def test_imports_that_do_not_run_at_import_and_bootstrap_scripts_are_no_evidence(tmp_path: Path) -> None:
    # setuptools' ez_setup.py, copied into many projects that run on both Pythons, downloads with
    # urllib2 in a function: neither the script nor a function's import says the code is Python 2.
    function = "def fetch():\n    import urllib2\n    return urllib2\n"
    files = {
        "setup.py": SETUP,
        "ez_setup.py": "import urllib2\n",
        "old/__init__.py": "",
        "old/net.py": function,
    }
    assert python2_evidence(_tree(tmp_path / "a", files), OLD) == ""
    # Nor does a version switch, nor a sibling named as a standard module, nor an absolute_import file.
    files["old/net.py"] = "import sys\nif sys.version_info[0] == 2:\n    import urllib2\n"
    files["old/types.py"] = ""
    files["old/core.py"] = "import types\n"
    files["old/more.py"] = "from __future__ import absolute_import\nimport net\n"
    assert python2_evidence(_tree(tmp_path / "b", files), OLD) == ""
    files["old/net.py"] = "with open(__file__):\n    import urllib2\n"
    found = python2_evidence(_tree(tmp_path / "c", files), OLD)
    assert found == "imports urllib2, a Python 2 module (old/net.py:2)"


def test_code_no_test_imports_is_no_evidence_of_python_2(tmp_path: Path) -> None:
    # Seen on real trees: jsonpickle's tests/benchmark.py (print statements) beside tests that run on
    # both Pythons; tablib's vendored dbfpy, with its Python 3 twin dbfpy3 beside it.
    py2 = "print 'slow'\n"
    files = {
        "setup.py": SETUP,
        "old/__init__.py": "",
        "old/packages/__init__.py": "",
        "old/packages/dbfpy/dbf.py": py2,
        "tests/benchmark.py": py2,
        "tests/data/make_fixtures.py": py2,
        "benchmarks/__init__.py": py2,
        "docs/conf.py": py2,
        "run_profile.py": py2,
    }
    assert python2_evidence(_tree(tmp_path / "a", files), OLD) == ""
    # The test modules, the package's own modules and a one-module project's module are the code.
    for name, where in (
        ("tests/util_tests.py", "tests/util_tests.py:1"),
        ("tests/conftest.py", "tests/conftest.py:1"),
        ("test_root.py", "test_root.py:1"),
        ("old/core.py", "old/core.py:1"),
    ):
        tree = _tree(tmp_path / name.replace("/", "-"), {**files, name: py2})
        assert python2_evidence(tree, OLD).startswith(f"Python 3 cannot parse {where}")
    module = _tree(tmp_path / "module", {"setup.py": SETUP, "single.py": py2})
    assert python2_evidence(module, OLD).startswith("Python 3 cannot parse single.py:1")


@pytest.mark.parametrize(
    "files",
    [
        {"pytest.ini": "[pytest]\naddopts = --cov=. --cov-report=term-missing --pep8\n"},
        {".pytest.ini": "[pytest]\naddopts = --cov=. --pep8\n"},
        {"setup.cfg": "[pytest]\naddopts = --cov old --pep8\n"},
        {"tox.ini": "[pytest]\naddopts = -rs --cov=old --pep8\n"},
        {"pyproject.toml": '[tool.pytest.ini_options]\naddopts = ["--cov=old", "--pep8"]\n'},
    ],
)
def test_plugins_the_pytest_options_of_the_tree_need_are_test_requirements(
    tmp_path: Path, files: dict[str, str]
) -> None:
    # pytest stops with `unrecognized arguments: --cov=.` where the plugin is not installed.
    decl = read_declarations(_tree(tmp_path, {"setup.py": SETUP, "old/__init__.py": "", **files}))
    assert decl.test_requirements == ("pytest-cov", "pytest-pep8")


SCM_INIT = (
    "from importlib.metadata import version\n\nfrom calc._version import version as scm_version\n\n"
    "__version__ = version('acme-calc')\n"
)


META_TEST = "import calc\n\n\ndef test_version():\n    assert calc.__version__ == calc.scm_version\n"


def test_code_that_is_not_installed_gets_what_its_install_writes(tmp_path: Path) -> None:
    # A setuptools_scm version file that git does not track and the distribution's own metadata, both
    # read at import: without an install (nothing to build here) every test would stop at an
    # ImportError or PackageNotFoundError before running.
    files = {
        "pyproject.toml": '[tool.setuptools_scm]\nwrite_to = "calc/_version.py"\n',
        "setup.cfg": "[metadata]\nname = acme-calc\n",
        "calc/__init__.py": SCM_INIT,
        "tests/test_meta.py": META_TEST,
    }
    reward, instance = build_calc(tmp_path, files)
    run = reward.backend.run_tests(instance, ["tests/test_ops.py", "tests/test_meta.py"])
    assert run.status == "ok", run.log[-800:]
    assert run.results == {
        "tests/test_ops.py::test_sub": "PASSED",
        "tests/test_meta.py::test_version": "PASSED",
    }
    recipe = recipe_from_json(run.recipe)
    assert recipe.install == ""
    assert any("setuptools_scm writes calc/_version.py" in d and "acme-calc" in d for d in recipe.decisions)


def test_install_outputs_are_read_from_setup_py_and_only_where_the_code_needs_them(tmp_path: Path) -> None:
    setup = (
        "from setuptools import setup\nSCM = {'write_to': 'old/version.txt'}\n"
        "setup(name='old', use_scm_version=SCM, packages=['old'])\n"
    )
    reads = "import pkg_resources\n__version__ = pkg_resources.get_distribution(__name__).version\n"
    tree = _tree(tmp_path / "a", {"setup.py": setup, "old/__init__.py": reads})
    outputs = install_outputs(tree)
    assert (outputs.name, outputs.version, outputs.version_file) == ("old", "0.0.0", "old/version.txt")
    assert write_install_outputs(tree, tmp_path / "meta") == [str(tmp_path / "meta")]
    assert (tree / "old" / "version.txt").read_text() == "0.0.0\n"
    assert "Version: 0.0.0" in (tmp_path / "meta" / "old.egg-info" / "PKG-INFO").read_text()
    # Only the recipe that does not install records it (the others' install writes these files).
    recipes = recipes_for(tree, dt.date(2020, 5, 1), ("3.8",))
    assert [any("not installed" in d for d in r.decisions) for r in recipes] == [False, True, False]
    plain = _tree(tmp_path / "b", {"setup.py": SETUP, "old/__init__.py": "__version__ = '0.1'\n"})
    assert not install_outputs(plain)
    assert write_install_outputs(plain, tmp_path / "none") == []
    assert not (tmp_path / "none").exists()


def test_what_the_ci_installs_by_name_is_a_test_requirement(tmp_path: Path) -> None:
    # fuzzywuzzy's tests of 2015 import pep8, which only its .travis.yml installs (added by the PR
    # that added the test), wtforms' of 2013 Django, from the file its .travis.yml installs: without
    # them both sides stop at an ImportError.
    travis = (
        "language: python\ninstall:\n  - pip install -U pip setuptools && pip install -r reqs.txt mock\n"
        '  - if [[ $PY == 2.6 ]]; then pip install unittest2; fi\n  - pip install "six>=1.4" $EXTRA .\n'
        '  - pip install coveralls sphinx -e .\n  - "pip install -r ci/deps.txt --use-mirrors"\n'
        "script:\n  - python -m pytest\n"
    )
    files = {"setup.py": SETUP, "old/__init__.py": "", ".travis.yml": travis, "ci/deps.txt": "Django\n"}
    tree = _tree(tmp_path, {**files, "tests/unused_requirements.txt": "SQLAlchemy\n"})
    workflow = "jobs:\n  t:\n    steps:\n      - run: python -m pip install --upgrade pip pep8\n"
    test_patch = build_git_patch({}, {".github/workflows/ci.yml": workflow})
    recipes = recipes_for(tree, dt.date(2015, 11, 12), ALL, patches=[test_patch])
    assert recipes[0].requirements == ("mock", "six>=1.4", "Django", "pep8")
    assert recipes[0].decisions[:2] == (
        "test requirements the row's patches add: pep8",
        "test requirements the CI files install: mock, six>=1.4, Django",
    )


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"setup.cfg": "[nosetests]\nwith-doctest = 1\n"}, "setup.cfg configures nosetests"),
        (
            {"tests/__init__.py": "try:\n    import nose\nexcept ImportError:\n    raise\n"},
            "tests/__init__.py",
        ),
        (
            {"run-tests.py": "import nose\nnose.main()\n", "tox.ini": "[testenv]\ncommands = nosetests\n"},
            "runs nose",
        ),
        ({"tox.ini": "[testenv]\ncommands = nose2 -v\n"}, ""),
        ({"tox.ini": "[testenv]\ndeps = nose>=1.0\ncommands = nosetests\n"}, "declared"),
    ],
)
def test_nose_is_installed_where_the_tests_need_it_and_declare_it_nowhere(
    tmp_path: Path, files: dict[str, str], why: str
) -> None:
    # Python-Markdown's tests of 2011 stop at their package's `import nose`, declared nowhere but in
    # setup.cfg's [nosetests] section and its run-tests.py.
    tree = _tree(tmp_path, {"setup.py": SETUP, "old/__init__.py": "", **files})
    recipe = recipes_for(tree, dt.date(2013, 3, 1), ALL)[0]
    noted = [d for d in recipe.decisions if d.startswith("nose installed")]
    if why == "declared":
        assert recipe.requirements == ("nose>=1.0",) and noted == []
    elif why:
        assert "nose" in recipe.requirements and why in noted[0]
    else:
        assert recipe.requirements == () and noted == []


def test_a_requirement_named_by_a_url_is_taken_as_its_release(tmp_path: Path) -> None:
    # Python-Markdown's tox.ini of 2013 installs PyTidyLib from a git branch: today's branch, not the
    # date's, and an install that fails here takes every other test requirement (nose) down with it.
    tox = "[testenv]\ndeps = nose\n    git+https://github.com/waylan/pytidylib.git#egg=PyTidyLib\n"
    reqs = "other @ git+https://example.org/other.git\nhttps://example.org/archive.tar.gz\n"
    files = {"setup.py": SETUP, "old/__init__.py": "", "tox.ini": tox, "requirements-dev.txt": reqs}
    recipe = recipes_for(_tree(tmp_path, files), dt.date(2013, 3, 1), ALL)[0]
    assert recipe.requirements == ("other", "nose", "PyTidyLib")
    assert recipe.decisions == (
        "requirements named by a URL taken as their releases: other, "
        "https://example.org/archive.tar.gz left out, PyTidyLib",
    )


def _uv_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: Callable[..., None]) -> EnvManager:
    """An environment manager whose installs go through uv into a Python 3 venv at tmp_path/env, each
    install step handed to `step` instead of run."""
    manager = EnvManager(tmp_path / "cache")
    (tmp_path / "env" / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "venv" / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setattr(manager, "_uv", lambda: "/usr/bin/uv")
    monkeypatch.setattr(manager, "_pip_step", step)
    return manager


def test_nose_is_resolved_without_the_cutoff_like_the_build_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nose before 1.3.7 reaches Python 3 only through 2to3 at build, which today's setuptools does not
    # run: bleach's tests of December 2014 stopped at a SyntaxError in nose/core.py.
    commands: list[list[str]] = []
    manager = _uv_installs(tmp_path, monkeypatch, lambda env, owner, cmd, cwd: commands.append(cmd))
    manager._install(tmp_path / "env", "acme/old", ["nose", "six"], tmp_path, "2014-12-01")
    exempt = {a.split("=")[1] for a in commands[0] if a.startswith("--exclude-newer-package=")}
    assert exempt == {"setuptools", "wheel", "nose"}
    assert commands[0][commands[0].index("--exclude-newer") + 1] == "2014-12-01"


def test_a_build_refused_for_its_2to3_is_tried_once_more_with_a_setuptools_that_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # jsonpickle's tests of 2013 pin feedparser==5.1.3, an sdist whose setup.py asks for 2to3:
    # setuptools >= 58 stops the build with "use_2to3 is invalid".
    commands: list[list[str]] = []

    def step(env: Path, owner: str, cmd: list[str], cwd: Path) -> None:
        commands.append(cmd)
        if "--build-constraints" not in cmd:
            raise EnvSetupError(f"... error in feedparser setup command: {failure}")

    manager = _uv_installs(tmp_path, monkeypatch, step)
    failure = "use_2to3 is invalid."
    manager._install(tmp_path / "env", "acme/old", ["feedparser==5.1.3"], tmp_path, "2013-06-01")
    assert len(commands) == 2 and commands[1][-1] == "feedparser==5.1.3"
    constraints = Path(commands[1][commands[1].index("--build-constraints") + 1])
    assert constraints.read_text(encoding="utf-8") == "setuptools<58\n"
    # Any other failure is the recipe's, without a second try.
    commands.clear()
    failure = "No solution found when resolving dependencies"
    with pytest.raises(EnvSetupError, match="No solution"):
        manager._install(tmp_path / "env", "acme/old", ["feedparser==5.1.3"], tmp_path, "2013-06-01")
    assert len(commands) == 1


def test_a_project_named_twice_is_installed_once_with_both_constraints(tmp_path: Path) -> None:
    # tablib of 2017: setup.py's install_requires says odfpy, requirements.txt odfpy==1.3.5; pip 20.3
    # (the installer of Python 2.7) refuses the whole install with "Double requirement given".
    assert merge_requirements(["odfpy", "tablib", "odfpy==1.3.5", "Markdown[extra]>=2", "markdown<3"]) == (
        "odfpy==1.3.5",
        "tablib",
        "Markdown[extra]<3,>=2",
    )
    # One project per marker; lines named once, URLs and what is not a requirement stay as written.
    lines = ["futures; python_version<'3'", "futures>=3", "pytest >= 3", "-e .", "git+https://x.org/y.git"]
    assert merge_requirements(lines) == tuple(lines)
    setup = "from setuptools import setup\nsetup(name='old', packages=['old'], install_requires=['odfpy'])\n"
    tree = _tree(tmp_path, {"setup.py": setup, "requirements.txt": "odfpy==1.3.5\n", "old/__init__.py": ""})
    pythonpath = next(r for r in recipes_for(tree, OLD, ALL) if r.name == "pythonpath")
    assert [r for r in pythonpath.requirements if "odfpy" in r.lower()] == ["odfpy==1.3.5"]
