"""Scoring predictions: the official SWE-bench harness (Docker), or the local harness on this machine.

`evaluate_official` runs swebench 5.x's `run_evaluation` (Docker images) and says plainly when the engine
or the package is missing. Each call gets a fresh run id, because the harness skips instances whose
report for that run id already exists, which would silently reuse an old result.

`evaluate_local` is the same judgement without Docker (`LocalBackend.evaluate`: a fresh checkout per
instance, the harness's patch commands, test files reset, the instance's test command, the harness's
parser and grading). It also lists environment failures: tests that fail with the gold patch in the
local environment (they need the network, a system library, ...), and reports each verdict strictly
and without them, side by side.

Where the gold patch itself does not resolve here (tests that need the network, a test command that
gives no results here), no answer's failure says anything about the answer: such an instance gets a
third verdict, "cannot judge here" (status `error`, `cannot_judge`), never `unresolved`. `GoldChecks`
asks the gold patch once per instance and keeps its row, for the answers of a later evaluation and for
the execution reward (`swerl.reward.execution`), so that both say the same.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from swerl.errors import UserError
from swerl.execution.harness import END, START, grade_log, harness_api
from swerl.execution.instances import Instance
from swerl.jsonl import load_json, read_records

if TYPE_CHECKING:
    from swerl.execution.local import EvalRun, LocalBackend


class HarnessUnavailable(UserError, RuntimeError):
    """No Docker engine or no `swebench` package: the official harness cannot run here."""


def read_predictions(path: str | Path) -> dict[str, dict[str, Any]]:
    """Predictions by instance id from a .jsonl file (one per line) or a .json list / id-keyed dict."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such predictions file (or pass gold / empty)")
    if path.suffix == ".json":
        data = load_json(path)
        rows = list(data.values()) if isinstance(data, dict) else list(data)
    else:
        rows = read_records(path, required=("instance_id",))
    if not rows:
        raise UserError(f"{path}: no predictions (pass empty to judge no patch for every instance)")
    if not all(isinstance(r, dict) and "instance_id" in r for r in rows):
        raise UserError(f"{path}: every prediction needs an instance_id")
    # The harness's fields: a patch under another key would be judged as no patch at all.
    lacking = [str(r["instance_id"]) for r in rows if not isinstance(r.get("model_patch"), str)]
    if lacking:
        raise UserError(
            f"{path}: {len(lacking)} prediction(s) without a model_patch string (e.g. {lacking[0]}); "
            'each needs instance_id and model_patch ("" for no patch), and for --backend docker also '
            "model_name_or_path"
        )
    repeated = sorted(i for i, n in Counter(str(r["instance_id"]) for r in rows).items() if n > 1)
    if repeated:
        raise UserError(f"{path}: more than one prediction for {', '.join(repeated[:5])}; keep one each")
    return {str(r["instance_id"]): r for r in rows}


def predictions_for(source: str, instances: Sequence[Instance]) -> dict[str, dict[str, Any]]:
    """`gold` (the instances' own patches, as the harness's `gold`), `empty` (no patch), or a file."""
    if source in ("gold", "empty"):
        return {
            i.instance_id: {
                "instance_id": i.instance_id,
                "model_name_or_path": source,
                "model_patch": i.patch if source == "gold" else "",
            }
            for i in instances
        }
    return read_predictions(source)


def failure_reason(log: str, test: str, status: str) -> str:
    """Why a test failed: pytest's `-rA` summary (`FAILED id - message`), else the last `E   ` line of
    the test's section in the failures report (`____ Class.test ____`), else its status."""
    lines = log.splitlines()
    summary = ""
    for line in lines:
        for word in ("FAILED", "ERROR"):
            prefix = f"{word} {test} - "
            if line.startswith(prefix):
                summary = line[len(prefix) :].strip()
    if summary and not summary.endswith("..."):  # pytest cuts summary lines to the terminal's width
        return _stable(summary)
    status = summary or status
    name = test.split("::")[-1]
    header = re.compile(r"^_{3,} (?:\S+\.)?" + re.escape(name) + r" _{3,}$")
    for i, line in enumerate(lines):
        if header.match(line):
            section = itertools.takewhile(lambda s: not s.startswith(("____", "====")), lines[i + 1 :])
            errors = [s.strip() for s in section if s.startswith("E ")]
            if errors:
                return _stable(errors[-1])
    return status


ALL_TESTS = "*"
"""Key of an environment failure that concerns the whole instance (its tests produced no results)."""


def run_failure_reason(log: str) -> str:
    """Why a run produced no test results: its last pytest error line (`E   ...`), else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return _stable(errors[-1] if errors else lines[-1] if lines else "no output")


_NETWORK = re.compile(
    r"connection ?refused|connection ?reset|connectionerror|name or service not known|"
    r"temporary failure in name resolution|"
    r"nodename nor servname|network is unreachable|no route to host|getaddrinfo failed|gaierror|"
    r"newconnectionerror|max retries exceeded|failed to establish a new connection|urlopen error|"
    r"could not resolve host|connecttimeout|connection timed out|remotedisconnected",
    re.I,
)


def needs_network(reason: str) -> bool:
    """Whether a test's failure reason is a network error (a refused connection, a name that does not
    resolve, ...): the sandbox has no network, so such a test fails here whatever the patch."""
    return _NETWORK.search(reason) is not None


_ADDRESS = re.compile(r"\b0x[0-9a-f]{6,}\b")


def _stable(reason: str) -> str:
    """A reason as two runs give it: object addresses (`<... object at 0x7f65...>`) differ every run."""
    return _ADDRESS.sub("0x...", reason)[:300]


def printed_by_tests(log: str) -> str:
    """What the tests printed: the lines between the harness's markers (empty when they are missing)."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if START in line]
    ends = [i for i, line in enumerate(lines) if END in line]
    if not starts or not ends or ends[-1] < starts[0]:
        return ""
    return "\n".join(lines[starts[0] + 1 : ends[-1]])


EVALUATION_FILES = ("report.json", "env_failures.json", "logs")


def prepare_out_dir(out_dir: Path, *, overwrite: bool, resume: bool) -> None:
    """Refuse to mix two evaluations in one folder: a second run replaced the first's report and left its
    logs beside the new ones. `resume` keeps what is there (each instance judged before with the same
    prediction is taken from its log folder); `overwrite` removes the earlier evaluation's files. An
    evaluation interrupted before any verdict holds nothing to keep: its log folders are dropped and a
    plain rerun goes ahead."""
    if overwrite and resume:
        raise UserError("--overwrite and --resume contradict each other: choose one")
    logs = out_dir / "logs"
    if not overwrite and not resume and logs.is_dir():
        for folder in [p for p in logs.iterdir() if p.is_dir() and not (p / "report.json").exists()]:
            shutil.rmtree(folder)
        if not any(logs.iterdir()):
            logs.rmdir()
    held = [name for name in EVALUATION_FILES if (out_dir / name).exists()]
    if not held or resume:
        return
    if not overwrite:
        raise UserError(
            f"{out_dir} already holds an evaluation ({', '.join(held)}); --resume judges only the instances "
            f"it has no verdict for, --overwrite starts again, or give another --out"
        )
    for name in held:
        path = out_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def _verdict_key(pred: dict[str, Any], known: dict[str, str]) -> str:
    """What an instance's verdict depends on besides the instance: its patch, whether it is the gold one
    (whose failures become environment failures) and the environment failures it is judged without. A
    resumed run reuses a saved verdict only under the same key."""
    gold = pred.get("model_name_or_path") == "gold"
    text = json.dumps({"patch": pred.get("model_patch") or "", "gold": gold, "known": known}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _saved_row(logs: Path, key: str) -> dict[str, Any] | None:
    try:
        saved = json.loads((logs / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(saved, dict) or saved.pop("verdict_key", None) != key:
        return None
    # An error (no environment, a tool that failed) is judged again, as the harness retries instances
    # that have no report: the cause may be gone. "Cannot judge here" is a fact about this machine
    # that the same patch will meet again: it is kept.
    return None if saved.get("status") == "error" and not saved.get("cannot_judge") else saved


GoldFailures = Callable[[Instance], "dict[str, str] | None"]
"""The tests this machine fails with an instance's gold patch ({} where it resolves, None where that
could not be found out): `GoldChecks.failures`."""


def _evaluate_one(
    inst: Instance,
    pred: dict[str, Any],
    backend: LocalBackend,
    out_dir: Path,
    env_failures: dict[str, Any],
    resume: bool = False,
    gold_failures: GoldFailures | None = None,
) -> dict[str, Any]:
    """One instance's row (the harness's verdict, the verdict without environment failures), saved with
    the instance's log so that a resumed run can take it instead of judging the same patch again."""
    logs = out_dir / "logs" / inst.instance_id
    key = _verdict_key(pred, env_failures.get(inst.instance_id, {}))
    saved = _saved_row(logs, key) if resume else None
    if saved is not None:
        return saved
    logs.mkdir(parents=True, exist_ok=True)
    row = _judge(inst, pred, backend, logs, env_failures, gold_failures)
    text = json.dumps({**row, "verdict_key": key}, indent=2, sort_keys=True) + "\n"
    (logs / "report.json").write_text(text, encoding="utf-8")
    return row


def cannot_judge(known: dict[str, str]) -> dict[str, Any]:
    """The fields of a row this machine cannot judge, from the tests that fail here with the gold patch
    (`known`, never empty): status `error`, `cannot_judge`, and why, naming tests that need the network."""
    network = sorted(t for t, reason in known.items() if t != ALL_TESTS and needs_network(reason))
    if ALL_TESTS in known:
        why = f"the tests give no results here ({known[ALL_TESTS]})"
    elif network:
        why = f"{len(network)} of the {len(known)} tests the gold patch fails here need the network"
        why += f" (e.g. {network[0]})"
    else:
        first = min(known)
        why = f"the gold patch fails {len(known)} test(s) here (e.g. {first}: {known[first]})"
    row: dict[str, Any] = {
        "status": "error",
        "resolved": False,
        "cannot_judge": True,
        "error": f"cannot judge here: {why}",
    }
    if network:
        row["network_tests"] = network
    return row


def _unresolved_untested(row: dict[str, Any], **why: str) -> dict[str, Any]:
    """An answer's unresolved row where its own tests gave no outcome to judge without some tests (its
    code did not build, its run gave no results): `why` says which."""
    return {
        **row,
        "status": "unresolved",
        "resolved": False,
        "resolved_without_env_failures": False,
        "undecidable": False,
        "env_failures": {},
        **why,
    }


def _judge(
    inst: Instance,
    pred: dict[str, Any],
    backend: LocalBackend,
    logs: Path,
    env_failures: dict[str, Any],
    gold_failures: GoldFailures | None = None,
) -> dict[str, Any]:
    patch = pred.get("model_patch")
    if not patch:
        return {"instance_id": inst.instance_id, "status": "empty_patch", "resolved": False}
    (logs / "patch.diff").write_text(patch, encoding="utf-8")
    try:
        run = backend.evaluate(inst, patch, logs / "test_output.txt")
    except Exception as err:  # one instance must not stop the run; its row and log say what happened
        (logs / "run_instance.log").write_text(traceback.format_exc(), encoding="utf-8")
        # The first line names what failed; the rest (a tool's output, whose order may vary between runs)
        # stays in the log, so that two runs write the same report. No repository, no environment, a
        # sandbox that did not start: this run's failure, never the instance's environment failure.
        said = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:300]}"
        return {"instance_id": inst.instance_id, "status": "error", "resolved": False, "error": said}
    return _judge_run(inst, pred, run, logs, env_failures, gold_failures)


def _judge_run(
    inst: Instance,
    pred: dict[str, Any],
    run: EvalRun,
    logs: Path,
    env_failures: dict[str, Any],
    gold_failures: GoldFailures | None = None,
) -> dict[str, Any]:
    """The row of `pred`'s run, whose log is `logs/test_output.txt` (read again to grade without the
    tests that fail here)."""
    patch = str(pred["model_patch"])
    report = run.report
    tests = report.get("tests_status", {})
    row: dict[str, Any] = {"instance_id": inst.instance_id, "plan": run.plan.source, "tests_status": tests}
    if run.veto is not None:  # passes of the log that the test-outcome witness denies
        row["witness_veto"] = run.veto
    gold = pred.get("model_name_or_path") == "gold"
    asked: list[bool] = []

    def known_here() -> dict[str, str]:
        """The tests that fail here with the gold patch: as given (an earlier gold run's list), else as
        `gold_failures` finds them (asked only for a verdict short of resolved)."""
        if inst.instance_id in env_failures or gold_failures is None:
            return dict(env_failures.get(inst.instance_id, {}))
        found = gold_failures(inst)
        asked.append(found is not None)
        return found or {}

    if not run.built:
        # The patch changed compiled sources and they do not compile (the build's log ends
        # test_output.txt): no test ran. The answer's fault, unless it is the gold patch, which did
        # compile for its authors: then this environment cannot build it, and no answer can be judged.
        said = run.log.rstrip().rsplit("\n", 1)[-1]
        if gold:
            known = {ALL_TESTS: f"the gold patch does not build here: {said}"}
            return {**row, **cannot_judge(known), "undecidable": True, "env_failures": known}
        return _unresolved_untested(row, build=said)
    if not report.get("patch_successfully_applied"):
        # The tests ran and gave no results the harness accepts. When they said why (an import that
        # fails in this environment) with the gold patch, no test of the instance can run here: an
        # environment failure of the whole instance, and no answer can be judged here. With the gold
        # patch resolving here, the answer's run is the answer's fault (unresolved, as the harness says).
        said = printed_by_tests(run.log).strip()
        if run.applied and said:
            known = {ALL_TESTS: run_failure_reason(said)} if gold else known_here()
            if ALL_TESTS in known:
                return {
                    **row,
                    **cannot_judge(known),
                    "resolved_without_env_failures": False,
                    "undecidable": True,
                    "env_failures": known,
                }
            if inst.instance_id in env_failures or (asked and asked[0]):  # the gold patch's tests ran
                return _unresolved_untested(row, no_test_results=run_failure_reason(said))
        # The patch did not apply, or nothing ran at all (the harness's own exit-status line is all the
        # log has): no verdict, and nothing learnt about which tests this machine can run.
        why = "the patch does not apply" if not run.applied else "the tests gave no results"
        said = f"{why}: {run_failure_reason(said or run.log)}"
        return {**row, "status": "error", "resolved": False, "undecidable": False, "error": said}
    failing = [t for kind in ("FAIL_TO_PASS", "PASS_TO_PASS") for t in tests.get(kind, {}).get("failure", [])]
    if gold:
        known = {t: failure_reason(run.log, t, run.statuses.get(t, "MISSING")) for t in failing}
    elif report["resolved"]:
        known = dict(env_failures.get(inst.instance_id, {}))
    else:
        known = known_here()
    # A fail-to-pass test that fails here with the gold patch decides the instance and cannot be run
    # here: without it there is no verdict, so the instance is undecidable here, never resolved.
    undecidable = not report["resolved"] and (
        ALL_TESTS in known or any(t in known for t in inst.fail_to_pass)
    )
    lenient = report["resolved"] or (
        bool(known)
        and not undecidable
        and run.confirm(grade_log(inst, run.plan, patch, str(logs / "test_output.txt"), frozenset(known)))[
            "resolved"
        ]
    )
    judged = {
        **row,
        "status": "resolved" if report["resolved"] else "unresolved",
        "resolved": bool(report["resolved"]),
        "resolved_without_env_failures": bool(lenient),
        "undecidable": undecidable,
        "env_failures": known,
    }
    # Where the gold patch itself fails here, an answer that does not resolve may be as right as the
    # gold one: this machine cannot judge it (the verdict without those tests stays beside it).
    return {**judged, **cannot_judge(known)} if known and not report["resolved"] else judged


def evaluate_local(
    instances: Sequence[Instance],
    predictions: dict[str, dict[str, Any]],
    backend: LocalBackend,
    out_dir: Path,
    *,
    workers: int = 1,
    env_failures: dict[str, dict[str, str]] | None = None,
    resume: bool = False,
    gold_checks: GoldChecks | None = None,
) -> dict[str, Any]:
    """Evaluate predictions with the local harness; writes `out_dir/report.json` (like the harness's run
    report, plus environment failures), `out_dir/logs/<id>/` and, for gold, `out_dir/env_failures.json`.
    With `resume`, an instance whose log folder holds a verdict for the same patch is not judged again.

    Instances without a prediction are not evaluated (counted in `total_instances` only), as the harness
    does. Environment failures of a gold run are the tests that fail with the gold patch here; given to a
    later run (`env_failures`), they yield its verdict without them next to the strict one. Without
    them, `gold_checks` finds them (the gold patch run once per instance, kept) for an answer that does
    not resolve: an instance whose gold patch does not resolve here cannot be judged here.
    """
    harness_api()  # a missing or different swebench is the run's error, not every instance's
    wanted = [i for i in instances if i.instance_id in predictions]
    if not wanted:
        example = next(iter(predictions))
        raise UserError(
            f"none of the {len(predictions)} predictions is for one of the {len(instances)} instances "
            f"selected (e.g. {example}): check --dataset, --split and --instance-ids"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    known = env_failures or {}
    asks = gold_checks.failures if gold_checks is not None else None
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(
            pool.map(
                lambda i: _evaluate_one(i, predictions[i.instance_id], backend, out_dir, known, resume, asks),
                wanted,
            )
        )
    rows.sort(key=lambda r: r["instance_id"])

    def ids(pred: Callable[[dict[str, Any]], bool]) -> list[str]:
        return [r["instance_id"] for r in rows if pred(r)]

    found = {r["instance_id"]: r["env_failures"] for r in rows if r.get("env_failures")}
    report = {
        "total_instances": len(instances),
        "submitted_instances": len(wanted),
        "completed_instances": len(ids(lambda r: r["status"] in ("resolved", "unresolved"))),
        "resolved_instances": len(ids(lambda r: r["resolved"])),
        "resolved_without_env_failures": len(ids(lambda r: r.get("resolved_without_env_failures", False))),
        "resolved_ids": ids(lambda r: r["resolved"]),
        "unresolved_ids": ids(lambda r: r["status"] == "unresolved"),
        "empty_patch_ids": ids(lambda r: r["status"] == "empty_patch"),
        "error_ids": ids(lambda r: r["status"] == "error"),
        "cannot_judge_instances": len(ids(lambda r: r.get("cannot_judge", False))),
        "cannot_judge_ids": ids(lambda r: r.get("cannot_judge", False)),
        "env_failure_ids": sorted(found),
        "resolved_without_env_failures_ids": ids(lambda r: r.get("resolved_without_env_failures", False)),
        "undecidable_instances": len(ids(lambda r: r.get("undecidable", False))),
        "undecidable_ids": ids(lambda r: r.get("undecidable", False)),
        "instances": {r["instance_id"]: r for r in rows},
    }
    (out_dir / "report.json").write_text(
        json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    if any(p.get("model_name_or_path") == "gold" for p in predictions.values()):
        text = json.dumps(found, indent=2, sort_keys=True) + "\n"
        (out_dir / "env_failures.json").write_text(text, encoding="utf-8")
    else:  # an earlier gold run's list beside this report would read as this run's
        (out_dir / "env_failures.json").unlink(missing_ok=True)
    return report


def gold_check_key(instance: Instance, python: str | None) -> str:
    """What a kept gold check holds for: the row's patches and tests, and the fixed interpreter (`--python`)
    if one is set. The interpreter is part of it because it decides whether the tests can run at all: a
    "cannot judge" found with a wrong interpreter must not outlive the correction."""
    what = [instance.base_commit, instance.patch, instance.test_patch, *instance.fail_to_pass, "|"]
    what += [*instance.pass_to_pass, str(instance.extra.get("eval_script") or "")]
    if python:
        what += ["python", python]
    return hashlib.sha256("\n".join(what).encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass
class GoldChecks:
    """Whether this machine can judge an instance at all: its gold patch judged once here (`_judge`,
    the verdict of every evaluation) and kept, in memory and as that run's row and log under `folder`
    (`CACHE/gold` next to the mirrors and environments), so that a later run asks no test again.

    A row from `swerl data validate` (it carries its `env_recipe`) was found good by running its gold
    patch: it is not asked again."""

    backend: LocalBackend
    folder: Path
    _rows: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def failures(self, instance: Instance, run: EvalRun | None = None) -> dict[str, str] | None:
        """The tests this machine fails with the gold patch (`ALL_TESTS` where they give no results or
        the gold patch does not build here); {} where it resolves or the row is validated; None where the
        gold run itself failed (no environment, a lost sandbox), which says nothing either way.

        `run`: an evaluation of the gold patch made already (the execution reward's, of an answer that
        is the gold patch), judged and kept where no verdict is known yet, instead of another run."""
        if instance.extra.get("env_recipe") or not instance.patch.strip():
            return {}
        row = self.row(instance, run)
        if row["status"] == "error" and not row.get("cannot_judge"):
            return None
        return dict(row.get("env_failures") or {})

    def row(self, instance: Instance, run: EvalRun | None = None) -> dict[str, Any]:
        """The gold patch's row, judged once per instance (two threads asking at once run it once), from
        `run` where one is given (see `failures`)."""
        with self._lock:
            lock = self._locks.setdefault(instance.instance_id, threading.Lock())
        with lock:
            if instance.instance_id not in self._rows:
                self._rows[instance.instance_id] = self._judged(instance, run)
            return self._rows[instance.instance_id]

    def _judged(self, instance: Instance, run: EvalRun | None) -> dict[str, Any]:
        digest = gold_check_key(instance, self.backend.envs.python)
        logs = self.folder / instance.instance_id / digest
        saved = _saved_row(logs, digest)
        if saved is not None:
            return saved
        logs.mkdir(parents=True, exist_ok=True)
        pred = {
            "instance_id": instance.instance_id,
            "model_name_or_path": "gold",
            "model_patch": instance.patch,
        }
        if run is None:
            row = _judge(instance, pred, self.backend, logs, {})
        else:
            (logs / "patch.diff").write_text(instance.patch, encoding="utf-8")
            (logs / "test_output.txt").write_text(run.log, encoding="utf-8")
            row = _judge_run(instance, pred, run, logs, {})
        text = json.dumps({**row, "verdict_key": digest}, indent=2, sort_keys=True) + "\n"
        tmp = logs / f".report.json.{os.getpid()}.{threading.get_ident()}"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, logs / "report.json")
        return row


def docker_problem() -> str | None:
    """None when a Docker engine answers, else why not (no CLI, or the CLI reaches no engine)."""
    docker = shutil.which("docker")
    if docker is None:
        return "the docker CLI is not installed"
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"docker info failed: {err}"
    if done.returncode != 0:
        return "no Docker engine is reachable: " + done.stderr.decode(errors="replace").strip()[:300]
    return None


def harness_problem() -> str | None:
    """None when the official harness can run here, else what is missing."""
    try:
        harness_api()
    except UserError as err:
        return str(err)
    return docker_problem()


def fresh_run_id(prefix: str = "swerl") -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def official_command(
    predictions: str | Path,
    *,
    dataset: str,
    run_id: str,
    split: str = "test",
    max_workers: int = 4,
    instance_ids: Sequence[str] = (),
) -> list[str]:
    """The `python -m swebench.harness.run_evaluation` command line (swebench 5.x: images are named by
    the dataset's `image` column, so there is no namespace option)."""
    cmd = [
        sys.executable,
        "-m",
        "swebench.harness.run_evaluation",
        "--dataset_name",
        dataset,
        "--split",
        split,
        "--predictions_path",
        str(predictions),
        "--max_workers",
        str(max_workers),
        "--run_id",
        run_id,
    ]
    if instance_ids:
        cmd += ["--instance_ids", *instance_ids]
    return cmd


def evaluate_official(
    predictions: str | Path,
    *,
    dataset: str,
    split: str = "test",
    max_workers: int = 4,
    instance_ids: Sequence[str] = (),
    run_id: str | None = None,
    cwd: str | Path | None = None,
) -> tuple[str, int]:
    """Run the official harness; returns (run id, exit status). Raises HarnessUnavailable first."""
    problem = harness_problem()
    if problem is not None:
        raise HarnessUnavailable(f"cannot run the SWE-bench harness: {problem}")
    run_id = run_id or fresh_run_id()
    cmd = official_command(
        predictions,
        dataset=dataset,
        run_id=run_id,
        split=split,
        max_workers=max_workers,
        instance_ids=instance_ids,
    )
    return run_id, subprocess.run(cmd, cwd=cwd, check=False).returncode
