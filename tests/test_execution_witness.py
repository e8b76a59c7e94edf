"""The test-outcome witness on its own: what it records next to a real pytest run, and what it vetoes.

The reward's tests (test_reward_execution.py) run it through the local harness against answers that
rewrite pytest's outcomes; here it must agree with an honest run test by test, whatever the outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swerl.execution import witness
from swerl.execution.base import parse_pytest_report
from swerl.execution.harness import EvalPlan
from swerl.execution.instances import Instance

MIXED = """import unittest

import pytest


def test_pass():
    pass


def test_fail():
    assert 1 == 2


@pytest.mark.xfail
def test_xfail():
    assert 0


def test_imperative_xfail():
    pytest.xfail("later")


@pytest.fixture
def broken():
    raise RuntimeError("setup")


def test_setup_error(broken):
    pass


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x == 1


class Case(unittest.TestCase):
    def test_ok(self):
        pass

    def test_bad(self):
        self.assertEqual(1, 2)


@pytest.mark.skip(reason="not here")
def test_skip():
    pass
"""


def _witnessed_run(tmp_path: Path, test_file: str) -> tuple[str, witness.Witness]:
    """pytest of this interpreter on `test_file` with the witness loaded as the backend loads it."""
    (tmp_path / "test_mixed.py").write_text(test_file, encoding="utf-8")
    plugin = witness.install(tmp_path / "plugin")
    records = tmp_path / "witness.jsonl"
    fd = os.open(records, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **witness.sandbox_env(plugin, fd, None)}
        argv = [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "test_mixed.py"]
        done = subprocess.run(argv, cwd=tmp_path, env=env, pass_fds=(fd,), capture_output=True, text=True)
    finally:
        os.close(fd)
    return done.stdout, witness.read(records)


def test_the_witness_agrees_with_an_honest_run_on_every_kind_of_outcome(tmp_path: Path) -> None:
    log, seen = _witnessed_run(tmp_path, MIXED)
    assert (seen.started, seen.finished, seen.tampered, seen.distributed) == (True, True, [], False)
    logged = parse_pytest_report(log)
    assert logged == {t: s for t, s in seen.statuses.items() if t != "test_mixed.py::test_skip"}
    assert (
        logged["test_mixed.py::Case::test_bad"] == "FAILED" and logged["test_mixed.py::test_xfail"] == "XFAIL"
    )
    assert logged["test_mixed.py::test_setup_error"] == "ERROR"
    # -rA names a skip by its line, not its test: the witness names it.
    assert seen.statuses["test_mixed.py::test_skip"] == "SKIPPED"


def test_the_witness_leaves_the_tests_the_environment_it_found(tmp_path: Path) -> None:
    probe = (
        "import os\n\n\ndef test_env():\n"
        "    assert not {'SWERL_WITNESS_FD', 'PYTEST_ADDOPTS', 'PYTHONPATH'} & set(os.environ)\n"
    )
    log, seen = _witnessed_run(tmp_path, probe)
    assert seen.statuses == {"test_mixed.py::test_env": "PASSED"}, log


def test_only_pytest_commands_are_witnessed() -> None:
    for command in (
        "pytest -rA tests/test_x.py",
        "python -m pytest -q",
        "export A=1\nPYTHONHASHSEED=0 py.test",
    ):
        assert witness.witnessed(command), command
    for command in (
        "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 queries",
        "PYTHONWARNINGS='ignore::UserWarning' bin/test -C --verbose sympy/core/tests/test_basic.py",
        "tox --current-env -epy39 -v -- tests/test_build.py",
    ):
        assert not witness.witnessed(command), command


def _report(f2p: list[str], p2p: list[str]) -> dict[str, object]:
    return {
        "patch_successfully_applied": True,
        "resolved": True,
        "tests_status": {
            "FAIL_TO_PASS": {"success": f2p, "failure": []},
            "PASS_TO_PASS": {"success": p2p, "failure": []},
        },
    }


def test_confirm_moves_what_the_witness_did_not_see_pass_to_the_failures() -> None:
    pytest.importorskip("swebench")
    inst = Instance(
        "a__b-1", "a/b", "0" * 40, "x", fail_to_pass=("t.py::f",), pass_to_pass=("t.py::p", "t.py::s")
    )
    plan = EvalPlan((), "pytest -rA t.py", "parse_log_pytest", "pass_and_fail", "default")
    honest = witness.Witness(
        True, True, statuses={"t.py::f": "PASSED", "t.py::p": "PASSED", "t.py::s": "SKIPPED"}
    )
    report = _report(["t.py::f"], ["t.py::p", "t.py::s", "[100%]"])
    assert witness.confirm(inst, plan, report, honest) == (report, None)
    # A pass-to-pass test whose failure the log shows as a skip (which the harness counts as kept).
    lied = witness.Witness(
        True, True, statuses={"t.py::f": "PASSED", "t.py::p": "PASSED", "t.py::s": "FAILED"}
    )
    vetoed, why = witness.confirm(inst, plan, report, lied)
    assert vetoed["resolved"] is False and "t.py::s (FAILED)" in str(why)
    assert vetoed["tests_status"]["PASS_TO_PASS"] == {
        "success": ["t.py::p", "[100%]"],
        "failure": ["t.py::s"],
    }
    unseen = witness.Witness(True, True, statuses={"t.py::p": "PASSED", "t.py::s": "SKIPPED"})
    vetoed, why = witness.confirm(inst, plan, report, unseen)
    assert vetoed["tests_status"]["FAIL_TO_PASS"]["failure"] == ["t.py::f"] and "never run" in str(why)
    for broken, said in (
        (witness.Witness(False), "never loaded"),
        (witness.Witness(True, False, statuses=honest.statuses), "never saw the session end"),
        (
            witness.Witness(True, True, tampered=["x.y"], statuses=honest.statuses),
            "replaced during the run: x.y",
        ),
    ):
        vetoed, why = witness.confirm(inst, plan, report, broken)
        assert vetoed["resolved"] is False and said in str(why)
        assert vetoed["tests_status"]["FAIL_TO_PASS"]["success"] == []
