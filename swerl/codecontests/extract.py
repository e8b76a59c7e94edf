"""Pull the program out of a model's answer. RLEF prompts ask for one fenced Python block; models often
write several (a sketch, then the fix), so by default the last one counts."""

from __future__ import annotations

import ast
import re
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


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def extract_code(answer: str, config: ExtractConfig | None = None) -> str | None:
    """The program in `answer`, or None: the caller then records the 'no valid code' verdict."""
    config = config or ExtractConfig()
    wanted = {language.lower() for language in config.languages}
    blocks = [
        body
        for tag, body in _FENCE.findall(answer)
        if tag.lower() in wanted or (config.accept_untagged and not tag)
    ]
    if not blocks:
        return None
    code = blocks[-1] if config.pick == "last" else blocks[0]
    if not code.strip() or (config.require_valid_syntax and not _parses(code)):
        return None
    return code
