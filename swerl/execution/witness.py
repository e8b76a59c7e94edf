"""The test-outcome witness: what each test really did, seen from pytest's machinery, not from the log.

The code under test runs inside pytest's process, so it can rewrite what pytest reports: monkeypatch
report construction, wrap a runtest hook, print its own `PASSED` lines. The log the harness parses then
says what the code wants. The witness (`swerl_witness.py`, a pytest plugin loaded before any code under
test) records each test phase's outcome from the call's own exception info to a file descriptor of ours,
and whether pytest's reporting machinery was replaced while the tests ran. `confirm` then vetoes a pass
the witness does not confirm: a listed test the harness counts as passed (or, for pass-to-pass, as
skipped) that the witness saw fail or never saw moves to the failures, and a run whose machinery was
replaced, or whose witness never loaded or never saw the session end, keeps no success at all.

Only pytest commands are witnessed (`witnessed`); others (Django's runtests.py, sympy's bin/test,
sphinx's tox) run as they are. The limit: the witness lives in the same process as the code under
test, so code written against this witness (writing records to its descriptor, unregistering it,
patching it) can still defeat it; what it stops is the generic rewriting of pytest's outcomes.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swerl.execution.harness import EvalPlan, harness_api, test_spec
from swerl.execution.instances import Instance

PLUGIN = "swerl_witness"
"""The plugin's module name in the sandbox (an answer may not add a module of that name)."""
FD_VAR = "SWERL_WITNESS_FD"
CHANGED_VAR = "SWERL_WITNESS_CHANGED"
_SOURCE = Path(__file__).with_name(f"{PLUGIN}.py")
_PYTEST = re.compile(r"^(?:\w+=\S*\s+)*(?:\S*/)?(?:pytest|py\.test|python[\d.]*\s+-m\s+pytest)(?:\s|$)", re.M)
_KINDS = ("FAIL_TO_PASS", "PASS_TO_PASS")


def witnessed(test_cmd: str) -> bool:
    """Whether the test command runs pytest itself (a line starting with pytest, py.test or python -m
    pytest, after variable assignments): the commands the witness can be loaded into."""
    return bool(_PYTEST.search(test_cmd))


def install(folder: Path) -> Path:
    """The plugin copied into `folder` (to put first on PYTHONPATH, read-only in the sandbox)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_SOURCE, folder / _SOURCE.name)
    return folder


def sandbox_env(
    folder: Path, fd: int, pythonpath: str | None, changed: Collection[str] | None = None
) -> dict[str, str]:
    """The variables that load the plugin from `folder` and name its descriptor and the files the
    answer's patch changed (`changed`: a runtest hook the repository ships in a file the answer left
    alone is the repository's own plugin, not the answer's); the plugin removes them again as it loads,
    so the tests see the harness's environment."""
    paths = [str(folder), *([pythonpath] if pythonpath else [])]
    env = {"PYTEST_ADDOPTS": f"-p {PLUGIN}", FD_VAR: str(fd), "PYTHONPATH": os.pathsep.join(paths)}
    if changed is not None:
        env[CHANGED_VAR] = json.dumps(sorted(changed))
    return env


@dataclass
class Witness:
    """What the plugin recorded in one run."""

    started: bool = False
    finished: bool = False
    distributed: bool = False
    tampered: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)
    """Test id (as pytest's -rA summary names it) -> PASSED, FAILED, ERROR, SKIPPED or XFAIL."""

    def summary(self) -> str:
        """The statuses as pytest's -rA summary lines, for the harness's own log parser."""
        return "".join(f"{status} {test}\n" for test, status in self.statuses.items())


_SETUP = {"error": "ERROR", "skip": "SKIPPED", "xfail": "XFAIL"}
_CALL = {"none": "PASSED", "error": "FAILED", "skip": "SKIPPED", "xfail": "XFAIL"}


def read(path: Path) -> Witness:
    """The records of a run: a test's status from its setup when that did not succeed, else from its
    call (the last record of each phase wins: a rerun plugin's last try); its teardown is left out, as
    the harness's summary counts it apart."""
    witness = Witness()
    phases: dict[str, dict[str, str]] = {}
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        event = record.get("e")
        if event == "start":
            witness.started = True
        elif event == "phase":
            phases.setdefault(str(record.get("id")), {})[str(record.get("when"))] = str(record.get("raised"))
        elif event == "check":
            witness.tampered += [str(t) for t in record.get("tampered") or []]
            witness.distributed = bool(record.get("distributed"))
            witness.finished = witness.finished or record.get("at") == "sessionfinish"
    witness.tampered = list(dict.fromkeys(witness.tampered))
    for test, seen in phases.items():
        status = _SETUP.get(seen.get("setup", "none")) or _CALL.get(seen.get("call", ""))
        if status is not None:
            witness.statuses[test] = status
    return witness


def confirm(
    instance: Instance, plan: EvalPlan, report: Mapping[str, Any], witness: Witness
) -> tuple[dict[str, Any], str | None]:
    """`report` with the passes the witness does not confirm moved to the failures; (report, why) where
    `why` names the veto, None when nothing was vetoed (a report without successes needs no witness)."""
    tests = report.get("tests_status") or {}
    # Only node ids (path::name): a few names in the harness's lists are fragments of pytest's progress
    # lines that its parser reads as tests (`[100%]` of pytest-dev__pytest-5227), no test the witness sees.
    passed = {kind: [t for t in tests.get(kind, {}).get("success", []) if "::" in t] for kind in _KINDS}
    if not any(passed.values()):
        return dict(report), None
    if not witness.started:
        why = "the witness never loaded: no pass of this run is confirmed"
        unconfirmed = passed
    elif witness.tampered:
        why = f"pytest's machinery was replaced during the run: {'; '.join(witness.tampered[:5])}"
        unconfirmed = passed
    elif not witness.finished:
        why = "the witness never saw the session end: no pass of this run is confirmed"
        unconfirmed = passed
    elif witness.distributed:
        return dict(report), None  # the tests ran in xdist's workers, where the witness does not run
    else:
        api = harness_api()
        spec = test_spec(instance, plan)
        seen = api.PARSER_REGISTRY[plan.log_parser](witness.summary(), spec)
        ref = {"instance_id": instance.instance_id, **passed}
        graded = api.get_eval_tests_report(seen, ref, eval_type=api.EvalType(plan.eval_type))
        unconfirmed = {k: [t for t in passed[k] if t not in graded[k]["success"]] for k in _KINDS}
        if not any(unconfirmed.values()):
            return dict(report), None
        named = [f"{t} ({seen.get(t, 'never run')})" for k in _KINDS for t in unconfirmed[k]]
        why = f"the witness saw {len(named)} test(s) the log counts as passed fail or not run: "
        why += ", ".join(named[:5])
    vetoed = copy.deepcopy(dict(report))
    for kind in _KINDS:
        status = vetoed["tests_status"][kind]
        status["success"] = [t for t in status["success"] if t not in unconfirmed[kind]]
        status["failure"] = [*status["failure"], *unconfirmed[kind]]
    api = harness_api()
    vetoed["resolved"] = api.get_resolution_status(vetoed["tests_status"]) == api.ResolvedStatus.FULL.value
    vetoed["witness_veto"] = why
    return vetoed, why
