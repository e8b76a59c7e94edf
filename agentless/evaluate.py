"""Scoring predictions: the official SWE-bench harness (Docker), or a local check with our backend.

The official harness is the number to report; it needs a Docker engine and the `swebench` package, and
`evaluate_official` says so plainly when either is missing. Each call gets a fresh run id, because the
harness skips instances whose report for that run id already exists, which would silently reuse an
old result. `evaluate_locally` applies the prediction and the instance's test patch with an execution
backend and applies SWE-bench's rule (all FAIL_TO_PASS and PASS_TO_PASS tests pass); it is for the
offline path and tests, not a substitute for the harness's per-repository environments.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentless.execution.base import ExecutionBackend
from agentless.instances import Instance


class HarnessUnavailable(RuntimeError):
    """No Docker engine or no `swebench` package: the official harness cannot run here."""


def read_predictions(path: str | Path) -> dict[str, dict[str, Any]]:
    rows = {}
    with Path(path).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                rows[row["instance_id"]] = row
    return rows


def evaluate_locally(
    instances: Sequence[Instance], predictions: str | Path, backend: ExecutionBackend
) -> dict[str, dict[str, Any]]:
    """Per instance: `resolved`, the run status and each listed test's status."""
    preds = read_predictions(predictions)
    report: dict[str, dict[str, Any]] = {}
    for inst in instances:
        patch = str(preds.get(inst.instance_id, {}).get("model_patch") or "")
        if not patch:
            report[inst.instance_id] = {"resolved": False, "status": "empty_patch"}
            continue
        tests = [*inst.fail_to_pass, *inst.pass_to_pass]
        run = backend.run_tests(inst, tests, [patch, inst.test_patch])
        resolved = run.status == "ok" and all(run.passed(t) for t in tests)
        report[inst.instance_id] = {
            "resolved": resolved,
            "status": run.status,
            "FAIL_TO_PASS": {t: run.results.get(t, "MISSING") for t in inst.fail_to_pass},
            "PASS_TO_PASS": {t: run.results.get(t, "MISSING") for t in inst.pass_to_pass},
        }
    return report


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
        import swebench.harness.run_evaluation  # noqa: F401
    except ImportError:
        return "the `swebench` package is not installed (pip install swebench)"
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
    namespace: str | None = None,
) -> list[str]:
    """The `python -m swebench.harness.run_evaluation` command line."""
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
    if namespace is not None:
        cmd += ["--namespace", namespace]
    return cmd


def evaluate_official(
    predictions: str | Path,
    *,
    dataset: str,
    split: str = "test",
    max_workers: int = 4,
    instance_ids: Sequence[str] = (),
    namespace: str | None = None,
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
        namespace=namespace,
    )
    return run_id, subprocess.run(cmd, cwd=cwd, check=False).returncode
