"""`swerl agentless`: help, the offline demo + localize, and clear errors where Docker is missing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agentless.evaluate import HarnessUnavailable, docker_problem, fresh_run_id, official_command
from agentless.execution.docker import instance_image
from swerl.cli import agentless


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="swerl")
    agentless.register(parser.add_subparsers(dest="group", required=True))
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _main(["agentless", "--help"])
    out = capsys.readouterr().out
    for command in ("run", "localize", "report", "evaluate", "demo"):
        assert command in out
    with pytest.raises(SystemExit):
        _main(["agentless", "run", "--help"])
    assert "--num-samples" in capsys.readouterr().out


def test_demo_then_model_free_localize_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    common = [
        "--dataset",
        str(tmp_path / "instances.jsonl"),
        "--clones",
        str(tmp_path / "clones"),
        "--offline",
    ]
    common += ["--cache-dir", str(tmp_path / "cache")]
    assert _main(["agentless", "localize", *common, "--out", str(tmp_path / "run")]) == 0
    assert "file_hit@1 100.0%" in capsys.readouterr().out
    assert _main(["agentless", "report", *common, "--out", str(tmp_path / "run"), "--json"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first)["gold_files"] == ["calc/stats.py"]


def test_evaluate_says_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import swebench  # noqa: F401

        has_swebench = True
    except ImportError:
        has_swebench = False
    if has_swebench and docker_problem() is None:
        pytest.skip("a Docker engine and swebench are available here")
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("")
    assert _main(["agentless", "evaluate", "--predictions", str(predictions)]) == 1
    assert "cannot run the SWE-bench harness" in capsys.readouterr().err


def test_docker_backend_refuses_without_engine() -> None:
    if docker_problem() is None:
        pytest.skip("a Docker engine is reachable here")
    from agentless.execution.docker import DockerBackend

    with pytest.raises(HarnessUnavailable, match="Docker engine"):
        DockerBackend()


def test_harness_command_and_image_names() -> None:
    a, b = fresh_run_id(), fresh_run_id()
    assert a != b and a.startswith("swerl-")
    cmd = official_command(
        "p.jsonl", dataset="princeton-nlp/SWE-bench_Lite", run_id=a, instance_ids=["x__y-1"]
    )
    assert cmd[1:3] == ["-m", "swebench.harness.run_evaluation"] and cmd[-2:] == ["--instance_ids", "x__y-1"]
    image = instance_image("astropy__astropy-12907")
    assert image.startswith("swebench/sweb.eval.") and image.endswith(".astropy_1776_astropy-12907:latest")
