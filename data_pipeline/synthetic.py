"""Real git repositories with a GitHub-like history of merged PRs, for tests and `bench/mining.py`.

Nothing can be fetched from GitHub in tests or benchmarks, so this writes histories that have what
mining must cope with: squash merges (`Title (#12)`), merge commits of feature branches (`Merge pull
request #12 from ...`), renames, binary and non-UTF-8 files, symlinks, lock files, test-only and
docs-only PRs, bot authors, re-landed reverts, CRLF files, and commits that are not PRs. The repository is
written with `git fast-import` (thousands of commits in seconds), over real standard-library source
mutated by `swerl.synth_repo.mutate_lines`, so diffs have the shape of real fixes. The writer is the
core's (`swerl.synth_repo.FastImport`); this module plans what the history holds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from swerl.synth_repo import FastImport, mutate_lines, stdlib_sources

_EPOCH = 1_700_000_000


@dataclass
class PlannedPR:
    """A PR the history contains and what the pipeline should do with it (None: make a row)."""

    number: int
    title: str
    body: str
    changes: dict[str, bytes | None]
    style: str = "squash"
    author: str = "Dev Eloper"
    expect: str | None = None
    sha: str = ""
    symlinks: dict[str, str] = field(default_factory=dict)
    before: dict[str, bytes | None] = field(default_factory=dict)


def _identity(author: str) -> str:
    """`Name <email>` of a PR's author: a bot's noreply address for a bot, as GitHub writes it."""
    email = (
        "49699333+dependabot[bot]@users.noreply.github.com" if "[bot]" in author else "dev@example.invalid"
    )
    return f"{author} <{email}>"


class HistoryBuilder:
    """Plans and writes a history; `prs` lists what each PR should become."""

    def __init__(self, seed: int = 0, files: int = 12) -> None:
        self.rng = random.Random(seed)
        self.files = {p: t.encode() for p, t in stdlib_sources(files, self.rng, 80, 600).items()}
        # The standard library has about 80 modules of that size: a larger repository repeats them in
        # subpackages (`pkg/sub1/...`), as vendored or forked copies would, so its pools of context
        # files grow as a large repository's do.
        originals = list(self.files.items())
        for i in range(files - len(originals)):
            path, text = originals[i % len(originals)]
            self.files[path.replace("pkg/", f"pkg/sub{i // len(originals) + 1}/", 1)] = text
        self.writer = FastImport(start=_EPOCH, step=60)
        self.main_mark: int | None = None
        self.prs: list[PlannedPR] = []
        self.next_number = 1
        self._main_shas: list[tuple[int, PlannedPR | None]] = []
        initial = dict(self.files)
        initial["README.md"] = b"# demo\n"
        initial["tests/test_basic.py"] = b"def test_ok():\n    assert True\n"
        initial["poetry.lock"] = b"# lock\n"
        self.files.update(initial)
        self._main("Initial import", "Dev Eloper", initial, None)

    def _main(
        self,
        message: str,
        author: str,
        changes: dict[str, bytes | None],
        pr: PlannedPR | None,
        symlinks: dict[str, str] | None = None,
    ) -> None:
        self.main_mark = self.writer.commit(
            message, changes, parent=self.main_mark, author=_identity(author), symlinks=symlinks
        )
        self._main_shas.append((self.main_mark, pr))

    def source_paths(self) -> list[str]:
        return sorted(p for p in self.files if p.startswith("pkg/") and p.endswith(".py"))

    def mutated(self, path: str, edits: int = 2) -> bytes:
        text = self.files[path].decode("utf-8")
        lines = mutate_lines(text.splitlines(keepends=True), self.rng, edits)
        return "".join(lines).encode()

    def pr(
        self,
        changes: dict[str, bytes | None],
        *,
        title: str = "",
        body: str = "",
        style: str = "squash",
        author: str = "Dev Eloper",
        expect: str | None = None,
        number: int | None = None,
        symlinks: dict[str, str] | None = None,
        parts: int = 2,
    ) -> PlannedPR:
        """Add a PR (squash, or a merge of a `parts`-commit branch) that changes `changes`."""
        if number is None:
            number = self.next_number
        self.next_number = max(self.next_number, number + 1)
        if not title and style == "squash":
            title = f"Fix handling of edge case {number}"
        pr = PlannedPR(
            number, title, body, dict(changes), style, author, expect, symlinks=dict(symlinks or {})
        )
        pr.before = {path: self.files.get(path) for path in changes}
        if style == "squash":
            message = f"{title} (#{number})\n\n{body}".strip()
            self._main(message, author, changes, pr, symlinks)
        else:
            items = list(changes.items())
            split = max(1, len(items) // parts) if len(items) > 1 else 1
            tip = self.main_mark
            for i in range(0, len(items), split):
                part = f"{title} (part {i // split + 1})"
                tip = self.writer.commit(
                    part,
                    dict(items[i : i + split]),
                    ref=f"refs/heads/pr-{number}",
                    parent=tip,
                    author=_identity(author),
                )
            message = f"Merge pull request #{number} from dev/branch-{number}\n\n{title}\n\n{body}".strip()
            # fast-import does not merge trees: the merge commit states the merged result itself.
            self.main_mark = self.writer.commit(
                message,
                changes,
                parent=self.main_mark,
                merge=tip,
                author=_identity(author),
                symlinks=symlinks,
            )
            self._main_shas.append((self.main_mark, pr))
        for path, data in changes.items():
            if data is None:
                self.files.pop(path, None)
            else:
                self.files[path] = data
        self.prs.append(pr)
        return pr

    def plain_commit(self, message: str, changes: dict[str, bytes | None]) -> None:
        """A direct push that references no PR (not a candidate)."""
        self._main(message, "Dev Eloper", changes, None)
        self.files.update({p: d for p, d in changes.items() if d is not None})

    def write(self, repo: Path) -> list[PlannedPR]:
        shas = self.writer.write(repo)
        for sha, (_, pr) in zip(shas, self._main_shas, strict=True):
            if pr is not None:
                pr.sha = sha
        return self.prs


def random_fix(builder: HistoryBuilder, *, style: str | None = None) -> PlannedPR:
    """An ordinary fix of one or two source files, its text naming the code it touches."""
    paths = builder.rng.sample(builder.source_paths(), builder.rng.choice([1, 1, 2]))
    changes = {p: builder.mutated(p, builder.rng.randint(1, 3)) for p in paths}
    changes = {p: d for p, d in changes.items() if d != builder.files[p]} or {
        paths[0]: builder.files[paths[0]] + b"\n# touched\n"
    }
    number = builder.next_number
    names = ", ".join(Path(p).stem for p in changes)
    body = f"The {names} module misbehaves on empty input.\n\nFixes #{number + 10_000}"
    return builder.pr(
        changes,
        title=f"Fix {names} edge case",
        body=body,
        style=style or builder.rng.choice(["squash", "merge"]),
    )


def edge_case_history(repo: Path, seed: int = 0) -> list[PlannedPR]:
    """A small history that holds one PR of every kind the pipeline must handle (see `PlannedPR.expect`)."""
    b = HistoryBuilder(seed=seed)
    src = b.source_paths()
    for _ in range(3):
        random_fix(b)
    b.plain_commit("Bump version", {"pkg/_version.py": b"__version__ = '1.0'\n"})
    b.pr(
        {"tests/test_basic.py": b"def test_ok():\n    assert 1\n"},
        title="Improve tests",
        expect="only_tests_or_docs",
    )
    b.pr({"README.md": b"# demo\n\nMore docs.\n"}, title="Docs tweak", expect="only_tests_or_docs")
    b.pr({src[0]: b.mutated(src[0])}, title="Bump dependency", author="dependabot[bot]", expect="bot_author")
    b.pr({"pkg/icon.bin": bytes(range(256)) * 4}, title="Add icon for the viewer", expect="binary_file")
    b.pr(
        {"pkg/legacy.py": "# caf\xe9 encoding\nx = 1\n".encode("latin-1")},
        title="Add legacy latin-1 module",
        expect="non_utf8_file",
    )
    renamed = src[1]
    b.pr(
        {renamed: None, renamed.replace(".py", "_new.py"): b.files[renamed]},
        title="Rename module",
        expect="deletes_file",
    )
    b.pr({"poetry.lock": b"# lock v2\n"}, title="Update lock file", expect="only_generated_vendored_or_lock")
    b.pr(
        {src[2]: b.mutated(src[2]), "tests/test_basic.py": b"def test_ok():\n    assert 2\n"},
        title="Fix with test",
        body="Crash on None.\n\nCloses #77",
        style="merge",
    )
    b.pr(
        {
            "pkg/newmod.py": b"def helper():\n    return 1\n",
            src[3]: b.files[src[3]] + b"\nfrom pkg import newmod\n",
        },
        title="Add helper module",
        body="We need a helper for the loader.",
    )
    b.pr({}, title="", style="merge", expect="empty_issue_text", symlinks={"pkg/link.py": "/etc/passwd"})
    b.pr(
        {src[4]: b.mutated(src[4])},
        title="Link config",
        symlinks={"pkg/cfg.py": "../../outside"},
        expect="symlink_or_submodule",
    )
    b.pr(
        {f"pkg/gen{i}.py": f"x = {i}\n".encode() for i in range(12)},
        title="Add many modules",
        expect="too_many_files",
    )
    b.pr(
        {"pkg/big.py": b"TABLE = '" + b"ab" * 80_000 + b"'\n"}, title="Add big table", expect="file_too_large"
    )
    first = b.pr(
        {src[5]: b.mutated(src[5], 6)}, title="Fix loop bound in parser", body="Off by one in the loop."
    )
    b.pr({src[5]: first.before[src[5]]}, title="Revert loop fix", body="Broke stuff.")
    b.pr(
        {src[5]: first.changes[src[5]]},
        title="Re-land loop fix",
        body="Now with the fix.",
        expect="near_duplicate",
    )
    b.pr({src[6]: b.mutated(src[6])}, title="Another fix", number=first.number, expect="duplicate_instance")
    crlf = "pkg/win.py"
    b.plain_commit("Add windows module", {crlf: b"a = 1\r\nb = 2\r\nc = 3\r\n"})
    b.pr({crlf: b"a = 1\r\nb = 3\r\nc = 3\r\n"}, title="Fix windows value", body="b must be 3 on windows")
    b.pr(
        {"pkg/gen_pb2.py": b"# generated\nX = 2\n", "docs/x.rst": b"doc\n"},
        title="Regenerate protos",
        expect="only_generated_vendored_or_lock",
    )
    b.pr(
        {"pkg/tables.py": b"# Code generated by tablegen. DO NOT EDIT.\nROWS = 3\n"},
        title="Regenerate tables",
        expect="only_generated_vendored_or_lock",
    )
    b.pr(
        {
            src[7]: b.mutated(src[7]),
            "pkg/tables.py": b"# Code generated by tablegen. DO NOT EDIT.\nROWS = 4\n",
        },
        title="Fix the table reader and regenerate",
        body="The reader skipped the last row.",
    )
    return b.write(repo)
