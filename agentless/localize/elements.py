"""Element localization (functions, methods, classes of the top files) and edit locations (line ranges).

Model-free: an element scores for being named in the issue, for holding a stack frame, and by BM25 of
its own text. With a model: the model reads the skeletons of the top files and names elements; its
picks come first and the model-free ones fill up the rest. Edit locations are the chosen elements'
line spans (a long class contributes its head only; its methods are elements of their own) plus a window
around every frame line the issue shows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentless.localize.signals import IssueSignals
from agentless.localize.skeleton import Element, elements_of, skeleton
from swerl.retrieval.bm25 import bm25_scores, doc_stats

LONG_ELEMENT_LINES = 150
"""A chosen class longer than this contributes only its first CLASS_HEAD_LINES lines as a location."""
CLASS_HEAD_LINES = 30
FRAME_WINDOW = 10


@dataclass(frozen=True)
class ElementHit:
    """An element picked for a file, with the score that picked it (model picks carry `source='model'`)."""

    path: str
    element: Element
    score: float
    source: str = "model_free"

    def to_row(self) -> dict[str, object]:
        e = self.element
        return {
            "path": self.path,
            "name": e.name,
            "kind": e.kind,
            "start": e.start,
            "end": e.end,
            "score": round(self.score, 4),
            "source": self.source,
        }


@dataclass(frozen=True)
class EditLocation:
    """Lines `start..end` (1-based, inclusive) of `path` that the repair should look at."""

    path: str
    start: int
    end: int

    def to_row(self) -> dict[str, object]:
        return {"path": self.path, "start": self.start, "end": self.end}


def _frame_matches(path: str, frame_path: str) -> bool:
    tail = frame_path.replace("\\", "/").lstrip("/")
    return tail == path or tail.endswith("/" + path) or path.endswith("/" + tail)


def element_bm25(
    sources: Mapping[str, str], issue: str, order: Sequence[str]
) -> list[tuple[str, Element, float]]:
    """Every element of the files in `order` with the BM25 score of its own text against `issue`, scaled
    so the best is 1. The corpus is these elements only: a term is rare if few of *these* functions use
    it, which is what separates the one that handles the issue from its neighbours."""
    candidates: list[tuple[str, Element, str]] = []
    for path in order:
        text = sources.get(path)
        if text is None:
            continue
        lines = text.split("\n")
        for element in elements_of(text):
            candidates.append((path, element, "\n".join(lines[element.start - 1 : element.end])))
    scores = bm25_scores(issue, [doc_stats(body) for _, _, body in candidates])
    best = max(scores, default=0.0) or 1.0
    return [(path, e, score / best) for (path, e, _), score in zip(candidates, scores, strict=True)]


def rank_elements(
    sources: Mapping[str, str], issue: str, signals: IssueSignals, *, file_order: Sequence[str] | None = None
) -> list[ElementHit]:
    """Elements of `sources` by model-free score; the file's rank breaks near-ties toward top files."""
    order = list(file_order or sources)
    candidates = element_bm25(sources, issue, order)
    hits = []
    for path, element, score in candidates:
        mentions = signals.identifiers.get(element.short_name, 0)
        if mentions:
            score += 2.0 * min(1.0, mentions / 2)
        if element.name in issue:
            score += 1.0
        for frame in signals.frames:
            if not _frame_matches(path, frame.path):
                continue
            if frame.line is not None and element.start <= frame.line <= element.end:
                score += 1.5 if element.kind == "class" else 3.0
            elif frame.function and frame.function.split(".")[-1] == element.short_name:
                score += 2.0
        score /= 1.0 + 0.15 * order.index(path)
        if score > 0:
            hits.append(ElementHit(path, element, score))
    hits.sort(key=lambda h: (-h.score, order.index(h.path), h.element.start))
    return hits


_ELEMENT_PROMPT = """\
Below is an issue reported on a software repository, and skeletons of the files most likely involved \
(function bodies are replaced by `...`).

<issue>
{issue}
</issue>

{skeletons}

Which functions, methods or classes need to be looked at or changed to resolve the issue? Answer with \
a single ``` block. In it, write a file's path on a line of its own, then one line per element of that \
file: `function: name` for a function, `function: Class.method` for a method, `class: Name` for a class. \
Name at most {k} elements. Write nothing else."""


def element_messages(issue: str, skeletons: Mapping[str, str], *, k: int = 8) -> list[dict[str, str]]:
    rendered = "\n\n".join(f"### {path}\n```python\n{text}\n```" for path, text in skeletons.items())
    content = _ELEMENT_PROMPT.format(issue=issue.strip(), skeletons=rendered, k=k)
    return [{"role": "user", "content": content}]


def skeletons_of(sources: Mapping[str, str], *, max_chars: int = 30_000) -> dict[str, str]:
    """Skeletons in the given order until `max_chars`; a file that would overflow is cut, not dropped."""
    out: dict[str, str] = {}
    budget = max_chars
    for path, text in sources.items():
        if budget <= 0:
            break
        sk = skeleton(text)
        out[path] = sk[:budget]
        budget -= len(out[path])
    return out


_ELEMENT_LINE = re.compile(r"^\s*(function|class|method|def)\s*:\s*([\w.]+)")


def parse_element_answer(text: str, sources: Mapping[str, str], *, k: int = 8) -> list[ElementHit]:
    """Elements named in a model's answer; names that match no element of the current file are dropped."""
    block = re.search(r"```[^\n]*\n(.*?)```", text, re.DOTALL)
    body = block.group(1) if block else text
    elements = {path: elements_of(src) for path, src in sources.items()}
    current: str | None = None
    hits: list[ElementHit] = []
    for line in body.splitlines():
        stripped = line.strip().strip("`").removeprefix("### ").strip()
        named = [p for p in sources if stripped == p or (stripped and p.endswith("/" + stripped))]
        if len(named) == 1:
            current = named[0]
            continue
        match = _ELEMENT_LINE.match(line)
        if not match:
            continue
        name = match.group(2)
        search = [current] if current else list(sources)
        for path in search:
            found = [e for e in elements[path] if e.name == name] or [
                e for e in elements[path] if e.short_name == name.rsplit(".", 1)[-1]
            ]
            if found:
                hit = ElementHit(path, found[0], 1.0, source="model")
                if all((h.path, h.element) != (hit.path, hit.element) for h in hits):
                    hits.append(hit)
                break
        if len(hits) >= k:
            break
    return hits


def merge_elements(
    model: Sequence[ElementHit], model_free: Sequence[ElementHit], *, k: int
) -> list[ElementHit]:
    """Model picks first, then model-free ones, no element twice, at most `k`."""
    out: list[ElementHit] = []
    seen: set[tuple[str, str]] = set()
    for hit in [*model, *model_free]:
        key = (hit.path, hit.element.name)
        if key not in seen:
            seen.add(key)
            out.append(hit)
        if len(out) >= k:
            break
    return out


def edit_locations(
    hits: Sequence[ElementHit], signals: IssueSignals, sources: Mapping[str, str]
) -> list[EditLocation]:
    """Line ranges from the chosen elements and the issue's frames, merged per file where they overlap."""
    raw: list[EditLocation] = []
    for hit in hits:
        e = hit.element
        end = e.end
        if e.kind == "class" and e.end - e.start + 1 > LONG_ELEMENT_LINES:
            end = e.start + CLASS_HEAD_LINES - 1
        raw.append(EditLocation(hit.path, e.start, end))
    for frame in signals.frames:
        if frame.line is None:
            continue
        for path, text in sources.items():
            if _frame_matches(path, frame.path):
                count = text.count("\n") + 1
                start = max(1, frame.line - FRAME_WINDOW)
                end = min(count, frame.line + FRAME_WINDOW)
                if start <= end:
                    raw.append(EditLocation(path, start, end))
    return merge_locations(raw)


def merge_locations(locations: Sequence[EditLocation]) -> list[EditLocation]:
    """Union of overlapping or adjacent ranges per file; files keep the order they first appear in."""
    by_path: dict[str, list[tuple[int, int]]] = {}
    for loc in locations:
        by_path.setdefault(loc.path, []).append((loc.start, loc.end))
    merged: list[EditLocation] = []
    for path, spans in by_path.items():
        spans.sort()
        start, end = spans[0]
        for s, e in spans[1:]:
            if s <= end + 1:
                end = max(end, e)
            else:
                merged.append(EditLocation(path, start, end))
                start, end = s, e
        merged.append(EditLocation(path, start, end))
    return merged
