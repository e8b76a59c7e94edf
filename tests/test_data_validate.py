"""`swerl data validate` on a real git history built here: PRs that fix a bug and change its tests, mined
with `swerl data mine --local`, then run before and after their fix in the local backend's sandbox.

One PR per verdict: a fix with a new failing test (executable), a code-only change (no test change), a
new test file that only the fix makes importable (executable), a test that passes before the fix (no
fail-to-pass test), a test file that imports a module nobody wrote (collection error), a test that
sleeps past the timeout. Flakiness is judged on hand-made runs: a real flaky test would make this test
flaky too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Container, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_pipeline.validate import runner
from data_pipeline.validate.outcomes import judge
from data_pipeline.validate.rows import Brief, load_input, output_row, output_table
from data_pipeline.validate.runner import BackendOptions, RowTask, _verdict, validate
from swerl.cli.main import main
from swerl.execution.base import BUILD_FAILED, TestRun
from swerl.execution.harness import patch_test_files
from swerl.execution.instances import Instance
from swerl.sandbox.bwrap import isolation_available
from swerl.synth_repo import FastImport, git

ISOLATION = "bwrap" if isolation_available() is None else "none"
ROOT = Path(__file__).resolve().parents[1]

OPS = '''"""Arithmetic."""


def add(a, b):
    return a - b


def mul(a, b):
    return a * b


def div(a, b):
    return a / b
'''
TEST_OPS = """from calc.ops import mul


def test_mul():
    assert mul(2, 3) == 6
"""


def _history(repo: Path) -> None:
    """The base commit (tagged v1.2.0) and six squash-merged PRs, one per verdict."""
    history = FastImport(start=1_700_000_000, step=60)
    ops = OPS
    tip = history.commit(
        "Initial import\n", {"calc/__init__.py": "", "calc/ops.py": ops, "tests/test_ops.py": TEST_OPS}
    )

    def pr(number: int, title: str, body: str, new_ops: str, tests: dict[str, str]) -> None:
        nonlocal tip, ops
        ops = new_ops
        message = f"{title} (#{number})\n\n{body}\n"
        tip = history.commit(message, {"calc/ops.py": ops, **tests}, parent=tip)

    test_add = (
        TEST_OPS.replace("import mul", "import add, mul") + "\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    pr(
        1,
        "Fix add",
        "add(2, 3) returns -1: it subtracts.",
        ops.replace("a - b", "a + b"),
        {"tests/test_ops.py": test_add},
    )
    pr(2, "Speed up mul", "mul should multiply in the other order.", ops.replace("a * b", "b * a"), {})
    neg = "from calc.ops import neg\n\n\ndef test_neg():\n    assert neg(2) == -2\n"
    pr(
        3,
        "Add neg",
        "There is no way to negate a number.",
        ops + "\n\ndef neg(a):\n    return -a\n",
        {"tests/test_neg.py": neg},
    )
    div = "from calc.ops import div\n\n\ndef test_div():\n    assert div(4, 2) == 2\n"
    new_div = ops.replace("return a / b", "return a / b if b else float('inf')")
    pr(4, "Divide by zero", "div(1, 0) raises ZeroDivisionError.", new_div, {"tests/test_div.py": div})
    sq = "from calc.missing import sq\n\n\ndef test_sq():\n    assert sq(3) == 9\n"
    pr(
        5,
        "Add sq",
        "There is no square function.",
        ops + "\n\ndef sq(a):\n    return a * a\n",
        {"tests/test_sq.py": sq},
    )
    slow = "import time\n\nfrom calc.ops import cube\n\n\ndef test_cube():\n    time.sleep(60)\n"
    pr(
        6,
        "Add cube",
        "There is no cube function.",
        ops + "\n\ndef cube(a):\n    return a ** 3\n",
        {"tests/test_cube.py": slow},
    )
    history.write(repo, checkout=True)
    base = git(repo, "rev-list", "--max-parents=0", "main").strip()
    git(repo, "tag", "v1.2.0", base)


@pytest.fixture(scope="module")
def mined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("validate")
    _history(root / "calc")  # a directory of clones for `--clones`: acme/calc is found as calc
    argv = ["data", "mine", "--local", str(root / "calc"), "--repo-name", "acme/calc", "--quiet"]
    assert (
        main([*argv, "--clones", str(root / "clones"), "--out", str(root / "mined"), "--workers", "1"]) == 0
    )
    return root / "mined"


def _options(root: Path, **extra: object) -> BackendOptions:
    options = {"cache_dir": root / "cache", "offline": True, "isolation": ISOLATION, "timeout_s": 120.0}
    return BackendOptions(**{**options, **extra})  # type: ignore[arg-type]


def _results(out: Path) -> dict[str, dict]:
    return {r["instance_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


# One run per side: every test run costs a pytest start in the sandbox (1-2 s on a busy machine); what
# repeats decide is tested on hand-made runs (`test_a_flaky_test_is_left_out`).
REPEATS = 1


@pytest.fixture(scope="module")
def validated(mined: Path) -> Path:
    """Every row but the slow one (`test_a_test_past_the_timeout`), as `swerl data validate` does."""
    rows = load_input(mined, [f"acme__calc-{n}" for n in range(1, 6)])
    assert rows.mined and rows.source is not None
    out = mined.parent / "validated"
    validate(
        rows,
        out,
        _options(mined.parent),
        input_name=str(mined),
        repeats=REPEATS,
        derive_version=True,
        local_source=Path(rows.source["path"]),
        progress=False,
    )
    return out


def test_each_row_gets_its_verdict(validated: Path) -> None:
    reasons = {iid: r["reason"] for iid, r in _results(validated).items()}
    assert reasons == {
        "acme__calc-1": "executable",
        "acme__calc-2": "no_test_change",
        "acme__calc-3": "executable",
        "acme__calc-4": "no_fail_to_pass",
        "acme__calc-5": "collection_error",
    }
    results = _results(validated)
    assert "No module named 'calc.missing'" in results["acme__calc-5"]["detail"].splitlines()[0]


def test_a_test_past_the_timeout(mined: Path, tmp_path: Path) -> None:
    rows = load_input(mined, ["acme__calc-6"])
    out = tmp_path / "out"
    options = _options(mined.parent, timeout_s=3.0)
    # The mining run's clone: this test may run before any other has filled the cache's mirror.
    source = Path(rows.source["path"])
    validate(rows, out, options, input_name="x", repeats=1, local_source=source, progress=False)
    record = _results(out)["acme__calc-6"]
    # Before the fix its file does not even import; after it, the test sleeps past the wall clock (on a
    # loaded machine the before-run may already take that long: the verdict is the same).
    assert record["reason"] == "timeout" and ": past 3 s" in record["detail"]


def test_fail_to_pass_and_pass_to_pass(validated: Path) -> None:
    rows = {r["instance_id"]: r for r in pq.read_table(validated / "test.parquet").to_pylist()}
    assert sorted(rows) == ["acme__calc-1", "acme__calc-3"]
    fix = rows["acme__calc-1"]
    assert json.loads(fix["FAIL_TO_PASS"]) == ["tests/test_ops.py::test_add"]
    assert json.loads(fix["PASS_TO_PASS"]) == ["tests/test_ops.py::test_mul"]
    # A new test file that imports what the fix adds does not even collect before it: failing there.
    assert json.loads(rows["acme__calc-3"]["FAIL_TO_PASS"]) == ["tests/test_neg.py::test_neg"]
    assert fix["version"] == "1.2"  # the nearest tag at the base commit, v1.2.0
    assert fix["environment_setup_commit"] == fix["base_commit"]
    assert "a + b" in fix["patch"] and "test_add" in fix["test_patch"]
    assert fix["prompt"] and fix["oracle_new_content"]  # the SWE-RL columns ride along


def test_stats_prints_the_funnel(validated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "stats", str(validated)]) == 0
    out = capsys.readouterr().out
    assert "rows that change tests            4" in out
    assert "executable                        2 (50% of the rows that change tests)" in out
    assert "collection_error" in out and "no_fail_to_pass" in out
    assert (validated / "stats" / "funnel.png").stat().st_size > 0


def test_agentless_evaluates_the_output(validated: Path, tmp_path: Path) -> None:
    """The harness's own grading on the validated folder: gold resolves every row, no patch none."""
    for predictions, resolved in (("gold", 2), ("empty", 0)):
        argv = ["agentless", "evaluate", "--dataset", str(validated), "--predictions", predictions]
        argv += [
            "--cache-dir",
            str(validated.parent / "cache"),
            "--offline",
            "--out",
            str(tmp_path / predictions),
        ]
        assert main([*argv, *(["--unsafe-no-isolation"] if ISOLATION == "none" else [])]) == 0
        report = json.loads((tmp_path / predictions / "report.json").read_text())
        assert len(report["resolved_ids"]) == resolved, report


def test_a_flaky_test_is_left_out() -> None:
    def run(**results: str) -> TestRun:
        return TestRun("ok", {f"t.py::{name}": status for name, status in results.items()})

    before = [
        run(fix="FAILED", flip="FAILED", keep="PASSED"),
        run(fix="FAILED", flip="PASSED", keep="PASSED"),
    ]
    after = [run(fix="PASSED", flip="PASSED", keep="PASSED")] * 2
    verdict = judge(before, after)
    assert (verdict.reason, verdict.fail_to_pass, verdict.pass_to_pass) == (
        "executable",
        ["t.py::fix"],
        ["t.py::keep"],
    )
    assert verdict.flaky == ["t.py::flip"]
    only = judge([run(flip="FAILED"), run(flip="FAILED")], [run(flip="PASSED"), run(flip="FAILED")])
    assert (only.reason, only.flaky) == ("only_flaky", ["t.py::flip"])


def test_a_pytest_that_cannot_start_is_a_collection_error_named_by_its_traceback() -> None:
    log = 'Traceback (most recent call last):\n  File "x.py", line 1\n'
    log += "ImportError: cannot import name 'imap'\n"
    ran = TestRun("ok", {"t.py::keep": "PASSED"})
    verdict = judge([ran, ran], [TestRun("error", log=log)] * 2)
    assert verdict.reason == "collection_error"
    assert verdict.detail.startswith("after the fix: <pytest>: ImportError: cannot import name 'imap'\n")


def test_a_gold_patch_whose_extensions_do_not_build_is_an_environment_failure() -> None:
    """The row's own fix compiles for its authors: failing here is this environment's, not a verdict."""

    class Backend:
        timeout_s = 60.0

        def run_tests(self, instance: Instance, tests: object, patches: object, test_patch: str) -> TestRun:
            if not patches:
                return TestRun("ok", {"t.py::fix": "FAILED"}, recipe="r")
            return TestRun(
                "build_failed", log=f"_speedups.c:3: error: expected ';'\n{BUILD_FAILED}", recipe="r"
            )

    instance = Instance("acme__c-1", "acme/c", "0" * 40, "issue", patch="p", test_patch="t")
    verdict, recipe = _verdict(Backend(), instance, 2)  # type: ignore[arg-type]
    assert (verdict.reason, recipe) == ("env_failed", "r")
    assert verdict.detail.startswith("after: _speedups.c:3: error") and BUILD_FAILED in verdict.detail


def test_an_environment_that_cannot_be_made_is_named(mined: Path, tmp_path: Path) -> None:
    specs = tmp_path / "specs.json"
    specs.write_text(json.dumps({"acme/calc": {"*": {"python": "1.9"}}}))
    rows = load_input(mined, ["acme__calc-1"])
    assert rows.source is not None
    out = tmp_path / "out"
    options = _options(mined.parent, env_specs=specs)
    validate(rows, out, options, input_name="x", local_source=Path(rows.source["path"]), progress=False)
    record = _results(out)["acme__calc-1"]
    assert record["reason"] == "env_failed" and "no Python 1.9" in record["detail"]


# A gold patch that also edits a test file: the test patch's version of the file is what runs.
EDITS_A_TEST = "".join(
    line + "\n"
    for line in [
        "diff --git a/tests/test_ops.py b/tests/test_ops.py",
        "--- a/tests/test_ops.py",
        "+++ b/tests/test_ops.py",
        "@@ -2,4 +2,4 @@ from calc.ops import mul",
        " ",
        " ",
        " def test_mul():",
        "-    assert mul(2, 3) == 6",
        "+    assert mul(2, 3) == 7",
    ]
)


def test_swebench_rows(mined: Path, validated: Path, tmp_path: Path) -> None:
    """Rows in SWE-bench's schema with --clones: one as mined, one whose gold patch does not apply, one
    whose gold patch breaks a test that the test patch then puts back."""
    rows = pq.read_table(validated / "test.parquet").to_pylist()
    columns = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement")
    good = {k: rows[0][k] for k in columns}
    bad = {**good, "instance_id": "acme__calc-99", "patch": good["patch"].replace("a - b", "a % b")}
    sneaky = {**good, "instance_id": "acme__calc-98", "patch": good["patch"] + EDITS_A_TEST}
    dataset = tmp_path / "lite.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in (good, bad, sneaky)))
    argv = ["data", "validate", str(dataset), "--out", str(tmp_path / "out"), "--clones", str(mined.parent)]
    argv += [
        "--cache-dir",
        str(tmp_path / "cache"),
        "--offline",
        "--quiet",
        "--repeats",
        "1",
        "--mutants",
        "0",
    ]
    assert main([*argv, *(["--unsafe-no-isolation"] if ISOLATION == "none" else [])]) == 0
    results = _results(tmp_path / "out")
    for iid in ("acme__calc-1", "acme__calc-98"):
        assert results[iid]["FAIL_TO_PASS"] == ["tests/test_ops.py::test_add"]
        assert results[iid]["PASS_TO_PASS"] == ["tests/test_ops.py::test_mul"]
    assert results["acme__calc-99"]["reason"] == "patch_not_applied"
    assert results["acme__calc-99"]["detail"].startswith("after: patch 0 does not apply")


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_two_workers_give_the_same_lists(
    engine: str, mined: Path, validated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if engine == "ray":
        pytest.importorskip("ray")
        monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a local instance, never someone's cluster
        # Ray's workers import the project from the driver's environment.
        monkeypatch.setenv(
            "PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        )
    ids = ["acme__calc-1", "acme__calc-3"]
    rows = load_input(mined, ids)
    out = tmp_path / "out"
    options = _options(mined.parent)
    validate(
        rows,
        out,
        options,
        input_name="x",
        repeats=REPEATS,
        workers=2,
        engine=engine,
        derive_version=True,
        progress=False,
    )
    keys = ("FAIL_TO_PASS", "PASS_TO_PASS", "reason", "version")
    expected, got = _results(validated), _results(out)
    assert [{k: got[i][k] for k in keys} for i in ids] == [{k: expected[i][k] for k in keys} for i in ids]


def test_a_killed_run_resumes(mined: Path, validated: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    ids = ["acme__calc-1", "acme__calc-3"]
    argv = [sys.executable, "-m", "swerl", "data", "validate", str(mined), "--out", str(out), "--quiet"]
    argv += [
        "--cache-dir",
        str(mined.parent / "cache"),
        "--offline",
        "--repeats",
        "1",
        "--mutants",
        "0",  # as `validated` (test strength: test_validate_strength)
        "--instance-ids",
        *ids,
    ]
    argv += ["--unsafe-no-isolation"] if ISOLATION == "none" else []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count("\n") >= 1):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = results.read_text().splitlines()
    assert len(first) < len(ids), "the run ended before it could be killed"
    with results.open("a") as handle:  # what a kill in the middle of a write leaves
        handle.write('{"instance_id": "acme__calc-4", "rea')
    assert main(argv[3:]) == 0
    lines = results.read_text().splitlines()
    assert lines[: len(first)] == first  # nothing judged before the kill was judged again
    assert sorted(json.loads(line)["instance_id"] for line in lines) == ids
    rows = pq.read_table(out / "test.parquet").to_pylist()
    reference = pq.read_table(validated / "test.parquet").to_pylist()
    assert rows == [r for r in reference if r["instance_id"] in ids]


def test_bad_input_is_one_line(mined: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    not_rows = tmp_path / "rows.parquet"
    not_rows.write_text("not parquet")
    cases = [
        ([str(not_rows)], "not a Parquet file"),
        ([str(mined), "--instance-ids", "acme__calc-404"], "instance ids not in"),
        ([str(mined / "manifest.json")], "lacks instance_id, repo, base_commit"),
    ]
    argv = ["data", "validate", str(mined), "--out", str(mined), "--offline"]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 1
    assert "is a mining output; validate into a folder of its own" in capsys.readouterr().err
    for args, said in cases:
        argv = ["data", "validate", *args, "--out", str(tmp_path / "out"), "--offline"]
        assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 1
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1, err
    # A second run into the same folder must validate the same input.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run.json").write_text(
        json.dumps({"kind": "validate", "input": "/elsewhere", "repeats": 2})
    )
    argv = ["data", "validate", str(mined), "--out", str(tmp_path / "other"), "--offline"]
    assert main([*argv, "--cache-dir", str(tmp_path / "cache")]) == 1
    assert "holds a validation with input '/elsewhere'" in capsys.readouterr().err


def test_test_files_leave_out_deleted_and_non_python_files() -> None:
    def diff(path: str, new: str = "", head: str = "") -> str:
        hunk = "@@ -1 +1 @@\n-x\n+y\n"
        return f"diff --git a/{path} b/{path}\n{head}--- a/{path}\n+++ {new or 'b/' + path}\n{hunk}"

    patch = diff("tests/test_a.py")
    patch += diff("tests/test_old.py", "/dev/null", "deleted file mode 100644\n") + diff("tests/data.json")
    # An empty file deleted has no hunk and no `---`/`+++` lines (bleach moved its tests/__init__.py).
    init = "pkg/tests/__init__.py"
    patch += f"diff --git a/{init} b/{init}\ndeleted file mode 100644\nindex e69de29..0000000\n"
    assert patch_test_files(patch) == ["tests/test_a.py"]


def _judged(task: RowTask) -> dict:
    """A stand-in for `validate_row` (top level: the workers unpickle it): every other row executable,
    after a pause long enough for the rows in flight to pile up."""
    time.sleep(0.02)
    n = int(task.instance.instance_id.rsplit("-", 1)[1])
    return {
        "instance_id": task.instance.instance_id,
        "reason": "executable" if n % 2 == 0 else "no_fail_to_pass",
        "detail": "",
        "FAIL_TO_PASS": [f"tests/test_ops.py::test_{n}"],
        "PASS_TO_PASS": [],
        "flaky": [],
        "env_recipe": "{}",
        "version": "1.2",
        "seconds": 0.02,
    }


class _Unheld:
    """Rows made afresh on every read, as a file's are, that refuse to be read ahead: a row is handed
    out only while at most `bound` rows read before it are still alive. With `late_column`, rows from
    the 40th on have a column the rows before them lack."""

    def __init__(self, count: int, bound: int, late_column: bool = False) -> None:
        self.count, self.bound, self.late_column = count, bound, late_column
        self.alive: weakref.WeakSet[Instance] = weakref.WeakSet()

    def _id(self, n: int) -> str:
        return f"acme__calc-{n}"

    def briefs(self) -> Iterator[Brief]:
        for n in range(self.count):
            yield Brief(self._id(n), "acme/calc", "0" * 40, EDITS_A_TEST)

    def instances(self, wanted: Container[str] | None = None) -> Iterator[Instance]:
        for n in range(self.count):
            if wanted is not None and self._id(n) not in wanted:
                continue
            if len(self.alive) > self.bound:
                raise AssertionError(f"row {n} read while {len(self.alive)} rows before it are held")
            extra = {"prompt_tokens": n, **({"note": f"late {n}"} if self.late_column and n >= 40 else {})}
            instance = Instance(
                self._id(n), "acme/calc", "0" * 40, f"issue {n}", "fix", EDITS_A_TEST, extra=extra
            )
            self.alive.add(instance)
            yield instance


@pytest.mark.parametrize(("row_group_bytes", "late_column"), [(None, False), (None, True), (1, True)])
def test_rows_are_read_only_as_they_are_run(
    row_group_bytes: int | None, late_column: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most the rows in flight (2 per worker) are held, and test.parquet is the file one write of
    all the executable rows makes: the same bytes in one row group, the same rows in several, also when
    later rows have a column the first ones lack."""
    monkeypatch.setattr(runner, "validate_row", _judged)
    monkeypatch.setattr(runner, "_prepare_mirrors", lambda *args: None)
    if row_group_bytes is not None:
        monkeypatch.setattr(runner, "ROW_GROUP_BYTES", row_group_bytes)
    rows = _Unheld(60, bound=2 * 2 + 1, late_column=late_column)
    out = tmp_path / "out"
    summary = validate(rows, out, _options(tmp_path), input_name="x", workers=2, progress=False)
    assert summary.judged == 60 and summary.counts["executable"] == 30
    expected = [
        output_row(instance, _results(out)[instance.instance_id])
        for instance in _Unheld(60, bound=60, late_column=late_column).instances()
        if int(instance.instance_id.rsplit("-", 1)[1]) % 2 == 0
    ]
    pq.write_table(output_table(expected), tmp_path / "whole.parquet")
    written = pq.ParquetFile(out / "test.parquet")
    assert written.metadata.num_row_groups == (1 if row_group_bytes is None else 2)
    assert written.read().equals(pq.read_table(tmp_path / "whole.parquet"))
    assert ("note" in written.schema_arrow.names) == late_column
    if row_group_bytes is None:
        assert (out / "test.parquet").read_bytes() == (tmp_path / "whole.parquet").read_bytes()
