"""The git readers of the data pipeline: patches from the persistent `git diff-tree` are the bytes `git log
-p` gives, batch after batch; an abandoned batch never leaks into the next one; blobs rebuilt from a
patch are taken only when they hash to the blob's id."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from data_pipeline.extract import commits as commits_module
from data_pipeline.extract.commits import FileChange, PatchReader, parse_diff
from data_pipeline.extract.contents import _rebuild
from data_pipeline.extract.edges import EDGES
from data_pipeline.synthetic import HistoryBuilder, edge_case_history, random_fix
from swerl.edit_format import parse_patch
from swerl.git import GitError, git_argv, safe_env
from swerl.git.objects import ObjectReader, blob_id


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("git") / "repo"
    edge_case_history(path)
    return path / ".git"


def _git(git_dir: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(
        git_argv(git_dir, *args), input=stdin, capture_output=True, check=True, env=safe_env()
    ).stdout


def _pairs(git_dir: Path, shas: list[str]) -> list[tuple[str, str]]:
    """(first parent, commit) of each commit that has a parent."""
    found = []
    for sha in shas:
        parents = _git(git_dir, "rev-list", "--parents", "-n1", sha).decode().split()[1:]
        if parents:
            found.append((parents[0], sha))
    return found


def _git_diffs(git_dir: Path, pairs: list[tuple[str, str]]) -> list[tuple[str, str, list[tuple[str, bytes]]]]:
    """What `git diff` says for each pair, parsed the same way: one process per pair, no framing."""
    options = [option for option in commits_module._DIFF_OPTIONS if option != "--no-commit-id"]
    return [
        _summary(parse_diff(base, head, _git(git_dir, "diff", *options, base, head))) for base, head in pairs
    ]


def _summary(commit: commits_module.CommitPatch) -> tuple[str, str, list[tuple[str, bytes]]]:
    assert commit.error is None
    return commit.parent, commit.sha, [(change.path, change.patch) for change in commit.changes]


def test_patches_equal_git_diff_across_batches_and_calls(repo, monkeypatch):
    shas = _git(repo, "rev-list", "--reverse", "HEAD").decode().split()
    merges = _git(repo, "rev-list", "--merges", "HEAD").decode().split()
    pairs = _pairs(repo, shas)
    assert merges and len(pairs) == len(shas) - 1
    # Not only a commit against its parent: any two commits, older against newer and back.
    pairs += [(shas[1], shas[-1]), (shas[-1], shas[2])]
    monkeypatch.setattr(PatchReader, "_BATCH", 3)
    reader = PatchReader(repo)
    try:
        half = len(pairs) // 2
        got = [_summary(c) for c in reader.patches(pairs[:half])]
        got += [_summary(c) for c in reader.patches([])]
        got += [_summary(c) for c in reader.patches(pairs[half:])]
    finally:
        reader.close()
    assert got == _git_diffs(repo, pairs)


def test_a_batch_abandoned_midway_leaves_the_reader_in_step(repo):
    """A caller that stops taking a batch's commits midway must not leave that batch's answer in the pipe
    for the next call to read as its own."""
    pairs = _pairs(repo, _git(repo, "rev-list", "HEAD").decode().split())
    reader = PatchReader(repo)
    try:
        stream = reader.patches(pairs)
        next(stream)
        stream.close()
        assert [_summary(c) for c in reader.patches(pairs[:2])] == _git_diffs(repo, pairs[:2])
    finally:
        reader.close()


def test_a_pair_git_cannot_diff_costs_only_its_own_answer(repo):
    """git exits on an object it cannot read: the batch is asked again pair by pair, the bad pair comes
    back with an error and the others with their diffs, and the reader goes on serving."""
    pairs = _pairs(repo, _git(repo, "rev-list", "--max-count=4", "HEAD").decode().split())
    asked = [pairs[0], ("1" * 40, pairs[1][1]), pairs[1], pairs[2]]  # a base that is no object: git exits
    reader = PatchReader(repo)
    try:
        got = list(reader.patches(asked))
        assert [c.error is None for c in got] == [True, False, True, True]
        good = [c for c in got if c.error is None]
        assert [_summary(c) for c in good] == _git_diffs(repo, [asked[0], *asked[2:]])
        assert [_summary(c) for c in reader.patches(pairs[:1])] == _git_diffs(repo, pairs[:1])
    finally:
        reader.close()


def test_names_that_are_not_full_ids_give_nothing_and_corrupt_nothing(repo):
    """diff-tree would echo a line it cannot read as an id into the output: such pairs are never sent."""
    pairs = _pairs(repo, _git(repo, "rev-list", "--max-count=3", "HEAD").decode().split())
    reader = PatchReader(repo)
    try:
        asked = [(pairs[0][0][:12], pairs[0][1]), pairs[1], ("HEAD", pairs[2][1]), pairs[2]]
        got = [_summary(c) for c in reader.patches(asked)]
    finally:
        reader.close()
    assert got == _git_diffs(repo, pairs[1:])


def test_the_listing_hands_out_records_as_they_arrive():
    """The first shard can start while the listing goes on: a record is handed out once the pipe holds it,
    not once a megabyte (or the whole output) has arrived."""
    writer = (
        "import sys, time; out = sys.stdout.buffer; out.write(b'\\x1efirst\\x1esec'); out.flush(); "
        "time.sleep(3); out.write(b'ond')"
    )
    started = time.monotonic()
    records = commits_module._records([sys.executable, "-c", writer])
    assert next(records) == b"first"  # complete (the next separator came), while git is still busy
    assert time.monotonic() - started < 2
    assert list(records) == [b"second"]


def test_blob_id_is_git_hash_object_and_offer_checks_it(repo):
    data = b"print('hi')\n\xc3\xa9\n"
    sha = _git(repo, "hash-object", "--stdin", stdin=data).decode().strip()
    assert blob_id(data) == sha
    with ObjectReader(repo) as reader:
        assert not reader.offer(sha, data + b"x")
        assert reader.offer(sha, data)
        assert reader.blobs([sha]) == {sha: data}  # served from the cache: git never stored it


class _Offers:
    """An object reader that only checks offered contents."""

    git_dir = Path("/nowhere/offers.git")

    def offer(self, sha: str, data: bytes) -> bool:
        return blob_id(data) == sha


def _change(path: str, old: bytes, new: bytes, patch: str) -> FileChange:
    return FileChange(path, "M", "100644", "100644", blob_id(old), blob_id(new), patch.encode())


def test_rebuilt_blobs_are_taken_only_when_their_id_matches():
    old, new = b"a\nb\n", b"a\nc\n"
    patch = "diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    good = _change("f.py", old, new, patch)
    blobs = {good.old_sha: old}
    assert _rebuild(_Offers(), blobs, [good], parse_patch(patch)) == {"f.py": "a\nc\n"}  # type: ignore[arg-type]
    assert blobs[good.new_sha] == new
    # Its changed lines are recorded for the context stage, which counts the new version's lines from them.
    repo = str(_Offers.git_dir)
    assert EDGES.chain(repo, "f.py", good.old_sha, good.new_sha) == [(["b"], ["c"])]
    # A new blob id that the rebuilt text does not hash to (git's contents differ): left for git to read,
    # and no change recorded for it.
    wrong = _change("f.py", old, b"a\nc", patch)
    blobs = {wrong.old_sha: old}
    _rebuild(_Offers(), blobs, [wrong], parse_patch(patch))  # type: ignore[arg-type]
    assert wrong.new_sha not in blobs
    assert EDGES.chain(repo, "f.py", wrong.old_sha, wrong.new_sha) is None
    # A base that is not UTF-8 or a patch that does not apply: nothing rebuilt, git reads every blob.
    latin = _change("f.py", b"\xe9\n", new, patch)
    assert _rebuild(_Offers(), {latin.old_sha: b"\xe9\n"}, [latin], parse_patch(patch)) is None  # type: ignore[arg-type]
    other = _change("f.py", b"x\ny\n", new, patch)
    assert _rebuild(_Offers(), {other.old_sha: b"x\ny\n"}, [other], parse_patch(patch)) is None  # type: ignore[arg-type]


def test_matching_files_are_gits_files_of_the_kind_for_every_commit(tmp_path):
    """Lists kept per subtree must never leak from one commit or one predicate into another."""
    history = HistoryBuilder(seed=5, files=30)
    for _ in range(25):
        random_fix(history)
    nested = {"pkg/deep/er/mod.py": b"x = 1\n", "pkg/deep/notes.md": b"n\n"}
    history.plain_commit("Add a nested module", nested)
    history.plain_commit("Remove it again", {"pkg/deep/er/mod.py": None})
    history.write(tmp_path / "r")
    git_dir = tmp_path / "r" / ".git"
    commits = _git(git_dir, "rev-list", "--reverse", "HEAD").decode().split()
    kinds = {
        "py": lambda path: path.endswith(".py"),
        "md-or-lock": lambda path: path.endswith((".md", ".lock")),
    }
    with ObjectReader(git_dir, listing_cache_entries=64) as reader:  # small: entries are evicted too
        for commit in commits * 2:
            # git's own listing of the regular files, in its order (a tree's files before its subtrees'
            # is what the reader promises; ls-tree sorts by full path, so compare as sets and check the
            # order of each directory's own files).
            listed = _git(git_dir, "ls-tree", "-r", "-z", commit).split(b"\0")
            files = [
                (line.split(b"\t", 1)[1].decode(), line.split()[2].decode())
                for line in listed
                if line and line.split()[0] in (b"100644", b"100755")
            ]
            for name, keep in kinds.items():
                found = reader.matching_files(commit, name, keep)
                expected = [(path, sha) for path, sha in files if keep(path)]
                assert sorted(found) == sorted(expected) and len(found) == len(set(found))
                for folder in {path.rpartition("/")[0] for path, _ in found}:
                    own = [path for path, _ in found if path.rpartition("/")[0] == folder]
                    assert own == sorted(own)
            # The memo of each tree entry's verdict is bounded over every directory and kind together
            # (by the listing's limit plus the one tree being judged), however long the history.
            assert sum(map(len, reader._judged.values())) <= 64 + 40


def _tree_states() -> list[dict[str, tuple[str, bytes]]]:
    """Contents of directory `d/` commit after commit: (mode, content) per name, changed in every way a
    tree entry can change (content, mode, added anywhere, removed alone and in runs longer than the
    parser's look-ahead, a file that becomes a directory of the same name, a symlink)."""
    base = {f"m{i:02d}.py": ("100644", f"x = {i}\n".encode()) for i in range(12)}
    states = [dict(base)]

    def step(change):
        state = dict(states[-1])
        change(state)
        states.append(state)

    step(lambda s: s.update({"m05.py": ("100644", b"x = 'changed'\n")}))
    step(lambda s: s.update({"m05.py": ("100755", b"x = 'changed'\n")}))
    step(lambda s: s.update({"a.py": ("100644", b"first\n"), "z.py": ("100644", b"last\n")}))
    step(lambda s: s.update({"m06b.py": ("100644", b"between\n")}))
    step(lambda s: s.pop("m03.py"))
    step(lambda s: [s.pop(f"m{i:02d}.py") for i in range(6, 12)])  # six in a row
    step(lambda s: s.update({"m04.py": ("100644", b"again\n"), "m00.py": ("100644", b"and again\n")}))
    step(lambda s: s.update({"link": ("120000", b"m00.py")}))
    step(lambda s: (s.pop("a.py"), s.update({"a.py/inner.py": ("100644", b"now a directory\n")})))
    step(lambda s: s.clear() or s.update(base))
    return states


def test_tree_entries_read_after_each_other_are_gits(tmp_path):
    """Each tree read reuses the entries of the last tree read at its path where the bytes agree: in
    any order of reading, every tree must still be exactly what `git ls-tree` lists."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=safe_env())
    roots = []
    for state in _tree_states():
        _git(repo / ".git", "rm", "-rq", "--ignore-unmatch", "--cached", "d")
        index = []
        for name, (mode, content) in state.items():
            sha = _git(repo / ".git", "hash-object", "-w", "--stdin", stdin=content).decode().strip()
            index.append(f"{mode} {sha}\td/{name}\n")
        _git(repo / ".git", "update-index", "--add", "--index-info", stdin="".join(index).encode())
        roots.append(_git(repo / ".git", "write-tree").decode().strip())
    git_dir = repo / ".git"
    orders = [roots, roots[::-1], [roots[i] for i in (3, 9, 0, 10, 5, 1, 8, 2, 7, 4, 6)]]
    for order in orders:
        with ObjectReader(git_dir) as reader:
            for root in order:
                for path, spec in [("", root), ("d/", f"{root}:d")]:
                    tree = _git(git_dir, "rev-parse", spec).decode().strip()
                    listed = [
                        line.split(b"\t", 1)
                        for line in _git(git_dir, "ls-tree", "-z", tree).split(b"\0")
                        if line
                    ]
                    expected = [
                        (head.split()[0].decode(), name.decode(), head.split()[2].decode())
                        for head, name in listed
                    ]
                    assert reader._tree(tree, path) == expected
                    reader._trees.clear()  # read again next time: the reuse is what is tested


def test_a_malformed_tree_is_refused_even_after_a_good_one(tmp_path):
    history = HistoryBuilder(seed=2, files=5)
    random_fix(history)
    history.write(tmp_path / "r")
    git_dir = tmp_path / "r" / ".git"
    tree = _git(git_dir, "rev-parse", "HEAD^{tree}").decode().strip()
    with ObjectReader(git_dir) as reader:
        data = reader.read(tree)[1]
        good = reader._parse_tree(tree, data, "")
        assert len(good) > 3
        for broken in [data[:-1], data[:-25], data + b"1"]:  # a cut entry, trailing bytes
            with pytest.raises(GitError):
                reader._parse_tree(tree, broken, "")


def test_a_forked_process_does_not_keep_the_parent_s_git_alive(repo):
    """A worker forked while the driver reads (the `--local` listing reads merged commits as the pool
    starts) must not hold the parent's pipe to git open: the parent's close would wait for git forever."""
    reader = ObjectReader(repo)
    reader.commit_parents([_git(repo, "rev-parse", "HEAD").decode().strip()])
    pid = os.fork()
    if pid == 0:  # the child: its copy of the reader is disowned, never used
        try:
            time.sleep(1.5)
        finally:
            os._exit(0 if not reader.alive() else 1)
    try:
        started = time.monotonic()
        reader.close()
        assert time.monotonic() - started < 1.0
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_changed_files_take_one_commit_s_listing_to_any_other_s(tmp_path):
    """The changes between two commits (`changed_files`), applied to the first one's listing of a kind,
    give the second one's, for every ordered pair of commits (forwards, backwards, jumps), with files
    that become directories, symlinks and mode changes; only files that differ are reported."""
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=safe_env())
    git_dir = repo / ".git"
    commits = []
    for state in _tree_states():
        _git(git_dir, "rm", "-rq", "--ignore-unmatch", "--cached", "d", "e")
        index = []
        for name, (mode, content) in state.items():
            sha = _git(git_dir, "hash-object", "-w", "--stdin", stdin=content).decode().strip()
            index.append(f"{mode} {sha}\td/{name}\n")
            if name < "m05":  # a second directory that changes with the first, partly
                index.append(f"{mode} {sha}\te/x/{name}\n")
        _git(git_dir, "update-index", "--add", "--index-info", stdin="".join(index).encode())
        tree = _git(git_dir, "write-tree").decode().strip()
        identity = {f"GIT_{who}_{what}": "t" for who in ("AUTHOR", "COMMITTER") for what in ("NAME", "EMAIL")}
        argv = git_argv(git_dir, "commit-tree", tree, "-m", "s")
        made = subprocess.run(argv, capture_output=True, check=True, env={**safe_env(), **identity})
        commits.append(made.stdout.decode().strip())
    kinds = {"py": lambda path: path.endswith(".py"), "all": lambda path: True}
    with ObjectReader(git_dir, listing_cache_entries=16) as reader:
        for name, keep in kinds.items():
            listings = {c: dict(reader.matching_files(c, name, keep)) for c in commits}
            listings[None] = {}
            for old in [None, *commits]:
                for new in commits:
                    changes = reader.changed_files(old, new, name, keep)
                    files = dict(listings[old])
                    for path, before, after in changes:
                        assert files.get(path) == before and before != after
                        if after is None:
                            del files[path]
                        else:
                            files[path] = after
                    assert files == listings[new], (name, old, new)
                    assert len({path for path, _, _ in changes}) == len(changes)


def test_a_listing_closed_early_kills_git_instead_of_waiting_for_it() -> None:
    """An interrupt closes the listing mid-stream; waiting for a git that computes for seconds more (as
    `git log --reverse` does before its first byte) let a second interrupt print a traceback."""
    from data_pipeline.extract.commits import _records

    records = _records(["sh", "-c", "printf 'a\\036b\\036'; exec sleep 30"])
    assert next(records) == b"a"
    start = time.monotonic()
    records.close()
    assert time.monotonic() - start < 5
