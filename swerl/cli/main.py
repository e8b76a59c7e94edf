"""`swerl`: the entry point. Each command group lives in its own module and registers its subcommands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from swerl import __version__
from swerl.cli import agentless, data, eval, exiting, plot, quickstart, reward, sandbox, train


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swerl",
        description="Train and serve code LLMs with reinforcement learning on software-engineering data "
        "(SWE-RL similarity reward, RLEF execution feedback, Agentless repair).",
    )
    parser.add_argument("--version", action="version", version=f"swerl {__version__}")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    agentless.register(groups)
    data.register(groups)
    eval.register(groups)
    reward.register(groups)
    sandbox.register(groups)
    train.register(groups)
    plot.register(groups)
    quickstart.register(groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; exit status 2 for usage errors, 1 for failures the user can fix."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        print(f"swerl: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("swerl: interrupted", file=sys.stderr)
        return 130


def entry() -> int:
    """The installed `swerl` command: `main`, for a process that exits right after."""
    return exiting(main())


if __name__ == "__main__":
    sys.exit(entry())
