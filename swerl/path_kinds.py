"""What a file in a repository is, from its path alone: a test, vendored code, a module pytest collects.

One definition for every place that sorts paths: mining keeps tests out of the oracle (they become the
test patch) and vendored code out of it; Agentless demotes tests and vendored code in its ranking (fixes
seldom land there); the execution reward drops an answer's changes to tests before running them. Where
those places disagreed, one file could be a test to one of them and the code under test to another.

Paths are repository-relative with `/` separators, as git writes them. Names compare lower-cased and the
patterns span languages (`__tests__/`, `spec/`, `*.test.js`, `*_test.go`), since mining reads any
language; in a Python repository they mean what pytest's conventions mean.
"""

from __future__ import annotations

import re

_TEST_DIRS = frozenset({"test", "tests", "testing", "__tests__", "spec", "specs", "e2e"})
"""Directories whose whole contents are tests, fixtures and their data."""
_TEST_NAME = re.compile(r"test_.*|.*_tests?\.[^.]+|.*\.(?:test|spec)\.[^.]+|conftest\.py")

_VENDORED_DIRS = frozenset(
    {"vendor", "vendored", "_vendor", "third_party", "thirdparty", "extern", "externals"}
    | {"node_modules", "site-packages"}
)
"""Directories holding copies of other projects (`pip/_vendor/`, `third_party/`, installed packages)."""

_TEST_MODULE = re.compile(r"(?:^|/)(?:test_[^/]*|[^/]*_test)\.py$")


def _dirs_and_name(path: str) -> tuple[list[str], str]:
    *dirs, name = path.lower().split("/")
    return dirs, name


def is_test_path(path: str) -> bool:
    """A test or test support file: anything under a test directory, a file named like a test
    (`test_x.py`, `x_test.go`, `x_tests.py`, `x.test.ts`, `x.spec.js`), or a `conftest.py`."""
    dirs, name = _dirs_and_name(path)
    return not _TEST_DIRS.isdisjoint(dirs) or _TEST_NAME.fullmatch(name) is not None


def is_vendored_path(path: str, *, nested_packages: bool = False) -> bool:
    """Code copied from another project: under `vendor/`, `_vendor/`, `third_party/`, `extern/`,
    `node_modules/`, `site-packages/` or the like, at any depth.

    `nested_packages`: also a `packages/` directory below the top (`requests/packages/urllib3`, how Python
    projects bundled their dependencies before `_vendor/`). Off by default because a `packages/` below
    the top is also how JavaScript monorepos lay out their own code (`web/packages/ui/`); a caller that
    reads Python only can turn it on."""
    dirs, _ = _dirs_and_name(path)
    return not _VENDORED_DIRS.isdisjoint(dirs) or (nested_packages and "packages" in dirs[1:])


def is_test_module(path: str) -> bool:
    """A module pytest collects tests from by default (`python_files = test_*.py *_test.py`): the
    narrower sense, for naming files on pytest's command line. A `conftest.py` or a helper under
    `tests/` is a test path (`is_test_path`) but holds no tests to collect. Case-sensitive, as pytest's
    matching is."""
    return _TEST_MODULE.search(path) is not None
