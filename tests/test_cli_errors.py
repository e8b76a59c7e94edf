"""Bad input never ends in a traceback, and never leaves output that looks complete.

Two tables. The first is generated from the parsers themselves: every number, file and directory
argument of every command is given values it must refuse, and must be refused by name with exit status
2 before anything runs; an argument whose type cannot refuse anything (a bare `int`, `float` or `Path`)
fails the test, so a new option cannot slip in unchecked. The second is written by hand: files with the
wrong contents, configs with wrong values, run directories that hold other runs; each must end with
one `swerl: error:` line and exit status 1, and the outputs it names must not exist afterwards.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from swerl.cli import args as cli_args
from swerl.cli import reward as cli_reward
from swerl.cli import sandbox as cli_sandbox
from swerl.cli.eval import parse_nk
from swerl.cli.main import build_parser, main
from swerl.errors import UserError

ROOT = Path(__file__).resolve().parents[1]


def _leaf_parsers(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {prefix: parser}
    for action in subs:
        for name, sub in action.choices.items():
            found |= _leaf_parsers(sub, (*prefix, name))
    return found


LEAVES = _leaf_parsers(build_parser())


@pytest.mark.parametrize("path", sorted(LEAVES), ids=" ".join)
def test_every_command_shows_an_example_that_uses_only_its_own_options(path):
    """`--help` ends with an example; an option renamed or removed would leave the example lying."""
    parser = LEAVES[path]
    epilog = parser.epilog or ""
    assert epilog.startswith("example"), f"swerl {' '.join(path)} --help has no example"
    commands = [line for line in epilog.replace("&&", "\n").splitlines() if f"swerl {' '.join(path)}" in line]
    assert commands, epilog
    known = {option for action in parser._actions for option in action.option_strings}
    used = {word.partition("=")[0] for line in commands for word in line.split() if word.startswith("--")}
    assert used <= known, f"unknown options in the example: {sorted(used - known)}"


# Values each argument type must refuse. A file named "x.txt" is created in the working directory, and
# "sub" is a directory there.
BAD_VALUES: dict[Callable[[str], object], tuple[str, ...]] = {
    cli_args.positive_int: ("-3", "0", "2.5", "abc"),
    cli_args.nonnegative_int: ("-3", "abc"),
    cli_args.positive_float: ("-1", "0", "nan", "abc"),
    cli_args.nonnegative_float: ("-1", "inf", "abc"),
    cli_args.unit_interval: ("0", "1.5", "-0.1", "abc"),
    cli_args.proper_fraction: ("0", "1", "1.5", "abc"),
    cli_args.existing_file: ("sub", "missing.jsonl"),
    cli_args.config_file: ("sub", "missing.yaml", "configs/missing.yaml"),
    cli_args.existing_dir: ("x.txt", "missing-dir"),
    cli_args.existing_path: ("missing-run",),
    cli_args.output_file: ("sub", "x.txt/out.jsonl"),
    cli_args.output_dir: ("x.txt", "x.txt/deeper"),
    cli_reward._cap: ("-5", "lots"),
    parse_nk: ("3@1", "0@3", "3", "a@b"),
    cli_args.model_name: ("./missing-model", "x.txt", "a/b/c"),
    cli_args.repo_name: ("click", "pallets/click/extra", "/click", "pallets/"),
    cli_sandbox.time_limit: ("0", "-1", "1e7", "abc"),
    cli_sandbox.memory_limit_mb: ("8", "0", "abc"),
}
UNCHECKED = (int, float, Path)


def _typed_options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    found = []
    for command, parser in LEAVES.items():
        for action in parser._actions:
            if action.type is not None:
                found.append((command, action))
    return found


TYPED = _typed_options()


def _name(item: tuple[tuple[str, ...], argparse.Action]) -> str:
    command, action = item
    return " ".join(command) + " " + (action.option_strings[0] if action.option_strings else action.dest)


@pytest.mark.parametrize("item", TYPED, ids=_name)
def test_every_number_and_path_argument_refuses_bad_values(item, tmp_path, monkeypatch, capsys):
    command, action = item
    assert action.type not in UNCHECKED, (
        f"swerl {' '.join(command)} {action.option_strings or action.dest}: type {action.type.__name__} "
        "accepts nonsense; use a checked type from swerl.cli.args"
    )
    if action.type not in BAD_VALUES:
        assert (action.choices is None and action.type is str) or callable(action.type)
        pytest.skip(f"{action.type!r} takes free text")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.txt").write_text("a file\n")
    (tmp_path / "sub").mkdir()
    for bad in BAD_VALUES[action.type]:
        given = [action.option_strings[0], bad] if action.option_strings else [bad]
        with pytest.raises(SystemExit) as exit_info:
            main([*command, *given])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2, (given, err)
        label = action.option_strings[0] if action.option_strings else action.metavar or action.dest
        assert f"argument {label}" in err, (given, err)
        assert len(err.strip().splitlines()) == 1, err  # no usage block above the error
        assert err.rstrip().endswith(" --help)"), err


def test_the_generated_table_covers_every_command():
    """Each command with a file or number argument is in the table above (a regression guard for the
    helper that walks the parsers)."""
    commands = {command for command, _ in TYPED}
    assert {("reward", "score"), ("data", "mine"), ("eval", "codecontests"), ("plot",), ("quickstart",)} <= (
        commands
    )


# -- hand-written cases ---------------------------------------------------------------------------------


@dataclass
class Case:
    """argv with {tmp} for the workspace; the message the error must contain; paths that must not exist
    afterwards (relative to the workspace)."""

    name: str
    argv: list[str]
    message: str
    absent: list[str] = field(default_factory=list)
    code: int = 1


def _rows(n: int = 2) -> list[dict[str, object]]:
    return [
        {
            "instance_id": f"r{i}",
            "problem_statement": "fix it",
            "code_context": {"a.py": "x = 1\n"},
            "oracle_new_content": {"a.py": "x = 2\n"},
        }
        for i in range(n)
    ]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """Files with every kind of problem the cases below use."""
    w = tmp_path
    (w / "empty.jsonl").write_text("")
    (w / "random.jsonl").write_bytes(bytes(range(256)) * 8)
    (w / "latin1.jsonl").write_bytes(b'{"output": "caf\xe9"}\n')
    pq.write_table(pa.table({"a": [1], "b": ["x"]}), w / "wrong.parquet")
    (w / "fake.parquet").write_text("not parquet at all\n")
    (w / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    (w / "rows_bad.jsonl").write_text('{"problem_statement": "p"}\n')
    tests = {"input": ["1\n"], "output": ["1\n"]}
    problem = {"name": "echo", "description": "Print n.", "public_tests": tests, "private_tests": tests}
    (w / "unsolved.jsonl").write_text(json.dumps(problem) + "\n")
    (w / "model").mkdir()
    (w / "model" / "config.json").write_text("{}")  # what makes a folder a model here
    (w / "config.json").write_text("{}")
    good = {"model_name_or_path": str(w / "model"), "train_file": str(w / "rows.jsonl")}

    def config(name: str, **values: object) -> None:
        (w / name).write_text(yaml.safe_dump({**good, "output_dir": str(w / "run"), **values}))

    config("good.yaml")
    config("bad_values.yaml", learning_rate="1e-5", max_steps=2.5, scale_rewards="grup", num_generations=-1)
    config("typo.yaml", num_generation=4)
    config("missing_model.yaml", model_name_or_path=str(w / "no" / "model"))
    (w / "data_only").mkdir()
    (w / "data_only" / "train.jsonl").write_text("{}\n")
    config("not_a_model.yaml", model_name_or_path=str(w / "data_only"))
    config("missing_train.yaml", train_file=str(w / "no.jsonl"))
    config("wrong_rows.yaml", train_file=str(w / "wrong.parquet"))
    config("bad_rows.yaml", train_file=str(w / "rows_bad.jsonl"))
    config("taken.yaml", output_dir=str(w / "taken"))
    config("done.yaml", output_dir=str(w / "done"))
    config("resumed.yaml", output_dir=str(w / "resumed"), beta=0.05)
    (w / "broken.yaml").write_text("learning_rate: [1,\n")
    (w / "empty.yaml").write_text("")
    (w / "list.yaml").write_text("- 1\n- 2\n")
    (w / "twice.yaml").write_text("learning_rate: 3.0e-3\nbeta: 0.0\nlearning_rate: 1.0\n")
    (w / "binary.yaml").write_bytes(b"\xff\xfe\x00bad")
    (w / "conf_dir").mkdir()
    (w / "taken").mkdir()
    (w / "taken" / "metrics.jsonl").write_text('{"step": 1}\n')
    (w / "done" / "final").mkdir(parents=True)
    (w / "resumed" / "checkpoint-2").mkdir(parents=True)
    (w / "resumed" / "checkpoint-2" / "trainer_state.json").write_text('{"step": 2}')
    (w / "resumed" / "config.yaml").write_text(yaml.safe_dump({**good, "beta": 0.0}))
    (w / "notgit").mkdir()
    (w / "clone" / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(w / "clone")], check=True)
    (w / "notes.md").write_text("# ids\n")
    (w / "dumps").mkdir()
    (w / "dumps" / "2025-01-01-0.json.gz").write_text("not gzip\n")
    (w / "nodumps").mkdir()
    (w / "notmined").mkdir()
    (w / "emptyrun").mkdir()
    (w / "half").mkdir()
    (w / "problem.json").write_text("{not json")
    (w / "sol.py").write_text("print(1)\n")
    (w / "tests_as_lists.json").write_text('{"public_tests": {"input": ["1"], "output": ["1"]}}')
    (w / "tests_as_strings.json").write_text('{"public_tests": {"input": "ab", "output": "cd"}}')
    return w


CASES = [
    Case(
        "score an empty file",
        ["reward", "score", "--input", "{tmp}/empty.jsonl", "--output", "{tmp}/o.jsonl"],
        "no rows",
        ["o.jsonl"],
    ),
    Case(
        "a test-strength option under the similarity reward",
        [
            "reward",
            "score",
            "--input",
            "{tmp}/rows.jsonl",
            "--output",
            "{tmp}/o.jsonl",
            "--execution-min-test-strength",
            "0.8",
        ],
        "--execution-min-test-strength acts on the tests, which --reward similarity",
        ["o.jsonl"],
    ),
    Case(
        "score onto its own input",
        ["reward", "score", "--input", "{tmp}/rows.jsonl", "--output", "{tmp}/rows.jsonl"],
        "is the --input file",
    ),
    Case(
        "score random bytes",
        ["reward", "score", "--input", "{tmp}/random.jsonl", "--output", "{tmp}/o.jsonl"],
        "none of its",
        ["o.jsonl"],
    ),
    Case(
        "score non-UTF-8 rows",
        ["reward", "score", "--input", "{tmp}/latin1.jsonl", "--output", "{tmp}/o.jsonl"],
        "not valid UTF-8",
        ["o.jsonl"],
    ),
    Case(
        "score a Parquet with wrong columns",
        ["reward", "score", "--input", "{tmp}/wrong.parquet", "--output", "{tmp}/o.parquet"],
        "no column output",
        ["o.parquet"],
    ),
    Case(
        "score a file that is not Parquet",
        ["reward", "score", "--input", "{tmp}/fake.parquet", "--output", "{tmp}/o.parquet"],
        "not a readable Parquet file",
        ["o.parquet"],
    ),
    Case(
        "score into another format",
        ["reward", "score", "--input", "{tmp}/rows.jsonl", "--output", "{tmp}/o.parquet"],
        "must match the input",
        ["o.parquet"],
    ),
    Case(
        "score an unknown format",
        ["reward", "score", "--input", "{tmp}/good.yaml", "--output", "{tmp}/o.yaml"],
        "unknown format",
        ["o.yaml"],
    ),
    Case("config is a directory", ["train", "grpo", "--config", "{tmp}/conf_dir"], "is a directory", code=2),
    Case("config missing", ["train", "sft", "--config", "{tmp}/nope.yaml"], "no such file", code=2),
    Case(
        "broken YAML", ["train", "grpo", "--config", "{tmp}/broken.yaml"], "not valid YAML at line 2", ["run"]
    ),
    Case("empty YAML", ["train", "grpo", "--config", "{tmp}/empty.yaml"], "model_name_or_path: required"),
    Case(
        "a data folder as the model",
        ["train", "grpo", "--config", "{tmp}/not_a_model.yaml"],
        "data_only is not a model directory (no config.json",
        absent=["run"],
    ),
    Case("YAML list", ["train", "rlef", "--config", "{tmp}/list.yaml"], "expected a mapping"),
    Case(
        "RLEF on the data pipeline's rows",
        ["train", "rlef", "--config", "{tmp}/good.yaml"],
        "rows.jsonl: 0 problems kept, 2 dropped",
        ["run/config.yaml"],
    ),
    Case(
        "RLEF warm-up on problems without solutions",
        [
            "train",
            "rlef",
            "--config",
            "{tmp}/good.yaml",
            "--set",
            "train_file={tmp}/unsolved.jsonl",
            "--set",
            "sft_warmup_steps=5",
        ],
        "no problem has a Python reference solution to warm up on",
        ["run/config.yaml"],
    ),
    Case(
        "YAML with a key set twice",
        ["train", "grpo", "--config", "{tmp}/twice.yaml"],
        "learning_rate is set twice (lines 1 and 3)",
    ),
    Case("YAML not text", ["train", "grpo", "--config", "{tmp}/binary.yaml"], "not UTF-8 text"),
    Case(
        "wrong values",
        ["train", "grpo", "--config", "{tmp}/bad_values.yaml"],
        "max_steps: input should be a valid integer",
        ["run"],
    ),
    Case(
        "a typo", ["train", "grpo", "--config", "{tmp}/typo.yaml"], "did you mean 'num_generations'", ["run"]
    ),
    Case(
        "a field of another trainer",
        ["train", "sft", "--config", "{tmp}/good.yaml", "--set", "beta=0.1"],
        "unknown SFTConfig field 'beta'",
        ["run"],
    ),
    Case(
        "--set a string as a float",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--set", "learning_rate=abc"],
        "--set learning_rate: input should be a valid number",
        ["run"],
    ),
    Case(
        "--set without =",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--set", "max_steps"],
        "expected KEY=VALUE",
        ["run"],
    ),
    Case(
        "--set a bad choice",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--set", "scale_rewards=grup"],
        "'group', 'batch' or 'none'",
        ["run"],
    ),
    Case(
        "missing model path",
        ["train", "grpo", "--config", "{tmp}/missing_model.yaml"],
        "no such model directory",
    ),
    Case("missing train file", ["train", "sft", "--config", "{tmp}/missing_train.yaml"], "no such file"),
    Case(
        "Parquet rows with wrong columns",
        ["train", "grpo", "--config", "{tmp}/wrong_rows.yaml"],
        "no column oracle_new_content",
        ["run"],
    ),
    Case(
        "JSONL rows with wrong fields",
        ["train", "sft", "--config", "{tmp}/bad_rows.yaml"],
        "no column oracle_new_content",
        ["run"],
    ),
    Case(
        "a directory that holds a run",
        ["train", "grpo", "--config", "{tmp}/taken.yaml"],
        "already holds a run",
        ["taken/config.yaml"],
    ),
    Case(
        "--resume with only final/",
        ["train", "grpo", "--config", "{tmp}/done.yaml", "--resume"],
        "no checkpoint-N",
        ["done/config.yaml"],
    ),
    Case(
        "--resume a run that never started",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--resume"],
        "holds no run to resume; start it without --resume",
        ["run"],
    ),
    Case(
        "--resume a missing checkpoint",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--resume", "{tmp}/ck"],
        "no such checkpoint directory",
        ["run"],
    ),
    Case(
        "vLLM rollouts without vLLM installed",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--set", "rollout_engine=vllm"],
        "--set rollout_engine: vllm: VLLMEngine needs vLLM",
        ["run"],
    ),
    Case(
        "--resume a folder that is no checkpoint",
        ["train", "grpo", "--config", "{tmp}/good.yaml", "--resume", "{tmp}/model"],
        "not a checkpoint directory (no trainer_state.json)",
        ["run"],
    ),
    Case(
        "--resume another run's checkpoint",
        ["train", "grpo", "--config", "{tmp}/taken.yaml", "--resume", "{tmp}/resumed/checkpoint-2"],
        "checkpoint-2 is a checkpoint of ",
    ),
    Case(
        "--resume with other options",
        ["train", "grpo", "--config", "{tmp}/resumed.yaml", "--resume"],
        "beta: 0.0 -> 0.05",
    ),
    Case(
        "--resume at a checkpoint past max_steps",
        [
            "train",
            "grpo",
            "--config",
            "{tmp}/resumed.yaml",
            "--resume",
            "--set",
            "beta=0.0",
            "--set",
            "max_steps=2",
        ],
        "is at step 2 and max_steps is 2: nothing left to train",
    ),
    Case(
        "--resume and --overwrite",
        ["train", "grpo", "--config", "{tmp}/taken.yaml", "--resume", "--overwrite"],
        "contradict",
    ),
    Case(
        "mine a directory that is not git",
        ["data", "mine", "--local", "{tmp}/notgit", "--out", "{tmp}/m"],
        "not a git repository",
        ["m"],
    ),
    Case(
        "mine a clone with an option of the GitHub source",
        ["data", "mine", "--local", "{tmp}/clone", "--out", "{tmp}/m", "--max-prs", "5"],
        "--max-prs applies to --github only, not --local",
        ["m"],
    ),
    Case(
        "mine with no language",
        ["data", "mine", "--local", "{tmp}/clone", "--out", "{tmp}/m", "--languages", ""],
        "--languages: give suffixes",
        ["m"],
    ),
    Case(
        "mine a folder inside a clone",
        ["data", "mine", "--local", "{tmp}/clone/src", "--out", "{tmp}/m"],
        "a folder inside the clone",
        ["m"],
    ),
    Case(
        "mine a folder inside a clone's git directory",
        ["data", "mine", "--local", "{tmp}/clone/.git/refs", "--out", "{tmp}/m"],
        "a folder inside the git directory",
        ["m"],
    ),
    Case(
        "mine with a folder that is no tokenizer",
        ["data", "mine", "--local", "{tmp}/clone", "--out", "{tmp}/m", "--tokenizer", "{tmp}/data_only"],
        "data_only is not a tokenizer directory",
        ["m"],
    ),
    Case(
        "mine ranking with a model but no server",
        ["data", "mine", "--local", "{tmp}/clone", "--out", "{tmp}/m", "--rank-model", "m"],
        "needs both a model and a base URL",
        ["m"],
    ),
    Case(
        "mine decontaminating with a file of another kind",
        [
            "data",
            "mine",
            "--local",
            "{tmp}/clone",
            "--out",
            "{tmp}/m",
            "--decontaminate-with",
            "{tmp}/notes.md",
        ],
        "notes.md: expected .txt, .json, .jsonl or .parquet",
        ["m"],
    ),
    Case(
        "mine GH Archive dumps that are not gzip",
        ["data", "mine", "--gharchive", "{tmp}/dumps", "--out", "{tmp}/g", "--clones", "{tmp}/c", "--quiet"],
        "none of its 1 dumps could be read",
        ["g/data"],
    ),
    Case(
        "mine a directory without dumps",
        [
            "data",
            "mine",
            "--gharchive",
            "{tmp}/nodumps",
            "--out",
            "{tmp}/g",
            "--clones",
            "{tmp}/c",
            "--quiet",
        ],
        "no GH Archive dumps",
        ["g/data"],
    ),
    Case(
        "stats of a directory that was not mined",
        ["data", "stats", "{tmp}/notmined"],
        "manifest",
        ["notmined/stats"],
    ),
    Case("plot a run with no metrics", ["plot", "{tmp}/emptyrun"], "no such file", ["emptyrun/plots"]),
    Case(
        "sandbox a problem that is not JSON",
        ["sandbox", "run", "--problem", "{tmp}/problem.json", "--solution", "{tmp}/sol.py"],
        "problem.json",
    ),
    Case("no --config", ["train", "grpo"], "--config FILE is required", code=2),
    Case(
        "sandbox a solution that is not text",
        ["sandbox", "run", "--problem", "{tmp}/tests_as_lists.json", "--solution", "{tmp}/random.jsonl"],
        "random.jsonl: not UTF-8 text",
    ),
    Case(
        "sandbox a problem whose tests are strings",
        ["sandbox", "run", "--problem", "{tmp}/tests_as_strings.json", "--solution", "{tmp}/sol.py"],
        "lists of strings, not strings",
    ),
    Case(
        "HumanEval from rows of another kind",
        ["eval", "humaneval", "--model", "{tmp}/model", "--data", "{tmp}/rows.jsonl"],
        "rows.jsonl: line 1 has no task_id, prompt, entry_point, test, canonical_solution",
    ),
    Case(
        "random feedback with one problem",
        [
            "eval",
            "codecontests",
            "--model",
            "{tmp}/model",
            "--data",
            "bundled:valid",
            "--limit",
            "1",
            "--random-feedback",
        ],
        "needs 2 problems or more",
    ),
    Case(
        "CodeContests from a folder",
        ["eval", "codecontests", "--model", "{tmp}/model", "--data", "{tmp}/notgit"],
        "notgit is a folder; give its files",
    ),
    Case(
        "CodeContests from a file that is not JSON Lines",
        ["eval", "codecontests", "--model", "{tmp}/model", "--data", "{tmp}/random.jsonl"],
        "random.jsonl: not UTF-8 text",
    ),
    Case(
        "localize a dataset file that is not there",
        ["agentless", "localize", "--dataset", "{tmp}/nope.jsonl", "--out", "{tmp}/loc", "--offline"],
        "nope.jsonl: no such file",
        ["loc"],
    ),
    Case(
        "localize an empty dataset",
        ["agentless", "localize", "--dataset", "{tmp}/empty.jsonl", "--out", "{tmp}/loc", "--offline"],
        "empty.jsonl: no instances",
    ),
    Case(
        "localize instances from a file of another kind",
        ["agentless", "localize", "--dataset", "{tmp}/problem.json", "--out", "{tmp}/loc", "--offline"],
        "problem.json",
    ),
    Case(
        "report of a folder that is no run",
        ["agentless", "report", "--dataset", "{tmp}/rows.jsonl", "--out", "{tmp}/notmined", "--offline"],
        "no localize_files.jsonl there",
    ),
]

if importlib.util.find_spec("wandb") is None:
    CASES.append(
        Case(
            "logging to Weights and Biases without wandb",
            ["train", "grpo", "--config", "{tmp}/good.yaml", "--set", "report_to_wandb=true"],
            "needs the wandb package",
            ["run"],
        )
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_bad_input_is_one_line_and_leaves_nothing(case, workspace, capsys):
    argv = [a.replace("{tmp}", str(workspace)) for a in case.argv]
    if case.code == 2:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        code = exit_info.value.code
    else:
        code = main(argv)
    err = capsys.readouterr().err
    assert code == case.code, err
    assert "Traceback" not in err and "internal error" not in err, err
    if case.code == 1:
        last = err.strip().splitlines()[-1]
        assert last.startswith("swerl: error: "), err
        assert case.message in last, err
    else:
        assert case.message in err and len(err.strip().splitlines()) == 1, err
    for path in case.absent:
        assert not (workspace / path).exists(), f"{path} left behind"


def test_a_live_runs_half_written_line_is_left_out(workspace, capsys):
    metrics = workspace / "half" / "metrics.jsonl"
    metrics.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
    assert main(["plot", str(workspace / "half")]) == 0
    assert (workspace / "half" / "plots" / "loss.png").is_file()
    metrics.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "lo\n{"step": 3, "loss": 1.5}\n')
    assert main(["plot", str(workspace / "half")]) == 1
    assert "line 2 is not JSON" in capsys.readouterr().err


def test_overwrite_removes_only_the_runs_own_files(workspace, capsys):
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.rundir import prepare_run_dir

    run = workspace / "taken"
    (run / "checkpoint-3").mkdir()
    (run / "notes.txt").write_text("mine")
    config = GRPOConfig.from_yaml(workspace / "taken.yaml")
    prepare_run_dir(config, overwrite=True)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    prepare_run_dir(config)  # now empty of runs: a fresh start is fine, said to share the folder
    assert "already holds other files (notes.txt)" in capsys.readouterr().err
    prepare_run_dir(config, rank=1, overwrite=False)  # other ranks never check


def test_the_quickstart_hint_only_for_the_configs_own_missing_inputs(workspace, monkeypatch, capsys):
    monkeypatch.chdir(workspace)  # no runs/quickstart here
    config = str(ROOT / "configs" / "grpo_tiny_cpu.yaml")
    assert main(["train", "grpo", "--config", config]) == 1
    assert "run it first" in capsys.readouterr().err
    own = [f"model_name_or_path={workspace / 'model'}", f"eval_file={workspace / 'rows.jsonl'}"]
    sets = [arg for value in [*own, f"train_file={workspace / 'no.jsonl'}"] for arg in ("--set", value)]
    assert main(["train", "grpo", "--config", config, *sets]) == 1
    err = capsys.readouterr().err
    assert "--set train_file: no such file" in err and "run it first" not in err


def test_a_run_that_took_no_step_is_replaced_by_the_corrected_command(workspace, capsys):
    from swerl.trainers.config import GRPOConfig
    from swerl.trainers.rundir import prepare_run_dir

    run = workspace / "taken"
    (run / "metrics.jsonl").write_text("")  # a start that failed before its first step
    (run / "config.yaml").write_text("learning_rate: 1.0\n")
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events.out.tfevents.1").write_bytes(b"opening event")
    config = GRPOConfig.from_yaml(workspace / "taken.yaml")
    prepare_run_dir(config)
    assert list(run.iterdir()) == []
    assert "that run took no step" in capsys.readouterr().err

    (run / "metrics.jsonl").write_text('{"step": 1}\n')  # one step is a result: never replaced unasked
    with pytest.raises(UserError, match="already holds a run"):
        prepare_run_dir(config)
    (run / "metrics.jsonl").write_text("")
    (run / "checkpoint-1").mkdir()
    with pytest.raises(UserError, match="already holds a run"):
        prepare_run_dir(config)


def test_an_unexpected_error_names_its_origin_and_how_to_report(monkeypatch, capsys):
    from swerl.cli import plot

    def broken(args: argparse.Namespace) -> int:
        raise KeyError("surprise")

    monkeypatch.setattr(plot, "_run", broken)
    parser_default = build_parser
    monkeypatch.setattr("swerl.cli.main.build_parser", lambda: _with_run(parser_default(), broken))
    assert main(["plot", str(ROOT)]) == 1
    err = capsys.readouterr().err
    assert "internal error: KeyError" in err and "test_cli_errors.py" in err and "--debug" in err
    assert "Traceback" not in err
    assert main(["--debug", "plot", str(ROOT)]) == 1
    assert "Traceback" in capsys.readouterr().err


def _with_run(
    parser: argparse.ArgumentParser, run: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.choices["plot"].set_defaults(run=run)
    return parser


def test_the_real_process_prints_one_line(tmp_path):
    """Through `python -m swerl`, as a user runs it: exit status 1, one line, no traceback."""
    (tmp_path / "empty.jsonl").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "SWERL_DEBUG"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "swerl",
            "reward",
            "score",
            "--quiet",
            "--input",
            str(tmp_path / "empty.jsonl"),
            "--output",
            str(tmp_path / "o.jsonl"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"swerl: error: {tmp_path / 'empty.jsonl'}: no rows to score"]


def test_an_unknown_option_is_named_by_its_subcommand_with_the_closest_one(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "mine", "--local", str(ROOT), "--out", "unused", "--workres", "1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("swerl data mine: error: unrecognized arguments: --workres 1; ")
    assert "did you mean --workers?" in err and "(see swerl data mine --help)" in err
    # Abbreviations are not options: --max-line is no longer taken for --max-lines.
    with pytest.raises(SystemExit):
        main(["data", "mine", "--local", str(ROOT), "--out", "unused", "--max-line", "9"])
    assert "did you mean --max-lines?" in capsys.readouterr().err
