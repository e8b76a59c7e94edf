"""The line changes extraction records (`data_pipeline.extract.edges`) move a version's line counts to
exactly the counts of the next version, and the context stage's facts stay those of a full scan whether
it follows them, meets a gap, or meets a record that does not fit."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.context.builder import BlobFacts, ContextBuilder, VersionStore
from data_pipeline.context.tokens import estimate_tokens
from data_pipeline.extract.edges import LineEdges, apply_deltas, segment_delta
from swerl.edit_format import build_git_patch, parse_patch

_PIECES = ["import os", "x = 1", "", "  return x\r", "déjà = 2", "\tpass", "y = [\x0c]", "x = 1"]


def _delta(old: str, new: str):
    (patched,) = parse_patch(build_git_patch({"m.py": old}, {"m.py": new}))
    return segment_delta(patched, old, new)


texts = st.lists(st.sampled_from(_PIECES), max_size=12).flatmap(
    lambda lines: st.sampled_from(["", "\n"]).map(lambda end: "\n".join(lines) + end if lines else end)
)


@settings(max_examples=300, deadline=None)
@given(old=texts, new=texts)
def test_a_patch_delta_moves_line_counts_to_the_new_version(old, new):
    if old == new:
        return
    lines = Counter(old.split("\n"))
    assert apply_deltas(lines, [_delta(old, new)])
    assert lines == Counter(new.split("\n"))
    assert all(n > 0 for n in lines.values())


def test_a_delta_that_removes_a_missing_line_is_refused():
    lines = Counter(["a", "b", ""])
    assert not apply_deltas(lines, [(["c"], ["d"])])


def test_chains_connect_recorded_versions_only():
    edges = LineEdges(1 << 20)
    edges.record("r", "p.py", "v0", "v1", (["a"], ["b"]))
    edges.record("r", "p.py", "v1", "v2", (["b"], ["c"]))
    assert edges.chain("r", "p.py", "v0", "v2") == [(["a"], ["b"]), (["b"], ["c"])]
    assert edges.chain("r", "p.py", "v1", "v2") == [(["b"], ["c"])]
    assert edges.chain("r", "p.py", "v9", "v2") is None  # no record reaches v9
    assert edges.chain("r", "q.py", "v0", "v1") is None  # records are per path
    assert edges.chain("other", "p.py", "v0", "v1") is None  # and per repository


def test_the_store_is_bounded_and_chains_are_not_followed_forever():
    edges = LineEdges(2_000)
    for i in range(100):
        edges.record("r", "p.py", f"v{i}", f"v{i + 1}", ([f"line {i}"], [f"line {i + 1}"]))
    assert edges._bytes <= 2_000
    assert edges.chain("r", "p.py", "v0", "v100") is None  # the oldest records are gone
    assert edges.chain("r", "p.py", "v99", "v100") is not None
    edges = LineEdges(1 << 20)
    for i in range(LineEdges.MAX_CHAIN + 1):
        edges.record("r", "p.py", f"v{i}", f"v{i + 1}", ([], []))
    assert edges.chain("r", "p.py", "v1", f"v{LineEdges.MAX_CHAIN + 1}") is not None
    assert edges.chain("r", "p.py", "v0", f"v{LineEdges.MAX_CHAIN + 1}") is None


class _Reader:
    git_dir = Path("/nowhere/repo.git")


def _builder(store: VersionStore, edges: LineEdges) -> ContextBuilder:
    """A builder whose facts use `store` and `edges` (no repository is read: facts come from bytes)."""
    return ContextBuilder(
        _Reader(),  # type: ignore[arg-type]
        ContextConfig(),
        FilterConfig(),
        estimate_tokens,
        versions=store,
        edges=edges,
    )


def _scan(path: str, text: str) -> BlobFacts:
    return ContextBuilder._scan_facts(path, text, estimate_tokens(text))


def test_context_facts_follow_recorded_changes_and_equal_a_full_scan():
    rng = random.Random(0)
    path, repo = "pkg/mod.py", str(_Reader.git_dir)
    edges = LineEdges(1 << 20)
    store = VersionStore(1 << 30)
    builder = _builder(store, edges)
    lines = [f"def f{i}(x):\n    return x + {i}" for i in range(40)]
    text = "\n".join(lines) + "\n"
    assert builder._compute_facts(path, "s0", text.encode()) == _scan(path, text)
    followed = 0
    for step in range(1, 30):
        new_lines = list(lines)
        for _ in range(rng.randint(1, 3)):
            new_lines[rng.randrange(len(new_lines))] = rng.choice(["import os", "pass", "y = f1(2)", ""])
        new_lines[step] = f"version = {step}"  # never the same text twice
        new = "\n".join(new_lines) + ("" if step % 7 == 0 else "\n")
        if step % 5 != 0:  # every fifth version was extracted elsewhere: a gap in the records
            edges.record(repo, path, f"s{step - 1}", f"s{step}", _delta(text, new))
        if step % 3 == 0:  # and some versions are never indexed: the next one follows two records
            lines, text = new_lines, new
            continue
        known = store.get((builder._scope, path))
        followed += bool(known and edges.chain(repo, path, known[0], f"s{step}"))
        # `_count_lines` moves the counts it is given in place: give it a copy of the stored version's.
        probe = (known[0], known[1].copy(), *known[2:]) if known else None
        counted, total, *_ = builder._count_lines(path, f"s{step}", new, probe)
        assert counted == Counter(new.split("\n")) and total == new.count("\n") + 1
        assert builder._compute_facts(path, f"s{step}", new.encode()) == _scan(path, new)
        lines, text = new_lines, new
    assert followed >= 10
    # A record that does not fit the text (never written by extraction) is caught and the text counted.
    edges.record(repo, path, f"s{step}", "bad", (["nothing like this"], ["x"]))
    other = text.replace("return x + 1\n", "return x - 1\n")
    assert builder._compute_facts(path, "bad", other.encode()) == _scan(path, other)


def test_counts_moved_part_of_the_way_are_not_derived_from():
    """Two records of which only the first fits: the stored version's counts, moved in place by the
    first, must be dropped, and every later version still equals a full scan."""
    path, repo = "pkg/mod.py", str(_Reader.git_dir)
    edges = LineEdges(1 << 20)
    builder = _builder(VersionStore(1 << 30), edges)
    v0 = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(20))
    v1 = v0.replace("return x + 3\n", "return helper_three(x)\n")
    v2 = v1.replace("return x + 5\n", "return other_five(x)\n")  # as many lines as the bad record claims
    v3 = v2.replace("return x + 7\n", "return seven\n")
    assert builder._compute_facts(path, "v0", v0.encode()) == _scan(path, v0)
    edges.record(repo, path, "v0", "v1", _delta(v0, v1))
    # One line out, one in, 8 characters longer: the length check passes, the removal cannot.
    edges.record(repo, path, "v1", "v2", (["no such line"], ["x" * 20]))
    edges.record(repo, path, "v2", "v3", _delta(v2, v3))
    assert builder._compute_facts(path, "v2", v2.encode()) == _scan(path, v2)
    assert builder._compute_facts(path, "v3", v3.encode()) == _scan(path, v3)
    assert builder._versions.get((builder._scope, path))[1] == Counter(v3.split("\n"))
