"""Hints an issue text gives about where the bug lives: paths, dotted module names, stack frames, names.

Issues often name the culprit outright (a traceback, `from pkg.mod import thing`, a file path), and a
weak model will miss what a regular expression reads for free. Everything here is pure text processing,
so it is cheap to run on every instance and easy to test.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# Python tracebacks: File "/any/where/pkg/mod.py", line 12, in func
_PY_FRAME = re.compile(r'File "([^"\n]+?\.pyx?)", line (\d+)(?:, in ([A-Za-z_<][\w<>.]*))?')
# pytest's short frames: pkg/mod.py:12: in func   /   pkg/mod.py:12: ValueError
_PYTEST_FRAME = re.compile(r"(?m)^\s*([\w./\\-]+\.pyx?):(\d+):(?: in ([A-Za-z_][\w.]*))?")
_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|pyx|pyi|cfg|toml|rst|txt|c|h))\b")
_DOTTED = re.compile(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\b")
_IMPORT = re.compile(r"\b(?:from\s+([\w.]+)\s+import\s+([\w, ()]+)|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FENCED = re.compile(r"```.*?```", re.DOTALL)
_INLINE = re.compile(r"`[^`\n]+`")
# A command-line option as users type it (`--collect-only`, `--import-mode=importlib`).
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class Frame:
    """One stack frame the issue shows. `path` is as written (often absolute, in site-packages)."""

    path: str
    line: int | None
    function: str | None


@dataclass
class IssueSignals:
    """What an issue points at. Order is the order of appearance (the last frame is the deepest)."""

    paths: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    identifiers: Counter[str] = field(default_factory=Counter)
    """Names that look like code: in inline code spans, called, or written in snake_case / CamelCase."""
    options: list[str] = field(default_factory=list)
    """Command-line options the issue names (`--fixtures`): the file that declares one handles it."""


def _looks_like_code(word: str) -> bool:
    return "_" in word.strip("_") or (any(c.isupper() for c in word[1:]) and any(c.islower() for c in word))


def issue_title(text: str) -> str:
    """The issue's first non-blank line: its title where the text is "title, blank line, body", as in
    SWE-bench's problem statements and GitHub issues."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def extract_signals(text: str) -> IssueSignals:
    """Read paths, modules, frames and code-like names out of an issue's text."""
    signals = IssueSignals()
    for match in _PY_FRAME.finditer(text):
        signals.frames.append(Frame(match.group(1).replace("\\", "/"), int(match.group(2)), match.group(3)))
    for match in _PYTEST_FRAME.finditer(text):
        signals.frames.append(Frame(match.group(1).replace("\\", "/"), int(match.group(2)), match.group(3)))
    for match in _PATH.finditer(text.replace("\\", "/")):
        path = match.group(1).lstrip("./")
        if path and path not in signals.paths:
            signals.paths.append(path)
    modules: list[str] = []
    for match in _IMPORT.finditer(text):
        if match.group(1):
            modules.append(match.group(1))
            names = re.findall(r"[A-Za-z_]\w*", match.group(2))
            modules.extend(f"{match.group(1)}.{name}" for name in names)
        else:
            modules.extend(part.strip().split(" ")[0] for part in match.group(3).split(","))
    for match in _DOTTED.finditer(text):
        dotted = match.group(1)
        # File names ("setup.py") and version numbers are not modules.
        if not re.search(r"\.(py|pyx|txt|rst|cfg|toml|html|org|com)$", dotted):
            modules.append(dotted)
    signals.modules = list(dict.fromkeys(m for m in modules if m))
    # An inline span names code on purpose; a fenced block is mostly pasted output (logs, pip lists,
    # SQL, sessions) whose every word would otherwise count as a name: only code-looking ones count.
    prose = _FENCED.sub(" ", text)
    for word in _IDENT.findall(" ".join(_INLINE.findall(prose))):
        signals.identifiers[word] += 2
    for word in _IDENT.findall(" ".join(_FENCED.findall(text))):
        if _looks_like_code(word):
            signals.identifiers[word] += 1
    signals.options = list(dict.fromkeys(_OPTION.findall(text)))
    for word in _CALL.findall(text):
        signals.identifiers[word] += 1
    for word in _IDENT.findall(prose):
        if _looks_like_code(word):
            signals.identifiers[word] += 1
    for frame in signals.frames:
        if frame.function:
            signals.identifiers[frame.function.split(".")[-1]] += 2
    for dotted in signals.modules:
        for part in dotted.split("."):
            signals.identifiers[part] += 1
    return signals
