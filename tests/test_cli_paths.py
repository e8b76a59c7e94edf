"""Paths are resolved once, where the command line is parsed: run from any directory, every command's
paths (given or defaulted) are absolute below the parser, outputs land where the docs say (relative to
the directory the command was started in), and what a command records names absolute paths."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from swerl.cli.args import absolute_paths, parse_command_line
from swerl.cli.main import build_parser
from swerl.cli.train import load_checked

ROOT = Path(__file__).resolve().parents[1]


def _leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [parser]
    return [leaf for sub in subs for child in sub.choices.values() for leaf in _leaf_parsers(child)]


def test_every_path_default_is_given_a_path_type() -> None:
    """An option whose default is a path parses a given value to a path as well (a type that returns
    one), so the post-parse pass makes both absolute: a `str` option would slip past it."""
    from swerl.cli import args as types

    path_types = {
        types.existing_file,
        types.existing_dir,
        types.existing_path,
        types.output_file,
        types.output_dir,
    }
    for leaf in _leaf_parsers(build_parser()):
        for action in leaf._actions:
            if isinstance(action.default, Path):
                assert action.type in path_types, f"{leaf.prog} {action.option_strings}: default is a path"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["agentless", "demo"], {"dir": "runs/agentless-demo"}),
        (["quickstart"], {"out": "runs/quickstart"}),
        (["reward", "demo"], {"output": "runs/reward-demo/scored.jsonl"}),
        (
            [
                "agentless",
                "evaluate",
                "--dataset",
                "rows.jsonl",
                "--predictions",
                "gold",
                "--clones",
                "clones",
            ],
            {
                "out": "runs/agentless-eval",
                "cache_dir": "runs/agentless-cache",
                "clones": "clones",
                "dataset": "rows.jsonl",
            },
        ),
        (["data", "mine", "--local", "clones", "--out", "../elsewhere/mined"], {"local": "clones"}),
    ],
)
def test_paths_are_absolute_after_parsing(
    argv: list[str], expected: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a directory that is not the repository root, defaults and given paths come out absolute,
    against that directory; names that are not paths (`gold`) are left as they are."""
    work = tmp_path / "work"
    (work / "clones").mkdir(parents=True)
    (work / "rows.jsonl").write_text("{}\n", encoding="utf-8")
    monkeypatch.chdir(work)
    args = absolute_paths(parse_command_line(build_parser(), argv))
    for name, relative in expected.items():
        assert str(getattr(args, name)) == os.path.normpath(work / relative), name
    for name, value in vars(args).items():
        if isinstance(value, Path):
            assert value.is_absolute(), name
    if "--predictions" in argv:
        assert args.predictions == "gold"
    if "--out" in argv and argv[0] == "data":
        assert args.out == tmp_path / "elsewhere" / "mined"


def test_hub_names_stay_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub dataset alias is no path, and stays as written."""
    monkeypatch.chdir(tmp_path)
    argv = ["agentless", "localize", "--dataset", "lite", "--out", "loc"]
    args = absolute_paths(parse_command_line(build_parser(), argv))
    assert (args.dataset, args.out) == ("lite", tmp_path / "loc")


def test_train_config_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A config's relative paths (as configs/*.yaml write them) are read against the directory the
    command runs in, and the config the trainer gets, which its run records, holds them absolute."""
    monkeypatch.chdir(tmp_path)
    model = Path("runs/rlef/tiny")
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}", encoding="utf-8")  # what marks a save_pretrained folder
    config_file = Path("my.yaml")
    config_file.write_text(
        "model_name_or_path: runs/rlef/tiny\ntrain_file: bundled:train\neval_file: bundled:test\n"
        "output_dir: runs/rlef-run\n",
        encoding="utf-8",
    )
    args = absolute_paths(
        parse_command_line(
            build_parser(), ["train", "rlef", "--config", str(config_file), "--set", "max_steps=1"]
        )
    )
    config = load_checked("rlef", args)
    assert config.model_name_or_path == str(tmp_path / "runs/rlef/tiny")
    assert config.output_dir == str(tmp_path / "runs/rlef-run")
    assert (config.train_file, config.eval_file) == ("bundled:train", "bundled:test")
    assert args.config == tmp_path / "my.yaml"


def test_agentless_defaults_from_another_directory(tmp_path: Path) -> None:
    """`agentless demo` and a model-free `agentless localize` with the default --cache-dir, started in a
    directory that is not the repository root: everything lands under that directory, and the run
    records absolute paths for the next command to reuse."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}

    def swerl(*argv: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "swerl", *argv], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return done

    swerl("agentless", "demo")
    demo = tmp_path / "runs/agentless-demo"
    assert (demo / "instances.jsonl").is_file()
    swerl(
        "agentless", "localize", "--dataset", "runs/agentless-demo/instances.jsonl", "--clones",
        "runs/agentless-demo/clones", "--offline", "--out", "runs/loc",
    )  # fmt: skip
    recorded = json.loads((tmp_path / "runs/loc/repo_options.json").read_text(encoding="utf-8"))
    assert recorded["cache_dir"] == str(tmp_path / "runs/agentless-cache")
    assert recorded["clones"] == str(demo / "clones")
    assert (tmp_path / "runs/agentless-cache/repos").is_dir()
    assert (tmp_path / "runs/loc/localize_files.jsonl").is_file()
    assert not (ROOT / "runs/loc").exists()


def test_agentless_model_is_a_path_unless_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`agentless run --model DIR` names a checkpoint folder (absolute below the parser); with a server,
    --model is the served model's name, which the server matches as written."""
    from swerl.cli.agentless import _local_model

    monkeypatch.chdir(tmp_path)
    Path("runs/tiny").mkdir(parents=True)
    base = ["agentless", "run", "--dataset", "lite", "--out", "out", "--model", "runs/tiny"]
    local = absolute_paths(parse_command_line(build_parser(), base))
    served = absolute_paths(
        parse_command_line(build_parser(), [*base, "--openai-base-url", "http://127.0.0.1:1/v1"])
    )
    _local_model(local)
    _local_model(served)
    assert (local.model, served.model) == (str(tmp_path / "runs/tiny"), "runs/tiny")


def test_a_config_as_the_docs_write_it_works_from_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    args = parse_command_line(build_parser(), ["train", "grpo", "--config", "configs/grpo_tiny_cpu.yaml"])
    shipped = Path(__file__).resolve().parents[1] / "configs" / "grpo_tiny_cpu.yaml"
    assert args.config == shipped
    assert f"using swerl's own {shipped}" in capsys.readouterr().err
    # A config of this directory wins over the shipped one of the same name.
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "grpo_tiny_cpu.yaml").write_text("max_steps: 1\n", encoding="utf-8")
    argv = ["train", "grpo", "--config", "configs/grpo_tiny_cpu.yaml"]
    assert absolute_paths(parse_command_line(build_parser(), argv)).config == tmp_path / argv[-1]
    with pytest.raises(SystemExit):
        parse_command_line(build_parser(), ["train", "grpo", "--config", "configs/no_such.yaml"])
    assert "no such file: configs/no_such.yaml (swerl's own configs are in" in capsys.readouterr().err
