"""Facts of a new file version derived from the previous version's (term counts, length, imports, token
estimate) equal the facts of a full scan, for any edit, including lines that repeat, imports, non-ASCII
text and whitespace runs."""

from __future__ import annotations

import inspect
import random
import subprocess
from pathlib import Path

import pytest

from data_pipeline.config import ContextConfig, FilterConfig
from data_pipeline.context import builder as context_module
from data_pipeline.context.builder import ContextBuilder, VersionStore
from data_pipeline.context.tokens import estimate_tokens


class _Reader:
    git_dir = Path("/nowhere/repo.git")


def _builder(store: VersionStore) -> ContextBuilder:
    return ContextBuilder(_Reader(), ContextConfig(), FilterConfig(), estimate_tokens, versions=store)  # type: ignore[arg-type]


def _scan(path: str, text: str) -> context_module.BlobFacts:
    return ContextBuilder._scan_facts(path, text, estimate_tokens(text))


_EXTRA_LINES = [
    "import os, sys",
    "from .sibling import helper as h",
    "    from ..pkg import (a, b)",
    "x = parseDate(some_value)  # déjà vu",
    "\t\t  spaced\t out   ",
    "",
    "return None",
    "    def camelCaseName(self, HTTPServer): pass",
]


def _edit(lines: list[str], rng: random.Random) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        at = rng.randrange(len(out) + 1)
        if op < 0.4 or not out:
            out.insert(at, rng.choice(_EXTRA_LINES + out[:50]))
        elif op < 0.7:
            del out[min(at, len(out) - 1)]
        else:
            out[min(at, len(out) - 1)] = rng.choice(_EXTRA_LINES)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_derived_facts_equal_a_full_scan(seed):
    rng = random.Random(seed)
    text = inspect.getsource(context_module)
    path = "pkg/sub/module.py"
    store = VersionStore(1 << 30)
    builder = _builder(store)
    lines = text.split("\n")
    derived = 0
    for step in range(25):
        lines = _edit(lines, rng)
        version = "\n".join(lines)
        known = store.get((builder._scope, path))
        facts = builder._compute_facts(path, f"v{step}", version.encode())
        expected = _scan(path, version)
        assert facts == expected
        assert all(n > 0 for n in facts.terms.values())
        derived += known is not None
    assert derived == 24


def test_a_rewritten_file_is_scanned_and_the_store_is_bounded():
    store = VersionStore(100)
    builder = _builder(store)
    for i in range(5):
        text = f"import mod{i}\nvalue_{i} = {i}\n" * 3
        assert builder._compute_facts(f"f{i}.py", "sha", text.encode()) == _scan(f"f{i}.py", text)
    other = "totally = different\n"
    assert builder._compute_facts("f4.py", "sha", other.encode()) == _scan("f4.py", other)
    assert sum(length for _, _, _, length, _ in store._items.values()) <= 100
    assert [path for _, path in store._items][-1] == "f4.py"  # the most recent versions are kept


def _ranked_one_by_one(builder, base_commit, problem, modified, new_paths):
    """What `_ranked_tiers` ranks (both parts, in order), the plain way: every pool file's facts, BM25
    over all of them, each file's tier looked at in turn (the ranking before the pool index)."""
    from data_pipeline.context.builder import _imports, _split
    from data_pipeline.context.imports import ModuleIndex, module_names
    from swerl.retrieval import bm25

    shas: dict[str, str] = {}
    pool = builder._pool(base_commit, {_split(p)[1] for p in [*modified, *new_paths]}, modified, shas)
    found = builder._facts_for(list(pool.items()))
    facts = {path: found[(path, sha)] for path, sha in pool.items() if found[(path, sha)] is not None}
    index = ModuleIndex([*facts, *modified, *new_paths])
    targets = set(modified) | set(new_paths)
    imports = set().union(*(index.resolve(_imports(p, t)) for p, t in modified.items() if p.endswith(".py")))
    names = {n for p in targets for n in module_names(p) if p in index.resolve([n])}
    imported_by = {p for p, f in facts.items() if f.imports & names}
    dirs = {_split(p)[0] for p in targets}
    docs = [(f.terms, f.length) for f in facts.values()]
    scores = dict(zip(facts, bm25.bm25_scores(problem, docs), strict=True))
    ranked = []
    for path, f in facts.items():
        if path in imports or path in imported_by:
            tier, reason = 0, "imports" if path in imports else "imported_by"
        elif _split(path)[0] in dirs:
            tier, reason = 1, "same_package"
        elif scores[path] > 0:
            tier, reason = 2, "bm25"
        else:
            continue
        ranked.append((tier, -scores[path], path, reason, f.tokens))
    return [(path, pool[path], reason, tokens) for _, _, path, reason, tokens in sorted(ranked)]


def _ranked(builder, base_commit, problem, modified, new_paths):
    """Every file `_ranked_tiers` ranks, as (path, blob sha, reason, tokens), most relevant first."""
    head, far, pool, tokens = builder._ranked_tiers(base_commit, problem, modified, new_paths)
    ordered = [path for part in context_module._best_first(far, first=2) for path in part]
    return head + [(path, pool[path], "bm25", tokens[path]) for path in ordered]


@pytest.mark.parametrize("cap", [5_000, 37])
def test_the_pool_index_ranks_as_every_file_one_by_one(tmp_path, monkeypatch, cap):
    """The context index follows PR after PR (and jumps back and forth, as a worker between blocks
    does): its ranking equals ranking the whole pool from scratch, files added, removed and unreadable
    included; with a pool cap below the repository's files too (the pool's edge moves), and for PRs
    that change files of two suffixes (two pool indexes ranked as one)."""
    from data_pipeline.synthetic import HistoryBuilder, random_fix
    from swerl.git.objects import ObjectReader

    monkeypatch.setattr(context_module, "_POOL_INDEXES", type(context_module._POOL_INDEXES)())
    history = HistoryBuilder(seed=11, files=120)  # copies in subpackages past the stdlib's ~80 modules
    prs = [random_fix(history) for _ in range(30)]
    history.plain_commit("Vendor a blob", {"pkg/sub1/blob.py": b"\x00\x01binary"})
    stubs = {f"pkg/stub{i}.pyi": f"def parse_{i}(value: str) -> int: ...\n".encode() for i in range(6)}
    history.plain_commit("Add stubs", stubs)
    prs += [random_fix(history) for _ in range(10)]
    history.plain_commit("Drop a module", {next(iter(history.source_paths())): None})
    prs += [random_fix(history) for _ in range(10)]
    history.write(tmp_path / "repo")
    git_dir = tmp_path / "repo" / ".git"
    order = prs + prs[::-1][:15] + prs[5:12]
    with ObjectReader(git_dir) as reader:
        for at, pr in enumerate(order):
            base = reader.read(pr.sha)[1].split(b"\nparent ")[1][:40].decode()
            modified = {p: b.decode() for p, b in pr.before.items() if b is not None}
            new_paths = [p for p in pr.changes if p not in modified] + ["pkg/new_stub.pyi"] * (at % 3 == 0)
            config = ContextConfig(max_candidate_files=cap)
            builder = ContextBuilder(reader, config, FilterConfig(), estimate_tokens)
            expected = _ranked_one_by_one(builder, base, pr.body, modified, new_paths)
            assert _ranked(builder, base, pr.body, modified, new_paths) == expected, pr.title


@pytest.mark.parametrize("seed", range(3))
def test_a_pool_followed_by_tree_diffs_is_the_listed_pool(tmp_path, seed):
    """`PoolIndex.follow` takes each base commit's pool from the last one's by the changes between the
    two: in any order of commits, with any cap and any modified files (before, at and past the pool's
    edge), it holds what a full listing cut at the cap gives (`_pool`): the pool and the modified files
    met before the cap."""
    from data_pipeline.context.builder import PoolIndex
    from data_pipeline.synthetic import HistoryBuilder, random_fix
    from swerl.git import GitError
    from swerl.git.objects import ObjectReader

    rng = random.Random(seed)
    history = HistoryBuilder(seed=seed, files=100)
    for step in range(40):
        random_fix(history)
        if step % 9 == 4:  # files added and removed anywhere in tree order move the edge
            paths = sorted(history.source_paths())
            history.plain_commit("Reshape", {rng.choice(paths): None, f"pkg/new{step}/m.py": b"x = 1\n"})
    history.write(tmp_path / "repo")
    git_dir = tmp_path / "repo" / ".git"
    commits = (
        subprocess.run(
            ["git", f"--git-dir={git_dir}", "rev-list", "--first-parent", "HEAD"],
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split()
    )
    order = commits[::-1] + commits[:20] + rng.sample(commits, 25)
    with ObjectReader(git_dir) as reader:
        index = PoolIndex()
        for commit in order:
            cap = rng.choice([5_000, 60, 31, 1])
            files = [path for path, _ in reader.matching_files(commit, "all", bool) if path.endswith(".py")]
            modified = dict.fromkeys([*rng.sample(files, rng.randint(0, 4)), "pkg/not_there.py"], "")
            builder = ContextBuilder(
                reader, ContextConfig(max_candidate_files=cap), FilterConfig(), estimate_tokens
            )
            shas: dict[str, str] = {}
            expected = builder._pool(commit, {".py"}, modified, shas)
            pool, left_out = index.follow(
                reader, commit, frozenset({".py"}), cap, modified, builder._facts_for
            )
            assert dict(pool) == expected and left_out == shas
            assert len(pool) == len(expected) and all(path in pool for path in expected)
            assert index.shas == {**expected, **shas}
            if commit == order[len(commits) + 3]:  # a failed read halfway leaves nothing half followed

                def failing(files):
                    raise GitError("missing object")

                with pytest.raises(GitError):
                    index.follow(reader, order[0], frozenset({".py"}), 5_000, {}, failing)


def test_a_run_with_another_token_counter_never_reuses_the_pool_index(tmp_path):
    """Facts carry token counts: a second run in the same process (another `--tokenizer`) must rank
    with its own counts, not the ones an earlier run's pool index holds."""
    from data_pipeline.synthetic import HistoryBuilder, random_fix
    from swerl.git.objects import ObjectReader

    history = HistoryBuilder(seed=3, files=20)
    pr = [random_fix(history) for _ in range(3)][-1]
    history.write(tmp_path / "repo")
    with ObjectReader(tmp_path / "repo" / ".git") as reader:
        base = reader.read(pr.sha)[1].split(b"\nparent ")[1][:40].decode()
        modified = {p: b.decode() for p, b in pr.before.items() if b is not None}
        texts = {path: reader.blob(sha).decode() for path, sha in reader.matching_files(base, "all", bool)}
        for count in (estimate_tokens, len):
            builder = ContextBuilder(reader, ContextConfig(), FilterConfig(), count)
            extras = _ranked(builder, base, "misbehaves on empty input", modified, [])
            assert extras and all(tokens == count(texts[path]) + 8 for path, _, _, tokens in extras)


def test_files_that_fit_are_taken_in_order_as_a_plain_loop_takes_them():
    """`_fitting` (the BM25-only tier's choice) equals the loop `build` runs over the other tiers:
    in order, each file that still fits, until the slots are used."""
    import numpy as np

    rng = random.Random(4)
    for _ in range(500):
        sizes = [rng.choice([0, 1, 5, 50, 400, 2_000, 9_000]) for _ in range(rng.randint(0, 60))]
        room, slots = rng.randint(0, 12_000), rng.randint(0, 10)
        expected, left = [], room
        for at, size in enumerate(sizes):
            if len(expected) >= slots:
                break
            if size <= left:
                expected.append(at)
                left -= size
        assert context_module._fitting(np.array(sizes, dtype=np.int64), room, slots) == expected


@pytest.mark.parametrize("seed", range(4))
def test_a_module_index_kept_up_to_date_resolves_as_one_built_afresh(seed):
    """The pool index adds and removes files one at a time; names must resolve as an index built over
    the pool as it now is, plus the PR's own paths (`also`), including ambiguous short names."""
    from data_pipeline.context.imports import ModuleIndex, module_names

    rng = random.Random(seed)
    universe = [
        f"{top}/{sub}/{name}.py"
        for top in ("pkg", "src/pkg", "tests")
        for sub in ("a", "b", "utils")
        for name in ("__init__", "utils", "core", "io")
    ] + ["setup.py", "utils.py", "README.md"]
    kept = ModuleIndex()
    held: set[str] = set()
    names = sorted({name for path in universe for name in module_names(path)})
    for _ in range(60):
        path = rng.choice(universe)
        if path in held:
            kept.remove(path)
            held.discard(path)
        else:
            kept.add(path)
            held.add(path)
        also = rng.sample(universe, 2)
        fresh = ModuleIndex([*held, *also])
        for name in rng.sample(names, 12):
            assert kept.resolve([name], also) == fresh.resolve([name])
