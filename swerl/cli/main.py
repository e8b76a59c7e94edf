"""`swerl`: the entry point. Each command group lives in its own module and registers its subcommands.

Start-up matters here: a command module imports only the standard library and light swerl modules at
import time (torch, pyarrow, transformers load inside the command that needs them), so `swerl --help`
and `swerl reward score` on a small file start in a fraction of a second.

Errors take one path (`report_error`): a problem the user can fix (`swerl.errors.UserError`, a file that
cannot be read or written) is one line and exit status 1; anything else is a bug in swerl, also one line,
naming where it was raised and how to report it. `--debug` or `SWERL_DEBUG=1` shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
import traceback
from collections.abc import Sequence
from pathlib import Path

from swerl import __version__
from swerl.cli import agentless, data, eval, exiting, models, plot, quickstart, reward, sandbox, serve, train
from swerl.cli.args import absolute_paths, finish_parsers, parse_command_line
from swerl.errors import UserError

DEBUG_ENV = "SWERL_DEBUG"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swerl",
        description="Train and serve code LLMs with reinforcement learning on software-engineering data "
        "(SWE-RL similarity reward, RLEF execution feedback, Agentless repair).",
        epilog=f"Every command has --help. Set {DEBUG_ENV}=1 (or pass --debug) to see tracebacks.",
    )
    parser.add_argument("--version", action="version", version=f"swerl {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help=f"show the full traceback of an error (or set {DEBUG_ENV}=1)"
    )
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    agentless.register(groups)
    data.register(groups)
    eval.register(groups)
    models.register(groups)
    reward.register(groups)
    sandbox.register(groups)
    train.register(groups)
    plot.register(groups)
    quickstart.register(groups)
    serve.register(groups)
    finish_parsers(parser)
    return parser


def _origin(err: BaseException) -> str:
    """'file:line in function' of the innermost frame outside the standard library and installed
    packages (swerl's own code, unless the error came from a library; then the innermost frame), so a
    one-line report still says where to look."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    libraries = {Path(sysconfig.get_path(name)).resolve() for name in ("stdlib", "purelib", "platlib")}
    ours = [f for f in frames if not any(Path(f.filename).resolve().is_relative_to(p) for p in libraries)]
    frame = (ours or frames)[-1]
    root = Path(__file__).resolve().parents[2]
    path = Path(frame.filename).resolve()
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return f"{shown}:{frame.lineno} in {frame.name}"


def describe_os_error(err: OSError) -> str:
    """An OSError as the user needs it: what failed and on which path (Python's own text repeats the
    errno and quotes the path in its repr)."""
    what = err.strerror or str(err)
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    return f"{what}: {' -> '.join(os.fsdecode(p) for p in paths)}" if paths else what


def report_error(err: BaseException, debug: bool) -> int:
    """Print `err` as the command's last word and return the exit status (1)."""
    if debug:
        traceback.print_exception(err)
    if isinstance(err, UserError):
        print(f"swerl: error: {err}", file=sys.stderr)
    elif isinstance(err, OSError):
        print(f"swerl: error: {describe_os_error(err)}", file=sys.stderr)
    else:
        where = _origin(err)
        print(
            f"swerl: internal error: {type(err).__name__}: {err}" + (f" (at {where})" if where else ""),
            file=sys.stderr,
        )
        if not debug:
            print(
                "swerl: this is a bug in swerl: please report it on the project's issue tracker with the "
                f"command and the traceback that `swerl --debug ...` (or {DEBUG_ENV}=1) prints",
                file=sys.stderr,
            )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; exit status 0 on success, 1 for errors, 2 for usage errors, 130 if interrupted."""
    parser = build_parser()
    args = absolute_paths(parse_command_line(parser, argv))
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        print("swerl: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of our output went away (`swerl ... | head`): nothing more to say, and nobody to
        # say it to; stdout is pointed at /dev/null so the interpreter's own flush at exit stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as err:
        return report_error(err, debug)


def entry() -> int:
    """The installed `swerl` command: `main`, for a process that exits right after."""
    return exiting(main())


if __name__ == "__main__":
    sys.exit(entry())
