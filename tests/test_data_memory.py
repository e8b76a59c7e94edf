"""Bounded memory: the indexes that grow with the history spill to disk and give the same answers.

Each growing structure (seen instance ids, near-duplicate index, GH Archive PR and issue records) is run
over a short and a four times longer history with a small in-memory limit: the tracemalloc peak must stay
about the same, while the same structure without a limit grows with the history (the control that shows
the measurement can see growth at all).
"""

from __future__ import annotations

import gzip
import json
import pickle
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from data_pipeline.engines.spill import SpillMap
from data_pipeline.filter.dedup import Deduplicator
from data_pipeline.run.runner import _chunks
from data_pipeline.schema import Candidate
from data_pipeline.sources.gharchive import GHArchiveSource


def _peak(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _patch(rng: random.Random, n: int) -> str:
    lines = [f"+    value_{rng.randrange(10**9)} = compute({rng.randrange(10**6)})" for _ in range(n)]
    return "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n" + "\n".join(lines) + "\n"


def _patches(count: int) -> list[str]:
    """Distinct patches, with an exact repeat every 7th and a near duplicate every 11th."""
    rng = random.Random(count)
    out: list[str] = []
    for i in range(count):
        if i % 7 == 6:
            out.append(out[-3])
        elif i % 11 == 10:
            base = out[-2].splitlines()
            out.append("\n".join([*base, "+    extra = 1"]) + "\n")
        else:
            out.append(_patch(rng, 6))
    return out


def test_spill_map_matches_a_dict(tmp_path):
    merge = lambda old, new: old + new  # noqa: E731
    spilled = SpillMap(tmp_path / "m.sqlite", limit=5, merge=merge)
    plain: dict[str, list[int]] = {}
    rng = random.Random(0)
    for i in range(200):
        key = f"k{rng.randrange(40):03d}"
        spilled.put(key, [i])
        plain[key] = [*plain.get(key, []), i]
    assert spilled.spilled > 0
    assert dict(spilled.items()) == plain and [k for k, _ in spilled.items()] == sorted(plain)
    assert all(spilled.get(k) == v for k, v in plain.items()) and spilled.get("nope") is None
    members = pickle.loads(pickle.dumps(spilled.membership()))
    assert all(k in members for k in plain) and "nope" not in members
    spilled.close()
    assert not (tmp_path / "m.sqlite").exists()


def test_dedup_spilled_gives_the_same_decisions(tmp_path):
    patches = _patches(400)
    plain = Deduplicator()
    spilled = Deduplicator(spill_dir=tmp_path, limit=20)
    expected = [plain.check("acme/a", p) for p in patches]
    assert [spilled.check("acme/a", p) for p in patches] == expected
    assert sum(why is not None for why in expected) >= 50
    assert spilled._exact.spilled > 5
    spilled.close()


def test_dedup_memory_is_flat(tmp_path):
    def run(count: int, spill: bool) -> int:
        patches = _patches(count)

        def work() -> None:
            dedup = Deduplicator(spill_dir=tmp_path / f"{count}" if spill else None, limit=60)
            for patch in patches:
                dedup.check("acme/a", patch)
            dedup.close()

        return _peak(work)

    short, long = run(200, True), run(800, True)
    assert long < 1.5 * short, (short, long)
    assert run(800, False) > 2 * run(200, False)  # control: unbounded, it grows


def test_seen_ids_memory_is_flat(tmp_path):
    def candidates(count: int):
        for i in range(count):
            yield Candidate(f"acme__a-{i % (count - 50)}", "local", "acme/a", i, f"{i:040x}", "text", "x")

    def run(count: int, limit: int) -> int:
        def work() -> None:
            seen = SpillMap(tmp_path / f"seen-{count}-{limit}.sqlite", limit)
            dups = sum(len(d) for _, d in _chunks(candidates(count), 10, seen))
            assert dups == 50
            seen.close()

        return _peak(work)

    short, long = run(2000, 100), run(8000, 100)
    assert long < 1.5 * short, (short, long)
    assert run(8000, 10**9) > 2 * run(2000, 10**9)


def _archive(folder: Path, files: int, prs_per_file: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    number = 0
    for hour in range(files):
        with gzip.open(folder / f"2024-01-01-{hour}.json.gz", "wt", encoding="utf-8") as f:
            for _ in range(prs_per_file):
                number += 2
                at = f"2024-01-01T{hour:02d}:00:00Z"
                issue = {"number": number - 1, "title": f"Bug {number - 1}", "body": "x" * 200}
                pr = {
                    "number": number,
                    "title": f"Fix {number}",
                    "body": f"Fixes #{number - 1}\n" + "y" * 200,
                    "merged": True,
                    "merge_commit_sha": f"{number:040x}",
                    "user": {"login": "dev"},
                    "created_at": at,
                }
                for kind, payload in (
                    ("IssuesEvent", {"action": "opened", "issue": issue}),
                    ("PullRequestEvent", {"action": "closed", "number": number, "pull_request": pr}),
                ):
                    event = {"type": kind, "repo": {"name": "acme/a"}, "payload": payload, "created_at": at}
                    f.write(json.dumps(event) + "\n")


def test_gharchive_memory_is_flat(tmp_path):
    def run(files: int, limit: int) -> tuple[int, int]:
        folder = tmp_path / f"dumps-{files}"
        if not folder.exists():
            _archive(folder, files, 150)
        source = GHArchiveSource(folder, tmp_path / "cache", workers=1, spill_limit=limit, scratch=tmp_path)
        state: dict = {}
        source.prepare(state)
        found = 0

        def work() -> None:
            nonlocal found
            for candidate in source.candidates(state):
                assert candidate.problem_statement.startswith(f"Bug {candidate.pull_number - 1}")
                found += 1

        return _peak(work), found

    (short, n_short), (long, n_long) = run(2, 60), run(8, 60)
    assert (n_short, n_long) == (300, 1200)
    assert long < 1.5 * short, (short, long)
    assert run(8, 10**9)[0] > 2 * run(2, 10**9)[0]


def test_counting_and_import_scans_keep_no_file_text():
    """Token counts and import scans are memoised per file version, but a memo keyed by the text itself
    held every large file a long history met (hundreds of MiB late in numpy/numpy's). After counting
    and scanning many large files, none of their text may stay alive."""
    from data_pipeline.context.builder import _imports
    from data_pipeline.context.tokens import estimate_tokens

    def held(use: Callable[[str, str], object]) -> int:
        """Bytes still traced after `use(path, text)` on 40 distinct files of ~100 KB."""
        tracemalloc.start()
        try:
            for i in range(40):
                use(
                    f"pkg/m{i}.py",
                    f"import os\nfrom pkg import mod_{i}\n" + f"value_{i} = compute()\n" * 4000,
                )
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    assert held(lambda path, text: estimate_tokens(text)) < 1 << 20
    assert held(_imports) < 1 << 20
    kept: list[str] = []
    assert held(lambda path, text: kept.append(text)) > 3 << 20  # control: a kept text is seen
