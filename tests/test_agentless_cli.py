"""`swerl agentless`: help, the offline demo + localize, and clear errors where Docker is missing."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from swerl.cli import agentless
from swerl.errors import UserError
from swerl.execution.docker import instance_image
from swerl.execution.evaluate import HarnessUnavailable, docker_problem, fresh_run_id, official_command
from swerl.execution.instances import instance_from_row


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
    first = (tmp_path / "instances.jsonl").read_text()
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0  # again into the same folder: the same
    assert (tmp_path / "instances.jsonl").read_text() == first
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
    # report needs no --clones, --offline or --cache-dir again: it reads the run's (no GitHub from here).
    report = ["agentless", "report", "--dataset", common[1], "--out", str(tmp_path / "run"), "--json"]
    assert _main(report) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert json.loads(first)["gold_files"] == ["calc/stats.py"]

    # The same instances without their gold patch (mined rows, say): nothing to score, said so.
    unscored = tmp_path / "nogold.jsonl"
    rows = [json.loads(line) for line in (tmp_path / "instances.jsonl").read_text().splitlines()]
    unscored.write_text("".join(json.dumps({**r, "patch": ""}) + "\n" for r in rows))
    common[1] = str(unscored)
    assert _main(["agentless", "localize", *common, "--out", str(tmp_path / "run2")]) == 0
    assert "no gold patch among the 1 instances" in capsys.readouterr().out


def test_evaluate_says_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        import swebench  # noqa: F401

        has_swebench = True
    except ImportError:
        has_swebench = False
    if has_swebench and docker_problem() is None:
        pytest.skip("a Docker engine and swebench are available here")
    from swerl.cli.main import main

    argv = ["agentless", "evaluate", "--backend", "docker", "--dataset", "lite"]
    assert main([*argv, "--predictions", str(tmp_path / "p.jsonl")]) == 1
    assert "cannot run the SWE-bench harness" in capsys.readouterr().err


def test_local_evaluate_without_swebench_is_an_error_not_a_report(tmp_path: Path) -> None:
    """The local backend grades with the swebench package: without it the command stops with that reason
    and exit status 1, instead of filing every instance as an environment failure and exiting 0."""
    shadow = tmp_path / "shadow" / "swebench"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('swebench is not installed here')\n")
    assert _main(["agentless", "demo", "--dir", str(tmp_path / "demo")]) == 0
    argv = ["agentless", "evaluate", "--dataset", str(tmp_path / "demo" / "instances.jsonl")]
    argv += [
        "--clones",
        str(tmp_path / "demo" / "clones"),
        "--predictions",
        "gold",
        "--out",
        str(tmp_path / "o"),
    ]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(shadow.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "swerl", *argv], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "the local harness needs the `swebench` package 5.x" in done.stderr
    assert not (tmp_path / "o").exists()


def test_docker_backend_refuses_without_engine() -> None:
    if docker_problem() is None:
        pytest.skip("a Docker engine is reachable here")
    from swerl.execution.docker import DockerBackend

    with pytest.raises(HarnessUnavailable, match="Docker engine"):
        DockerBackend()


def test_harness_command_and_image_names() -> None:
    a, b = fresh_run_id(), fresh_run_id()
    assert a != b and a.startswith("swerl-")
    cmd = official_command(
        "p.jsonl", dataset="princeton-nlp/SWE-bench_Lite", run_id=a, instance_ids=["x__y-1"]
    )
    assert cmd[1:3] == ["-m", "swebench.harness.run_evaluation"] and cmd[-2:] == ["--instance_ids", "x__y-1"]
    assert "--namespace" not in cmd  # gone in swebench 5.x

    row = {"instance_id": "a__b-1", "repo": "a/b", "base_commit": "0" * 40, "problem_statement": "p"}
    image = "swebench/sweb.eval.x86_64.a_1776_b-1:latest"
    script = "\n".join(
        ["cd /testbed", ": '>>>>> Start Test Output'", "pytest -rA t/test_x.py", ": '>>>>> End"]
    )
    full = instance_from_row({**row, "image": image, "eval_script": script + " Test Output'"})
    assert instance_image(full) == image
    with pytest.raises(UserError, match="image, eval_script and log_parser columns"):
        instance_image(instance_from_row(row))  # a 4.x-era row: refused, not guessed


def _demo_args(tmp_path: Path, clones: Path) -> list[str]:
    common = ["--dataset", str(tmp_path / "instances.jsonl"), "--clones", str(clones), "--offline"]
    return [*common, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")]


@pytest.mark.parametrize(
    "layout", ["demo-org__calc", "demo-org+calc/repo", "calc.git", "demo-org/calc", "CALC"]
)
@pytest.mark.parametrize("bare", [True, False])
def test_clones_are_found_in_any_usual_layout(tmp_path: Path, layout: str, bare: bool) -> None:
    from swerl.git.clones import find_clone
    from swerl.synth_repo import git

    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    source = tmp_path / "clones" / "demo-org__calc"
    other = tmp_path / "elsewhere"
    target = other / layout
    target.parent.mkdir(parents=True)
    git(tmp_path, "clone", "-q", *(["--bare"] if bare else []), str(source), str(target))
    assert find_clone(other, "demo-org/calc") == target.resolve()
    assert find_clone(other, "demo-org/other") is None
    assert _main(["agentless", "localize", *_demo_args(tmp_path, other)]) == 0


def test_the_demos_localize_hint_then_a_run_with_a_model_is_the_documented_sequence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/agentless.md: demo, the localization it prints, then `run --model` into DIR/run. The hint
    wrote into DIR/run too, whose model-free rows the run then refused."""
    import shlex

    from swerl.models.tiny import build_tiny_model

    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    [hint] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("try: ")]
    command = shlex.split(hint.removeprefix("try: "))
    assert command[:3] == ["swerl", "agentless", "localize"]
    assert _main(command[1:]) == 0
    assert (tmp_path / "loc" / "localize_files.jsonl").is_file()
    model = build_tiny_model(tmp_path / "tiny", hidden_size=32, intermediate_size=64, num_layers=1)
    run = ["agentless", "run", *_demo_args(tmp_path, tmp_path / "clones"), "--model", str(model)]
    assert _main([*run, "--num-samples", "1", "--max-new-tokens", "8", "--localize-max-new-tokens", "8"]) == 0
    assert "1 predictions" in capsys.readouterr().err  # the summary, with no prompt skipped
    assert (tmp_path / "run" / "predictions.jsonl").is_file()


def test_run_without_a_model_localizes_and_stages_refuse_other_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    args = _demo_args(tmp_path, tmp_path / "clones")
    assert _main(["agentless", "run", *args]) == 0
    assert "file_hit@1 100.0%" in capsys.readouterr().out
    assert (tmp_path / "run" / "localize_elements.jsonl").exists()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()

    # The rows were made keeping 5 files; asking for 3 must not silently reuse them.
    with pytest.raises(
        UserError, match=r"localize_files\.jsonl was made with other options \(top_files: 5 -> 3\)"
    ):
        _main(["agentless", "localize", *args, "--top-files", "3"])
    with pytest.raises(UserError, match=r"element_files: 20 -> 0"):
        _main(["agentless", "localize", *args, "--element-files", "0"])
    assert _main(["agentless", "localize", *args]) == 0  # same options: resumes


def test_options_of_a_stage_with_no_file_do_not_block_a_run_with_others(tmp_path: Path) -> None:
    """A run that stopped before a stage wrote its file (a missing --model, say), or a stage file deleted as
    the refusal advises, left options that guard no rows: the next run with other options goes on."""
    from agentless.pipeline import OPTIONS_FILE, RunConfig, claim_stages, stage_path

    claim_stages(tmp_path, RunConfig(top_files=5), ["localize_files"])  # recorded, no rows written
    claim_stages(tmp_path, RunConfig(top_files=3), ["localize_files"])
    assert json.loads((tmp_path / OPTIONS_FILE).read_text())["localize_files"]["top_files"] == 3

    stage_path(tmp_path, "localize_files").write_text("{}\n", encoding="utf-8")  # rows now exist
    with pytest.raises(UserError, match=r"top_files: 3 -> 5"):
        claim_stages(tmp_path, RunConfig(top_files=5), ["localize_files"])
    stage_path(tmp_path, "localize_files").unlink()  # as the error advises
    claim_stages(tmp_path, RunConfig(top_files=5), ["localize_files"])


@pytest.mark.parametrize(
    ("option", "parent"),
    [
        (["--reproduction-samples", "8"], "--reproduction"),
        (["--regression-model-filter"], "--regression"),
        (["--feedback-turns", "2"], "--regression and/or --reproduction"),
        (["--feedback-workers", "2"], "--feedback-turns"),
        (["--feedback-engine", "ray"], "--feedback-turns"),
    ],
)
def test_an_option_without_the_option_it_refines_is_an_error(option: list[str], parent: str) -> None:
    # Before any dataset or model is read: the run would otherwise go on without the option's effect.
    argv = ["agentless", "run", "--dataset", "no-such.jsonl", "--out", "unused", "--model", "m", *option]
    with pytest.raises(UserError, match=rf"^{option[0]} .*: add {parent}$"):
        _main(argv)


def test_report_names_instances_whose_stage_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    args = _demo_args(tmp_path, tmp_path / "clones")
    assert _main(["agentless", "localize", *args]) == 0
    capsys.readouterr()
    iid = json.loads((tmp_path / "instances.jsonl").read_text().splitlines()[0])["instance_id"]
    for stage in ("localize_files", "localize_elements"):
        with (tmp_path / "run" / f"{stage}.jsonl").open("a") as f:
            f.write(json.dumps({"instance_id": iid, "stage_error": "RuntimeError: boom"}) + "\n")
    assert _main(["agentless", "report", *args]) == 0
    out = capsys.readouterr().out
    assert "file_hit@1 0.0%" in out and f"1 with a stage error (scored as misses): {iid}" in out
    # The usual cause: the repository is not there at all. The report must not try to read it.
    (tmp_path / "empty").mkdir()
    gone = [a if a != str(tmp_path / "clones") else str(tmp_path / "empty") for a in args]
    shutil.rmtree(tmp_path / "cache" / "repos")
    assert _main(["agentless", "report", *gone]) == 0
    assert "1 instance, file_hit@1 0.0%" in capsys.readouterr().out


def test_report_against_another_dataset_than_the_runs_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report over instances the run never localized would print zeros that read as a localizer that
    found nothing."""
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    args = _demo_args(tmp_path, tmp_path / "clones")
    assert _main(["agentless", "localize", *args]) == 0
    other = tmp_path / "other.jsonl"
    rows = [json.loads(line) for line in (tmp_path / "instances.jsonl").read_text().splitlines()]
    other.write_text("".join(json.dumps({**r, "instance_id": r["instance_id"] + "0"}) + "\n" for r in rows))
    swapped = [str(other) if a == str(tmp_path / "instances.jsonl") else a for a in args]
    assert swapped != args
    with pytest.raises(UserError, match=r"none of the \d+ instances of --dataset was localized in"):
        _main(["agentless", "report", *swapped])
    # A dataset holding the run's instances and others: the others are named as not scored.
    both = tmp_path / "both.jsonl"
    both.write_text((tmp_path / "instances.jsonl").read_text() + other.read_text())
    capsys.readouterr()
    assert _main(["agentless", "report", *[str(both) if a == str(other) else a for a in swapped]]) == 0
    assert f"{len(rows)} not localized in {tmp_path / 'run'}, not scored: {rows[0]['instance_id']}0" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"instance_id": "a-1", "patch": "diff --git a/x b/x"}], "without a model_patch string"),
        ([{"instance_id": "a-1", "model_patch": None}], "without a model_patch string"),
        (
            [{"instance_id": "a-1", "model_patch": "diff"}, {"instance_id": "a-1", "model_patch": ""}],
            "more than one prediction for a-1",
        ),
    ],
)
def test_predictions_the_harness_would_misread_are_refused(tmp_path: Path, rows: list, message: str) -> None:
    from swerl.execution.evaluate import read_predictions

    path = tmp_path / "preds.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=message):
        read_predictions(path)


def test_predictions_for_none_of_the_instances_are_refused(tmp_path: Path) -> None:
    pytest.importorskip("swebench")
    from swerl.execution.evaluate import evaluate_local

    instance = instance_from_row(
        {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "0" * 40, "problem_statement": "p"}
    )
    preds = {"o__r-2": {"instance_id": "o__r-2", "model_patch": "", "model_name_or_path": "m"}}
    with pytest.raises(UserError, match=r"none of the 1 predictions is for one of the 1 instances"):
        evaluate_local([instance], preds, None, tmp_path / "eval")  # type: ignore[arg-type]
    assert not (tmp_path / "eval").exists()


class _CountingBackend:
    """Stands in for the local harness (which needs a repository and an environment): judges every
    patch resolved, or fails, and counts the instances it was asked to judge."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.judged = fail, 0

    def evaluate(self, inst: object, patch: str, log: Path) -> object:
        from types import SimpleNamespace

        from swerl.execution.local import EvalRun

        self.judged += 1
        if self.fail:
            raise RuntimeError("no environment")
        report = {"patch_successfully_applied": True, "resolved": True, "tests_status": {}}
        plan = SimpleNamespace(source="spec")
        return EvalRun(log="", report=report, statuses={}, plan=plan, applied=True)  # type: ignore[arg-type]


def test_a_second_evaluation_into_one_folder_is_refused_resumed_or_overwritten(tmp_path: Path) -> None:
    pytest.importorskip("swebench")
    from swerl.execution.evaluate import evaluate_local, prepare_out_dir

    rows = [
        {"instance_id": f"o__r-{n}", "repo": "o/r", "base_commit": "0" * 40, "problem_statement": "p"}
        for n in (1, 2)
    ]
    instances = [instance_from_row(r) for r in rows]
    preds = {
        i.instance_id: {"instance_id": i.instance_id, "model_patch": "diff", "model_name_or_path": "m"}
        for i in instances
    }
    out = tmp_path / "eval"
    first = _CountingBackend()
    report = evaluate_local(instances, preds, first, out)  # type: ignore[arg-type]
    assert first.judged == 2 and report["resolved_instances"] == 2

    with pytest.raises(UserError, match=r"already holds an evaluation \(report.json, logs\); --resume"):
        prepare_out_dir(out, overwrite=False, resume=False)
    prepare_out_dir(out, overwrite=False, resume=True)  # keeps everything
    changed = {**preds, "o__r-2": {**preds["o__r-2"], "model_patch": "other diff"}}
    again = _CountingBackend()
    resumed = evaluate_local(instances, changed, again, out, resume=True)  # type: ignore[arg-type]
    assert again.judged == 1  # only the instance whose patch changed
    assert resumed == report

    failing = _CountingBackend(fail=True)
    evaluate_local(
        instances[:1], {"o__r-1": {**preds["o__r-1"], "model_patch": "x"}}, failing, out, resume=True
    )  # type: ignore[arg-type]
    evaluate_local(
        instances[:1], {"o__r-1": {**preds["o__r-1"], "model_patch": "x"}}, failing, out, resume=True
    )  # type: ignore[arg-type]
    assert failing.judged == 2  # an error is judged again

    prepare_out_dir(out, overwrite=True, resume=False)
    assert sorted(p.name for p in out.iterdir()) == []


def _demo_run_with_tiny_model(tmp_path: Path, positions: int) -> list[str]:
    """`agentless run` of the demo in tmp_path with a tiny model of `positions` positions."""
    from swerl.models.tiny import build_tiny_model

    model = build_tiny_model(
        tmp_path / "tiny",
        hidden_size=32,
        intermediate_size=64,
        num_layers=1,
        max_position_embeddings=positions,
    )
    assert _main(["agentless", "demo", "--dir", str(tmp_path)]) == 0
    return ["agentless", "run", *_demo_args(tmp_path, tmp_path / "clones"), "--model", str(model)]


def test_run_with_a_small_model_warns_of_its_context_and_counts_skipped_prompts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _demo_run_with_tiny_model(tmp_path, 512)
    assert _main([*argv, "--num-samples", "1", "--max-prompt-tokens", "64"]) == 0
    err = capsys.readouterr().err
    assert "answers of up to 4096 new tokens do not fit" in err and "context of 512 positions" in err
    assert "1 predictions, 0 with a patch; 1 skipped, prompt too long (e.g. demo-org__calc-1: prompt 0" in err


def test_a_served_model_with_a_local_folder_keeps_to_its_context(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The served checkpoint's folder tells its context: prompts it cannot hold are skipped, never sent."""
    from fake_http import JsonPostServer

    argv = _demo_run_with_tiny_model(tmp_path, 64)
    server = JsonPostServer(lambda body: pytest.fail(f"a prompt was sent: {body}"))
    try:
        assert _main([*argv, "--openai-base-url", server.base_url, "--num-samples", "1"]) == 0
        assert server.requests == []
    finally:
        server.close()
    err = capsys.readouterr().err
    assert "context of 64 positions" in err and "1 skipped, prompt too long" in err
