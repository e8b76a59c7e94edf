"""Pull the program out of a model's answer. RLEF prompts ask for one fenced Python block; models often
write several (a sketch, then the fix), so by default the last one counts.

A block that does not parse is not valid code (it cannot pass a test, so it is never run), but the model
is told why: `extract_answer` keeps the interpreter's own SyntaxError report for the feedback turn.
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


@dataclass(frozen=True)
class ExtractConfig:
    """Which fenced block is the answer."""

    languages: tuple[str, ...] = ("python", "python3", "py")
    """Info strings that mark a Python block (case-insensitive)."""
    accept_untagged: bool = True
    """Also take blocks with no language tag (but never blocks tagged with another language)."""
    pick: str = "last"
    """'last' or 'first' of the matching blocks."""
    require_valid_syntax: bool = True
    """A block that does not parse as Python counts as no code (saves a sandbox run that cannot pass)."""


PROGRAM_FILENAME = "/sandbox/main.py"
"""The name the sandbox runs a program under (`swerl.sandbox.bwrap.SANDBOX_PROGRAM`), so a syntax error
is reported with the same file name as any other traceback from a run."""


@dataclass(frozen=True)
class Extracted:
    """What an answer holds: the program to run, or why there is none."""

    code: str | None
    """The program to run; None when there is no block, an empty one, or (by default) one that does not
    parse."""
    syntax_error: str | None = None
    """When the chosen block does not parse: the interpreter's report (file and line, the offending line
    with its caret, `SyntaxError: ...`), as `python main.py` prints it on stderr."""


def syntax_error_report(code: str, filename: str = PROGRAM_FILENAME) -> str | None:
    """The interpreter's report for code that does not compile, or None when it compiles.

    `compile` raises the very exception the interpreter raises before running a file, and
    `traceback.format_exception_only` is what prints it, so the text (line number, source line, caret,
    message) is the interpreter's own for this Python version. ValueError covers NUL bytes in the
    source; deeply nested code raises RecursionError or MemoryError instead of a SyntaxError.
    """
    try:
        compile(code, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return "".join(traceback.format_exception_only(type(error), error)).rstrip("\n")
    except (RecursionError, MemoryError) as error:
        return f"{type(error).__name__}: the program is nested too deeply to compile"
    return None


def extract_answer(answer: str, config: ExtractConfig | None = None) -> Extracted:
    """The program in `answer`, or None with the syntax error that disqualified the chosen block."""
    config = config or ExtractConfig()
    wanted = {language.lower() for language in config.languages}
    blocks = [
        body
        for tag, body in _FENCE.findall(answer)
        if tag.lower() in wanted or (config.accept_untagged and not tag)
    ]
    if not blocks:
        return Extracted(None)
    code = blocks[-1] if config.pick == "last" else blocks[0]
    if not code.strip():
        return Extracted(None)
    if config.require_valid_syntax:
        error = syntax_error_report(code)
        if error is not None:
            return Extracted(None, error)
    return Extracted(code)


def extract_code(answer: str, config: ExtractConfig | None = None) -> str | None:
    """The program in `answer`, or None: the caller then records the 'no valid code' verdict."""
    return extract_answer(answer, config).code
