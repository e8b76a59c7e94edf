"""Stage 3, extract: for each PR, the base and merged contents of every modified
file and the patch between them.

The merged commit is diffed against the PR's base: its first parent for a merge and for a squash
commit alike, the commit before the first rebased one for a rebase merge. Contents come from blobs,
never a checkout. Each file's role (see `filters.file_role`) decides where it goes: source files
become the oracle, tests become `test_patch`, the rest is listed as excluded. The oracle patch is git's
own patch for the source files, and it is checked here to rebuild the oracle contents exactly from the
base contents, so every row that leaves this stage satisfies the invariant
`apply_patch_to_contents(base, oracle_patch) == oracle_new_content`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from unidiff import PatchSet

from data_pipeline.config import FilterConfig
from data_pipeline.extract.commits import TOO_LARGE, CommitPatch, FileChange, PatchReader
from data_pipeline.extract.edges import EDGES, segment_delta
from data_pipeline.filter.rules import file_role, looks_generated
from data_pipeline.schema import Candidate
from swerl.edit_format import PatchApplyError, apply_patch_to_contents, parse_patch
from swerl.edit_format.patch import apply_parsed_patch
from swerl.git import GitError
from swerl.git.objects import SUBMODULE_MODE, SYMLINK_MODE, ObjectReader, parse_commit_object


@dataclass
class Extracted:
    """A PR's change, split by file role, with the oracle checked against the base contents."""

    base_commit: str
    merge_commit: str
    base: dict[str, str] = field(default_factory=dict)
    new: dict[str, str] = field(default_factory=dict)
    oracle_patch: str = ""
    test_patch: str = ""
    changed_test_files: list[str] = field(default_factory=list)
    excluded_files: list[str] = field(default_factory=list)
    lines_changed: int = 0


class Dropped(Exception):
    """Raised inside extraction to drop a PR with a reason from `filters.REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _decode(data: bytes, path: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Dropped("non_utf8_file", path) from None


def _read(blobs: dict[str, bytes], change: FileChange, side: str, config: FilterConfig) -> bytes:
    sha = change.old_sha if side == "old" else change.new_sha
    data = blobs[sha]
    if len(data) > config.max_file_bytes:
        raise Dropped("file_too_large", f"{change.path} ({len(data)} bytes)")
    return data


def _suffix(path: str) -> str:
    """A path's suffix without the dot, lower case (`pkg/mod.PY` -> `py`; none: empty)."""
    name = path.rpartition("/")[2]
    return name.rpartition(".")[2].lower() if "." in name.lstrip(".") else ""


def _split_roles(commit: CommitPatch) -> tuple[list[FileChange], list[FileChange], list[str]]:
    sources, tests, excluded = [], [], []
    for change in commit.changes:
        role = file_role(change.path)
        if role == "test":
            tests.append(change)
        elif role == "source":
            sources.append(change)
        else:
            excluded.append(change.path)
    return sources, tests, excluded


def _rebuild(
    reader: ObjectReader, blobs: dict[str, bytes], kept: list[FileChange], parsed: PatchSet
) -> dict[str, str | None] | None:
    """The kept files' merged contents rebuilt from their base contents (`blobs`) and the parsed patch,
    or None when the patch does not apply to them as text. Each rebuilt file whose git blob id is its
    `new_sha` is added to `blobs` (and to the reader's cache, where the next PR to touch the file finds
    its base): those are byte for byte what git would return, so git is asked only for the others (all
    of them when a base is not UTF-8 or the patch does not apply). The checks that follow then run on
    exactly the bytes they always did, at about half the reads. The lines each such file's patch
    removed and added are recorded for the context stage (`edges.py`)."""
    base: dict[str, str] = {}
    try:
        for change in kept:
            if change.status != "A":
                base[change.path] = blobs[change.old_sha].decode("utf-8")
        rebuilt = apply_parsed_patch(base, parsed)
    except (UnicodeDecodeError, PatchApplyError):
        return None
    patched_files = {patched.path: patched for patched in parsed}
    repo = str(reader.git_dir)
    for change in kept:
        text = rebuilt.get(change.path)
        if text is not None:
            data = text.encode("utf-8")
            if reader.offer(change.new_sha, data):
                blobs[change.new_sha] = data
                patched = patched_files.get(change.path)
                if change.path in base and patched is not None:
                    delta = segment_delta(patched, base[change.path], text)
                    EDGES.record(repo, change.path, change.old_sha, change.new_sha, delta)
    return rebuilt


def _extract_commit(reader: ObjectReader, commit: CommitPatch, config: FilterConfig) -> Extracted:
    sources, tests, excluded = _split_roles(commit)
    out = Extracted(base_commit=commit.parent, merge_commit=commit.sha)
    out.changed_test_files = [change.path for change in tests]
    out.test_patch = b"".join(change.patch for change in tests).decode("utf-8", "replace")
    kept: list[FileChange] = []
    for change in sources:
        if change.quoted:
            raise Dropped("unsupported_path", change.path)
        if SYMLINK_MODE in (change.old_mode, change.new_mode) or SUBMODULE_MODE in (
            change.old_mode,
            change.new_mode,
        ):
            raise Dropped("symlink_or_submodule", change.path)
        if change.status == "D":
            raise Dropped("deletes_file", change.path)
        if change.binary:
            raise Dropped("binary_file", change.path)
        if change.old_sha == change.new_sha:  # a mode change only: nothing to write
            excluded.append(change.path)
            continue
        kept.append(change)
    if not kept:
        generated = any(file_role(path) in {"lock", "vendored", "generated"} for path in excluded)
        raise Dropped("only_generated_vendored_or_lock" if generated else "only_tests_or_docs")
    if config.languages and not any(_suffix(change.path) in config.languages for change in kept):
        raise Dropped("not_in_languages", ", ".join(sorted({_suffix(change.path) for change in kept})))
    if len(kept) > config.max_files:
        raise Dropped("too_many_files", str(len(kept)))
    patch_bytes = b"".join(change.patch for change in kept)
    patch_text = _decode(patch_bytes, kept[0].path)
    parsed = parse_patch(patch_text)
    # unidiff's own `added` and `removed` walk every line twice through properties; one pass here.
    out.lines_changed = sum(1 for file in parsed for hunk in file for line in hunk if line.line_type in "+-")
    if out.lines_changed > config.max_lines_changed:
        raise Dropped("too_many_lines", str(out.lines_changed))
    sections: list[bytes] = []
    blobs = reader.blobs(c.old_sha for c in kept if c.status != "A")
    rebuilt_all = _rebuild(reader, blobs, kept, parsed)
    blobs.update(reader.blobs(c.new_sha for c in kept if c.new_sha not in blobs))
    for change in kept:
        new_data = _read(blobs, change, "new", config)
        old_data = b"" if change.status == "A" else _read(blobs, change, "old", config)
        if looks_generated(new_data) or looks_generated(old_data):
            excluded.append(change.path)
            continue
        if change.status != "A":
            out.base[change.path] = _decode(old_data, change.path)
        out.new[change.path] = _decode(new_data, change.path)
        sections.append(change.patch)
    if not out.new:
        raise Dropped("only_generated_vendored_or_lock")
    out.oracle_patch = b"".join(sections).decode("utf-8")
    out.excluded_files = sorted(excluded)
    try:
        if rebuilt_all is not None:
            # The same patch applied to the same base contents above; each file's sections apply to
            # that file alone, so its files less the generated ones left out are the oracle's result.
            rebuilt = {path: rebuilt_all.get(path) for path in out.new}
        elif len(sections) == len(kept):  # the oracle is the text parsed above: no reparse
            rebuilt = apply_parsed_patch(out.base, parsed)
        else:
            rebuilt = apply_patch_to_contents(out.base, out.oracle_patch)
    except PatchApplyError as err:
        raise Dropped("patch_mismatch", str(err)[:200]) from None
    if rebuilt != out.new:
        raise Dropped("patch_mismatch", "patch does not rebuild the merged contents")
    return out


def _committer(data: bytes) -> bytes:
    """The committer line of a raw commit object (identity and time)."""
    header = data.partition(b"\n\n")[0]
    return next((line for line in header.split(b"\n") if line.startswith(b"committer ")), b"")


def pr_base(reader: ObjectReader, head: str, parents: tuple[str, ...], commits: int) -> str:
    """The commit a PR's change is taken against, given its merge commit `head` and the PR's number of
    commits (0: unknown).

    A merge commit's and a squash commit's first parent is the base branch as the PR found it. A rebase
    merge of N commits puts N new commits on the base branch, `head` the last: its first parent already
    holds the PR's first N-1 commits. GitHub writes those N commits in one operation, with one committer
    and one commit time; a squash commit's parent is an older commit of the branch, written at another
    time. So when the PR had N > 1 commits and `head` and its N-1 first-parent ancestors share their
    committer line, the base is the commit before them; otherwise it is the first parent."""
    if commits <= 1 or len(parents) != 1:
        return parents[0]
    chain = [head]
    objects = reader.commit_objects([head])
    line = _committer(objects.get(head, b""))
    for _ in range(commits - 1):
        current = objects.get(chain[-1])
        if current is None:
            return parents[0]
        up = parse_commit_object(current)[0]
        if len(up) != 1:
            return parents[0]
        objects = reader.commit_objects([up[0]])
        if up[0] not in objects or _committer(objects[up[0]]) != line:
            return parents[0]
        chain.append(up[0])
    below = parse_commit_object(objects[chain[-1]])[0]
    return below[0] if below else parents[0]


def extract(
    reader: ObjectReader, patches: PatchReader, candidates: list[Candidate], config: FilterConfig
) -> Iterator[tuple[Candidate, Extracted | Dropped]]:
    """Each candidate with its extraction or the reason it was dropped, in the candidates' order.

    A PR's change is its merge commit diffed against its base (`pr_base`: the first parent, or the
    commit before a rebase merge's commits). The repository's open `git diff-tree` serves all its
    candidates; a commit that is not in the clone (force-pushed away, deleted, never fetched) is dropped
    as `commit_missing` before git sees it, and one git cannot diff as `unreadable_commit` (or
    `patch_too_large`), without stopping the others.
    """
    parents = reader.commit_parents(c.merge_commit for c in candidates)
    bases: dict[str, tuple[str, str] | Dropped] = {}
    for candidate in candidates:
        head = candidate.merge_commit
        if head not in parents:
            bases[candidate.instance_id] = Dropped("commit_missing", head)
        elif not parents[head]:
            bases[candidate.instance_id] = Dropped("commit_missing", "root commit has no base")
        else:
            bases[candidate.instance_id] = (pr_base(reader, head, parents[head], candidate.commits), head)
    pairs = [pair for pair in bases.values() if isinstance(pair, tuple)]
    results: dict[tuple[str, str], Extracted | Dropped] = {}
    for commit in patches.patches(list(dict.fromkeys(pairs))):
        pair = (commit.parent, commit.sha)
        if commit.error is not None:
            reason = TOO_LARGE if commit.error == TOO_LARGE else "unreadable_commit"
            results[pair] = Dropped(reason, commit.error)
            continue
        try:
            results[pair] = _extract_commit(reader, commit, config)
        except Dropped as dropped:
            results[pair] = dropped
        except GitError as err:
            results[pair] = Dropped("unreadable_commit", str(err)[:200])
    for candidate in candidates:
        found = bases[candidate.instance_id]
        yield candidate, found if isinstance(found, Dropped) else results[found]
