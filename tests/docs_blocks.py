"""The fenced code blocks of the user manual (README.md and docs/*.md, not docs/dev/), as
tests/test_docs.py runs them.

A block's id is its file and the GitHub anchor of the heading above it, with `/2`, `/3`, ... for the
second and later blocks under the same heading (`docs/agentless.md#agentless-solving-swe-bench-instances
-with-a-swerl-model/2`): ids stay put when a block is added in another section.

Right before a block (blank lines between allowed), a marker says why the test does not run it:
`<!-- not-runnable-here: REASON -->` for a command that needs what a CPU-only machine without network
lacks (a GPU, the network, Docker, a hub model, data that is not in the repository), and
`<!-- not-a-command: WHAT IT IS -->` for what is shown rather than run (a command's output, a diagram,
a config fragment).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = ("bash", "sh", "shell", "console")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
_MARKER = re.compile(r"<!--\s*(not-runnable-here|not-a-command):\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language and text, and its marker if it has one."""

    id: str
    path: Path
    line: int
    language: str
    text: str
    marker: str | None = None
    reason: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def manual_files() -> list[Path]:
    """README.md and docs/*.md: the pages a user follows (docs/dev/ holds development notes)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def blocks(path: Path) -> list[Block]:
    """Every fenced block of Markdown file `path`, in order."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    seen: dict[str, int] = {}
    section = anchor(path.stem)
    index = 0
    while index < len(lines):
        line = lines[index]
        fence = _FENCE.match(line)
        if not fence:
            heading = re.match(r"^#{1,6}\s+(.*)", line)
            if heading:
                section = anchor(heading.group(1))
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not re.match(rf"^\s*{re.escape(fence.group(2))}\s*$", lines[end]):
            end += 1
        indent = len(fence.group(1))
        text = "\n".join(body[indent:] for body in lines[index + 1 : end])
        before = index - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = _MARKER.search(lines[before]) if before >= 0 else None
        seen[section] = seen.get(section, 0) + 1
        block_id = f"{path.relative_to(ROOT)}#{section}" + (f"/{seen[section]}" if seen[section] > 1 else "")
        found.append(
            Block(
                id=block_id,
                path=path,
                line=index + 1,
                language=fence.group(3).lower(),
                text=text + "\n",
                marker=marker.group(1) if marker else None,
                reason=marker.group(2) if marker else None,
            )
        )
        index = end + 1
    return found


def manual_blocks() -> list[Block]:
    """Every block of every page of the manual."""
    return [block for path in manual_files() for block in blocks(path)]
