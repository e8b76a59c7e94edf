"""The one definition of test, vendored and pytest-collected paths, and that every caller follows it."""

from __future__ import annotations

import pytest

from agentless.localize.files import compact_tree
from agentless.localize.index import is_peripheral_path
from data_pipeline.filter.rules import file_role
from swerl.path_kinds import is_test_module, is_test_path, is_vendored_path
from swerl.reward.execution import guarded_path

# path, is_test_path, is_vendored_path, is_vendored_path(nested_packages=True), is_test_module
TABLE = [
    ("src/flask/app.py", False, False, False, False),
    ("tests/test_app.py", True, False, False, True),
    ("tests/helpers.py", True, False, False, False),  # support code: a test path, nothing to collect
    ("tests/data/config.json", True, False, False, False),
    ("testing/python/raises.py", True, False, False, False),  # pytest's own suite
    ("pkg/test_util.py", True, False, False, True),
    ("pkg/util_test.py", True, False, False, True),
    ("flask_tests.py", True, False, False, False),  # flask's suite before tests/; pytest would not collect it
    ("src/pkg/conftest.py", True, False, False, False),
    ("Tests/UnitTests.cs", True, False, False, False),  # names compare lower-cased
    ("web/__tests__/App.js", True, False, False, False),
    ("web/src/App.test.tsx", True, False, False, False),
    ("web/src/app.spec.js", True, False, False, False),
    ("spec/models/user_spec.rb", True, False, False, False),
    ("e2e/login.ts", True, False, False, False),
    ("pkg/server_test.go", True, False, False, False),
    ("src/_pytest/python.py", False, False, False, False),
    ("src/_pytest/testing.py", False, False, False, False),  # a module named testing, not a directory
    ("attestation/contest.py", False, False, False, False),
    ("pip/_vendor/requests/api.py", False, True, True, False),
    ("third_party/zlib/inflate.c", False, True, True, False),
    ("deps/extern/fmt/format.h", False, True, True, False),
    ("web/node_modules/left-pad/index.js", False, True, True, False),
    ("requests/packages/urllib3/util.py", False, False, True, False),
    ("packages/core/x.py", False, False, False, False),  # a monorepo's own code at the top
]


@pytest.mark.parametrize(("path", "test", "vendored", "vendored_nested", "module"), TABLE)
def test_path_kinds_table(path: str, test: bool, vendored: bool, vendored_nested: bool, module: bool) -> None:
    assert is_test_path(path) is test
    assert is_vendored_path(path) is vendored
    assert is_vendored_path(path, nested_packages=True) is vendored_nested
    assert is_test_module(path) is module
    assert not module or test  # a collected module is always a test path


@pytest.mark.parametrize("path", [row[0] for row in TABLE])
def test_callers_follow_the_core_definition(path: str) -> None:
    """Mining's roles, the reward's guard and Agentless' ranking cannot drift apart again: a test path is
    a test to each of them, and vendored code is vendored to mining."""
    role = file_role(path)
    assert (role == "vendored") is is_vendored_path(path)
    if not is_vendored_path(path):
        assert (role == "test") is is_test_path(path)
    if is_test_path(path):
        assert guarded_path(path) and guarded_path(path, added=True)
    if path.endswith(".py"):
        name = path.rsplit("/", 1)[-1]
        assert (name in compact_tree([path])) is not is_test_path(path)
        assert name in compact_tree([path], include_tests=True)
    if is_vendored_path(path, nested_packages=True):
        assert is_peripheral_path(path)


def test_the_guard_is_test_paths_plus_the_runner_files() -> None:
    """The reward guards more than tests: what pytest reads to decide how it runs."""
    for runner in ("pytest.ini", "setup.cfg", "pyproject.toml", "tox.ini", "sub/sitecustomize.py", "x.pth"):
        assert guarded_path(runner) and not is_test_path(runner)
    assert guarded_path("pytest.py", added=True) and not guarded_path("pytest.py")
