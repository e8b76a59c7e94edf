"""Localization quality against gold patches: file hit@k, element coverage, line coverage.

Definitions (the gold side counts only files that exist at the base commit; added files can't be
localized):
* file hit@k: every gold file is among the first k localized files.
* element coverage: of the functions/classes the gold patch touches (innermost element around each
  changed line), the fraction among the localized elements.
* line coverage: of the gold patch's changed lines (old-side numbers; an insertion counts the line
  before it), the fraction inside some edit location.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from agentless.localize.skeleton import Element, elements_of
from swerl.edit_format import parse_patch

KS = (1, 3, 5)


def gold_changed_lines(patch: str) -> dict[str, set[int]]:
    """Old-side line numbers each modified file's gold hunks touch."""
    out: dict[str, set[int]] = {}
    for patched in parse_patch(patch):
        if patched.is_added_file:
            continue
        source = patched.source_file.removeprefix("a/")
        lines = out.setdefault(source, set())
        for hunk in patched:
            last = max(hunk.source_start - 1, 1)
            for line in hunk:
                if line.source_line_no is not None:
                    last = line.source_line_no
                if line.line_type == "-":
                    lines.add(line.source_line_no)
                elif line.line_type == "+":
                    lines.add(max(last, 1))
    return out


def _innermost(elements: Sequence[Element], line: int) -> Element | None:
    inside = [e for e in elements if e.start <= line <= e.end]
    return min(inside, key=lambda e: e.end - e.start) if inside else None


@dataclass
class InstanceLocalization:
    instance_id: str
    gold_files: list[str]
    hits: dict[int, bool]
    element_coverage: float | None
    line_coverage: float | None
    rank: int | None
    """1-based position of the worst-ranked gold file in the localized list (None: one is missing)."""


def score_instance(
    instance_id: str,
    gold_patch: str,
    files: Sequence[str],
    elements: Sequence[Mapping[str, object]],
    locations: Sequence[Mapping[str, object]],
    read_file: Callable[[str], str | None],
) -> InstanceLocalization | None:
    """Scores for one instance, or None when the gold patch modifies no existing file."""
    changed = {p: lines for p, lines in gold_changed_lines(gold_patch).items() if read_file(p) is not None}
    if not changed:
        return None
    gold_files = sorted(changed)
    positions = [files.index(p) + 1 if p in files else None for p in gold_files]
    rank = None if None in positions else max(p for p in positions if p is not None)
    hits = {k: rank is not None and rank <= k for k in KS}
    chosen = {(str(e["path"]), str(e["name"])) for e in elements}
    gold_elements: set[tuple[str, str]] = set()
    for path, lines in changed.items():
        source = read_file(path) or ""
        elems = elements_of(source)
        for line in lines:
            inner = _innermost(elems, line)
            if inner is not None:
                gold_elements.add((path, inner.name))
    element_cov = len(gold_elements & chosen) / len(gold_elements) if gold_elements else None
    total = sum(len(lines) for lines in changed.values())
    covered = 0
    for path, lines in changed.items():
        spans = [(int(loc["start"]), int(loc["end"])) for loc in locations if loc["path"] == path]  # type: ignore[call-overload]
        covered += sum(1 for line in lines if any(s <= line <= e for s, e in spans))
    line_cov = covered / total if total else None
    return InstanceLocalization(instance_id, gold_files, hits, element_cov, line_cov, rank)


def missed_instance(instance_id: str, gold_patch: str) -> InstanceLocalization:
    """The score of an instance that localized nothing (its stage failed): a miss on every measure."""
    gold_files = sorted(gold_changed_lines(gold_patch))
    return InstanceLocalization(instance_id, gold_files, dict.fromkeys(KS, False), 0.0, 0.0, None)


def summarize(results: Sequence[InstanceLocalization]) -> dict[str, float | int]:
    """Means over instances (coverage means over instances where it is defined)."""
    n = len(results)
    summary: dict[str, float | int] = {"instances": n}
    for k in KS:
        summary[f"file_hit@{k}"] = sum(r.hits[k] for r in results) / n if n else 0.0
    for name in ("element_coverage", "line_coverage"):
        values = [getattr(r, name) for r in results if getattr(r, name) is not None]
        summary[name] = sum(values) / len(values) if values else 0.0
    return summary


def format_summary(summary: Mapping[str, float | int]) -> str:
    n = summary["instances"]
    parts = [f"{n} instance{'' if n == 1 else 's'}"]
    parts += [f"{k} {float(v):.1%}" for k, v in summary.items() if k != "instances"]
    return ", ".join(parts)
