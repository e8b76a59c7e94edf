"""Argument types, help formatting and path resolution shared by every `swerl` command.

Paths are made absolute once, here, where the command line is parsed (`absolute_paths`, and the types
below for values that may name a file or something else): a relative path handed further down means
something else as soon as any step changes directory (a test checkout, an environment build), and a
relative path recorded in a manifest or run config means something else to the next reader.

Why types instead of checks in each command: argparse reports a bad value as a usage error (exit 2) that
names the option, before any work starts; a negative `--max-lines` or a directory given as `--input`
then never gets as far as loading a model or scoring a file.
"""

from __future__ import annotations

import argparse
import difflib
import glob
import math
import os
import re
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from swerl.paths import file_in_the_way


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and epilogs, and appends each option's default to its help
    unless the help text already states one (many say why the default is what it is)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        # Identity checks: a default of 0 is worth showing, though 0 == False.
        shown = not (default is None or default is False or default is argparse.SUPPRESS or default == [])
        if not action.option_strings and action.nargs not in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            shown = False  # a required positional has no default worth showing
        if shown and "default" not in text.lower():
            text += " (default: %(default)s)"
        return text


def _one_line_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    """A usage error as one line that says where the usage is, rather than argparse's usage block (25
    lines for `data mine`) above the one line that matters."""
    parser.exit(2, f"{parser.prog}: error: {message} (see {parser.prog} --help)\n")


def finish_parsers(parser: argparse.ArgumentParser) -> None:
    """Give `parser` and every subcommand parser under it the shared help formatter and one-line usage
    errors, and no abbreviated options: `--max-line` silently meaning `--max-line-length` today would
    mean something else, or nothing, once another option starts the same way."""
    parser.formatter_class = HelpFormatter
    parser.error = types.MethodType(_one_line_error, parser)  # type: ignore[method-assign]
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                finish_parsers(sub)


def parse_command_line(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, but an unknown option is reported by the subcommand it was given to,
    with the closest options it has (argparse reports it at the top level: `swerl: error: unrecognized
    arguments`, pointing to `swerl --help`, which does not list any subcommand's options)."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _innermost(parser, list(sys.argv[1:] if argv is None else argv))
        options = [o for action in command._actions for o in action.option_strings]
        hints = []
        for extra in extras:
            close = (
                difflib.get_close_matches(extra.partition("=")[0], options, n=1) if extra[:1] == "-" else []
            )
            hints += [f"{extra}: did you mean {close[0]}?"] if close else []
            if extra[:1] != "-" and "=" in extra and "--set" in options:
                hints.append(f"{extra}: each KEY=VALUE takes its own --set")
        command.error(
            f"unrecognized arguments: {' '.join(extras)}" + ("; " + "; ".join(hints) if hints else "")
        )
    return args


def _innermost(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser that `argv` selects: the last one whose name it gives."""
    for position, token in enumerate(argv):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) and token in action.choices:
                return _innermost(action.choices[token], argv[position + 1 :])
    return parser


def absolute(path: str | Path) -> Path:
    """`path` made absolute against the current directory (`~` expanded), without following symlinks:
    the path the user meant, not where a link points today."""
    return Path(os.path.abspath(Path(path).expanduser()))


def absolute_paths(args: argparse.Namespace) -> argparse.Namespace:
    """Every `Path` in parsed `args` (and in lists of them), defaults included, made absolute: the one
    pass every command goes through, so nothing below the command line sees a relative path."""
    for name, value in vars(args).items():
        if isinstance(value, Path):
            setattr(args, name, absolute(value))
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            setattr(args, name, [absolute(v) for v in value])
    return args


def local_or_name(text: str) -> str:
    """A value that is either local files or folders, comma-separated, each made absolute, or a name
    that is not a path (a hub id, a keyword such as `gold`, `bundled:test`): a part that exists here, or
    a glob that matches here, is taken for a path; any other part is left as written."""

    def one(part: str) -> str:
        matches = glob.glob(os.path.expanduser(part)) if glob.has_magic(part) else []
        return str(absolute(part)) if matches or Path(part).expanduser().exists() else part

    return ",".join(one(part) for part in text.split(","))


def repo_name(text: str) -> str:
    """A GitHub repository's OWNER/NAME (what rows, ids and decontamination match repositories by)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9_.-]+", text) or text.endswith((".", "/")):
        raise argparse.ArgumentTypeError(
            f"expected OWNER/NAME as on GitHub (e.g. pallets/click), got {text!r}"
        )
    return text


def _number(kind: Callable[[str], float], text: str) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1 (counts of steps, rows, workers, tokens)."""
    value = int(_number(int, text))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text: str) -> int:
    """An integer >= 0 (seeds, limits where 0 means none)."""
    value = int(_number(int, text))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (time limits, budgets in minutes)."""
    value = _number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (temperatures: 0 means greedy)."""
    value = _number(float, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def unit_interval(text: str) -> float:
    """A number in (0, 1] (top-p, similarity thresholds)."""
    value = _number(float, text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def proper_fraction(text: str) -> float:
    """A number in (0, 1): a share that must leave something on both sides (a held-out fraction)."""
    value = _number(float, text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1), got {text}")
    return value


def existing_file(text: str) -> Path:
    """A path that is a readable file now, so a typo fails at once, not after the model has loaded."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"no such file: {text}")
    return path


CHECKOUT_CONFIGS = Path(__file__).resolve().parents[2] / "configs"
"""The configs of the checkout swerl runs from (installed editable, as bootstrap.sh installs it)."""


def config_file(text: str) -> Path:
    """`--config`: an existing file; a relative path that is not one here but is one of the checkout's
    own configs (`configs/grpo_tiny_cpu.yaml`, as the docs write it) is that config, said on stderr, so
    the docs' commands work from any directory. The paths inside a config stay relative to here."""
    path = Path(text)
    if path.is_file() or path.is_dir() or path.is_absolute():
        return existing_file(text)
    parts = path.parts[1:] if path.parts[:1] == ("configs",) else path.parts
    shipped = CHECKOUT_CONFIGS.joinpath(*parts) if parts else CHECKOUT_CONFIGS
    if shipped.is_file():
        print(f"swerl: {text} is not in this directory; using swerl's own {shipped}", file=sys.stderr)
        return shipped
    hint = f" (swerl's own configs are in {CHECKOUT_CONFIGS})" if CHECKOUT_CONFIGS.is_dir() else ""
    raise argparse.ArgumentTypeError(f"no such file: {text}{hint}")


def existing_dir(text: str) -> Path:
    """A path that is a directory now."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a file, not a directory" if path.exists() else f"no such directory: {text}"
        )
    return path


def existing_path(text: str) -> Path:
    """A file or directory that exists now."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file or directory: {text}")
    return path


def model_name(text: str) -> str:
    """A hub id or a model directory: a local path that does not exist, or a hub id that is neither cached
    nor reachable, is refused now, rather than after a minute of download retries."""
    from swerl.configs import looks_local
    from swerl.hub import model_problem

    problem = model_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return str(absolute(text)) if looks_local(text) else text


def output_file(text: str) -> Path:
    """A file to write: not a directory, and its folder not a file (created when the command starts)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name")
    blocking = file_in_the_way(path.parent)
    if blocking is not None:
        raise argparse.ArgumentTypeError(f"{blocking} is a file, so {text} cannot be written")
    return path


def output_dir(text: str) -> Path:
    """A directory to write into: may not exist yet, but must not be a file (nor lie under one)."""
    path = Path(text)
    blocking = file_in_the_way(path)
    if blocking is not None:
        raise argparse.ArgumentTypeError(f"{blocking} is a file, not a directory")
    return path
