""" "Cannot judge here": where the gold patch itself does not resolve on this machine (its tests need the
network, its test command gives no results here), no answer is scored as wrong, in the execution reward
and in `agentless evaluate` alike; where it resolves, verdicts stay as they were. Real pytest runs on
the calc repository (`calc_repo`), offline.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from calc_repo import BASE, HALF, build_calc

from swerl.edit_format import build_git_patch
from swerl.execution.evaluate import GoldChecks, evaluate_local, gold_check_key, needs_network
from swerl.execution.instances import Instance

pytest.importorskip("swebench")

# Every test of the repository opens a connection first, as tests against a live service (httpbin) do:
# the sandbox has no network, so they fail here whatever the patch.
NEEDS_NETWORK = (
    "import socket\n\nimport pytest\n\n\n@pytest.fixture(autouse=True)\ndef service():\n"
    "    socket.create_connection(('127.0.0.1', 9), timeout=5).close()\n"
)
# A conftest.py that fails to import here: pytest runs no test and reports none.
NO_RESULTS = "import module_not_on_this_machine  # noqa\n"


def _wrong() -> str:
    return build_git_patch({"calc/ops.py": BASE["calc/ops.py"]}, {"calc/ops.py": HALF})


def test_where_the_gold_patch_needs_the_network_no_answer_scores_zero(tmp_path: Path) -> None:
    reward, inst = build_calc(tmp_path, {"tests/conftest.py": NEEDS_NETWORK})
    calls: list[str] = []

    class Counting:
        def __init__(self) -> None:
            self.repos = reward.backend.repos
            self.envs = reward.backend.envs

        def evaluate(self, *args: object) -> object:
            calls.append("gold" if args[1] == inst.patch else "other")
            return reward.backend.evaluate(*args)  # type: ignore[arg-type]

    counting = type(reward)(Counting())  # type: ignore[arg-type]
    results = counting.score_group(inst, [inst.patch, _wrong(), ""])
    gold, wrong, empty = results
    for result in (gold, wrong):
        assert (result.reward, result.kind, result.error) == (None, "infra_error", "gold_unresolved")
        assert "need the network" in str(result.message) and result.attempts == 1  # known: not retried
    assert (empty.reward, empty.kind) == (0.0, "unresolved")  # no patch at all is wrong anywhere
    # The gold answer's run is the gold check's: one run of the gold patch for the group, kept with its log.
    assert sorted(calls) == ["gold", "other"]
    checked = list((tmp_path / "gold" / inst.instance_id).glob("*/test_output.txt"))
    assert len(checked) == 1 and checked[0].read_text() == gold.log

    # A fresh reward over the same cache asks the kept verdict: no test runs again.
    again = type(reward)(Counting())  # type: ignore[arg-type]
    assert again.score_patch(inst, _wrong()).error == "gold_unresolved" and calls[2:] == ["other"]


def test_where_the_tests_give_no_results_here_the_reward_is_null_and_evaluate_cannot_judge(
    tmp_path: Path,
) -> None:
    reward, inst = build_calc(tmp_path, {"tests/conftest.py": NO_RESULTS})
    for patch in (inst.patch, _wrong()):
        result = reward.score_patch(inst, patch)
        assert (result.reward, result.kind, result.error) == (None, "infra_error", "no_test_results")
        assert "module_not_on_this_machine" in str(result.message)

    iid = inst.instance_id
    model = {iid: {"instance_id": iid, "model_name_or_path": "m", "model_patch": _wrong()}}
    checks = GoldChecks(reward.backend, tmp_path / "gold")
    report = evaluate_local([inst], model, reward.backend, tmp_path / "eval", gold_checks=checks)
    row = report["instances"][iid]
    assert row["status"] == "error" and row["cannot_judge"] and report["unresolved_ids"] == []
    assert report["cannot_judge_ids"] == report["error_ids"] == [iid] and report["completed_instances"] == 0


def test_where_the_gold_patch_resolves_verdicts_are_unchanged_and_a_validated_row_is_not_asked(
    tmp_path: Path,
) -> None:
    reward, inst = build_calc(tmp_path)
    wrong = reward.score_patch(inst, _wrong())
    assert (wrong.reward, wrong.kind, wrong.fail_to_pass) == (0.0, "unresolved", (1, 2))
    assert (reward.score_patch(inst, inst.patch).reward, reward.score_patch(inst, "").reward) == (1.0, 0.0)
    iid = inst.instance_id
    model = {iid: {"instance_id": iid, "model_name_or_path": "m", "model_patch": _wrong()}}
    checks = GoldChecks(reward.backend, tmp_path / "gold")
    report = evaluate_local([inst], model, reward.backend, tmp_path / "eval", gold_checks=checks)
    assert report["unresolved_ids"] == [iid] and report["cannot_judge_ids"] == []

    # A row of `swerl data validate` (it names its environment's recipe) was admitted by running its gold
    # patch: it is not asked again.
    class Unused:
        repos = reward.backend.repos

        def evaluate(self, *args: object) -> object:
            raise AssertionError("a validated row's gold patch was run again")

    validated = dataclasses.replace(inst, extra={**inst.extra, "env_recipe": '{"python": "3.11"}'})
    assert GoldChecks(Unused(), tmp_path / "unused").failures(validated) == {}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "network"),
    [
        ("E   ConnectionRefusedError: [Errno 111] Connection refused", True),
        ("E   socket.gaierror: [Errno -3] Temporary failure in name resolution", True),
        ("ConnectionError: HTTPConnectionPool(host='httpbin.org'): Max retries exceeded", True),
        ("E   OSError: [Errno 101] Network is unreachable", True),
        ("E   AssertionError: assert 1 == 2", False),
        ("E   KeyError: 'connection'", False),
    ],
)
def test_network_errors_are_recognized_in_failure_reasons(reason: str, network: bool) -> None:
    assert needs_network(reason) is network


def test_validate_names_the_tests_that_need_the_network() -> None:
    """A row's test that fails after the fix with a network error is named as such, in neither list."""
    from data_pipeline.validate.outcomes import judge
    from swerl.execution.base import TestRun

    log = (
        "FAILED t.py::test_get - requests.exceptions.ConnectionError: HTTPConnectionPool(host='httpbin.org',"
        " port=80): Max retries exceeded with url: /get\nFAILED t.py::test_fix - AssertionError\n"
    )
    before = TestRun("ok", {"t.py::test_fix": "FAILED", "t.py::test_get": "FAILED"}, log)
    after = TestRun("ok", {"t.py::test_fix": "PASSED", "t.py::test_get": "FAILED"}, log)
    verdict = judge([before], [after])
    assert (verdict.reason, verdict.fail_to_pass, verdict.network) == (
        "executable",
        ["t.py::test_fix"],
        ["t.py::test_get"],
    )
    only_network = judge([before], [dataclasses.replace(after, results={"t.py::test_get": "FAILED"})])
    assert only_network.reason == "no_fail_to_pass" and "1 need the network" in only_network.detail


def test_a_kept_gold_check_belongs_to_its_fixed_interpreter() -> None:
    """A gold check found "cannot judge" with a wrong `--python` must not answer for the corrected one;
    without a fixed interpreter the key is what it always was (checks kept earlier stay valid)."""
    row = Instance("acme__calc-1", "acme/calc", "abc", "", patch="p", fail_to_pass=("t::a",))
    bare = gold_check_key(row, None)
    assert gold_check_key(row, "/venv/a/bin/python") != gold_check_key(row, "/venv/b/bin/python")
    assert gold_check_key(row, "/venv/a/bin/python") != bare
    assert bare == gold_check_key(row, "")
    assert bare != gold_check_key(dataclasses.replace(row, patch="q"), None)
