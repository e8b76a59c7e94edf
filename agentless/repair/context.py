"""The code context a repair prompt shows: whole files when small, windows around edit locations when not.

`swerl.edit_format.build_messages` renders `### path` plus the text given for each path. For a large
file we give the lines around the edit locations (with `...` between windows) instead of all of it,
so several files fit in a context window. Every window is a verbatim run of the file's lines, so a
SEARCH block copied from it still matches the real file, which is what edits are applied to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agentless.localize.elements import EditLocation, merge_locations

WINDOW_PADDING = 15
GAP_MARKER = "..."


def windows(text: str, locations: Sequence[EditLocation], *, padding: int = WINDOW_PADDING) -> str:
    """The lines of `text` covered by `locations` (padded), with a `...` line for every gap."""
    lines = text.split("\n")
    padded = [
        EditLocation(loc.path, max(1, loc.start - padding), min(len(lines), loc.end + padding))
        for loc in locations
    ]
    out: list[str] = []
    cursor = 1
    for loc in merge_locations(padded):
        if loc.start > cursor:
            out.append(GAP_MARKER)
        out.extend(lines[loc.start - 1 : loc.end])
        cursor = loc.end + 1
    if cursor <= len(lines) and any(line.strip() for line in lines[cursor - 1 :]):
        out.append(GAP_MARKER)
    return "\n".join(out) + "\n"


def build_context(
    sources: Mapping[str, str],
    files: Sequence[str],
    locations: Sequence[EditLocation],
    *,
    max_files: int = 3,
    full_file_chars: int = 16_000,
    max_total_chars: int = 60_000,
) -> dict[str, str]:
    """Path -> text to show, for the first `max_files` of `files` that exist.

    A file with edit locations is shown whole when it is under `full_file_chars`, else as windows. A file
    without locations is shown whole only when small, else skipped. The total stays under
    `max_total_chars`, dropping later files first (they are the less likely ones).
    """
    by_path: dict[str, list[EditLocation]] = {}
    for loc in locations:
        by_path.setdefault(loc.path, []).append(loc)
    ordered = [p for p in by_path if p in sources] + [p for p in files if p in sources and p not in by_path]
    context: dict[str, str] = {}
    total = 0
    for path in ordered:
        if len(context) >= max_files:
            break
        text = sources[path]
        if len(text) <= full_file_chars:
            shown = text
        elif path in by_path:
            shown = windows(text, by_path[path])
        else:
            continue
        if total + len(shown) > max_total_chars and context:
            break
        context[path] = shown
        total += len(shown)
    return context
