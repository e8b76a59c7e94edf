"""Every `swerl` command and subcommand explains itself with --help."""

from __future__ import annotations

import argparse
import gc
import subprocess
import sys

import pytest

from swerl.cli.main import build_parser, main


def _parsers(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    found = {prefix: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _parsers(sub, (*prefix, name))
    return found


PARSERS = _parsers(build_parser())
COMMANDS = list(PARSERS)


def test_the_command_tree_is_complete():
    groups = {command[0] for command in COMMANDS if command}
    assert groups >= {"agentless", "data", "reward", "sandbox", "train", "plot", "quickstart"}
    assert len(COMMANDS) > 15


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "swerl")
def test_help_exits_cleanly_with_a_description(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: swerl")
    description = PARSERS[command].description or ""
    assert len(description) > 30, f"'swerl {' '.join(command)} --help' does not say what it does"
    assert " ".join(description.split()[:4]) in " ".join(text.split())


def test_the_installed_command_returns_mains_status_and_freezes_for_the_exit(monkeypatch, tmp_path):
    """`swerl` (the console script) and `python -m swerl` run `main`, then freeze what the
    process holds so that the interpreter's exit does not walk it (`swerl.cli.exiting`)."""
    from swerl.cli import main as main_module

    monkeypatch.setattr(main_module, "main", lambda: 3)
    try:
        assert main_module.entry() == 3
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    not_mined = tmp_path  # a directory, but not a mining output
    done = subprocess.run(
        [sys.executable, "-m", "swerl", "data", "stats", str(not_mined)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "swerl: error:" in done.stderr
