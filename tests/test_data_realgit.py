"""`--local` mining on a history made with git itself, holding what real repositories hold and generated
histories do not: a text-looking file full of control bytes (psf/requests keeps an Illustrator file whose
patches hold over ten thousand 0x1e bytes, which once made the patch reader take patch bytes for a commit
id and end the run), commit messages in a declared legacy encoding, in undeclared bytes, and full of
git's and the reader's own separators, a submodule, an octopus merge, and a patch over the size limit.
Each such PR is dropped with its reason or kept, and every PR after them comes out exactly right. Then
what `--local` rows say: merge and squash texts, bots known by their titles (real ones), languages.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_pipeline.config import FilterConfig, MineConfig
from data_pipeline.extract import commits
from data_pipeline.filter.rules import bot_title
from data_pipeline.run.runner import mine
from data_pipeline.sources.local import LocalSource
from swerl.edit_format import apply_patch_to_contents

CORE = "".join(f"def f{i}(x):\n    return x + {i}\n\n\n" for i in range(30))


class Git:
    """A work tree driven by git commands, with fixed identities and dates (reproducible commits)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tick = 0
        path.mkdir(parents=True)
        self.run("init", "-q", "-b", "main")

    def run(self, *args: str, stdin: bytes | None = None, committer: dict[str, str] | None = None) -> str:
        """Run git; `committer` overrides the committer's GIT_COMMITTER_* variables (a rebase merge's
        commits share GitHub's identity and time)."""
        self.tick += 1
        date = f"2024-01-01T00:{self.tick // 60:02d}:{self.tick % 60:02d}Z"
        env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        env |= {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com"}
        env |= {"GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}
        env |= {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        env |= {f"GIT_COMMITTER_{key.upper()}": value for key, value in (committer or {}).items()}
        done = subprocess.run(
            ["git", "-C", str(self.path), *args], input=stdin, capture_output=True, env=env, check=True
        )
        return done.stdout.decode("utf-8", "replace").strip()

    def commit(
        self, files: dict[str, bytes], message: bytes, *options: str, committer: dict[str, str] | None = None
    ) -> str:
        for path, data in files.items():
            (self.path / path).parent.mkdir(parents=True, exist_ok=True)
            (self.path / path).write_bytes(data)
            self.run("add", path)
        self.run(*options, "commit", "-q", "--allow-empty", "-F", "-", stdin=message, committer=committer)
        return self.run("rev-parse", "HEAD")


def _edit(text: str, i: int) -> bytes:
    return text.replace(f"return x + {i}\n", f"return x - {i}\n").encode()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The repository and, per PR number, what must become of it (a drop reason, or None: a row)."""
    root = tmp_path_factory.mktemp("realgit")
    git = Git(root / "repo")
    core = CORE
    git.commit({"pkg/core.py": core.encode(), "README.md": b"# demo\n"}, b"Initial import")
    expect: dict[int, str | None] = {}

    # An Illustrator-like file: text to git (no NUL byte), full of record separators, some at a line's
    # start, some followed by what looks like a commit id, and the reader's own end-of-batch line.
    fake = b"".join(
        b"%%AI stream\n\x1e" + b"%040x" % (i * 7919) + b" \xdf\xe9\x1e\x1f\n\x1eswerl: end of batch\n"
        for i in range(300)
    )
    git.commit({"ext/logo.ai": fake, "pkg/core.py": _edit(core, 1)}, b"Add the logo (#1)")
    core = _edit(core, 1).decode()
    expect[1] = "non_utf8_file"

    message = "Corrige l'analyse du caf\xe9 (#2)\n\nLe param\xe8tre \xab x \xbb \xe9tait ignor\xe9.\n"
    git.commit({"pkg/core.py": _edit(core, 2)}, message.encode("latin-1"), "-c", "i18n.commitEncoding=latin1")
    core = _edit(core, 2).decode()
    expect[2] = None

    separators = (
        b"Handle \x1e and \x1f in names (#3)\n\n\x1e0\nswerl: end of batch\n"
        b"diff --git a/x b/x\n:100644 100644 0000 1111 M\tx\n\x1e" + b"a" * 40 + b" " + b"b" * 40 + b"\n"
    )
    git.commit({"pkg/core.py": _edit(core, 3)}, separators)
    core = _edit(core, 3).decode()
    expect[3] = None

    big = "".join(f"TABLE_{i} = {i}\n" for i in range(20_000)).encode()  # ~330 KB of patch
    git.commit({"pkg/table.py": big, "pkg/core.py": _edit(core, 4)}, b"Add the lookup table (#4)")
    core = _edit(core, 4).decode()
    expect[4] = "patch_too_large"

    blob = git.run("rev-parse", "HEAD")  # any object id serves as a gitlink's target
    git.run("update-index", "--add", "--cacheinfo", f"160000,{blob},libs/engine")
    git.commit({"pkg/core.py": _edit(core, 5)}, b"Pin the engine submodule (#5)")
    core = _edit(core, 5).decode()
    expect[5] = "symlink_or_submodule"

    # An octopus merge of two branches: the change is everything both brought, against the first parent.
    git.run("checkout", "-q", "-b", "left")
    git.commit({"pkg/left.py": b"def left():\n    return 'L'\n"}, b"Add left")
    git.run("checkout", "-q", "-b", "right", "main")
    git.commit({"pkg/right.py": b"def right():\n    return 'R'\n"}, b"Add right")
    git.run("checkout", "-q", "main")
    git.run(
        "merge",
        "-q",
        "--no-ff",
        "-m",
        "Merge pull request #6 from dev/both\n\nAdd both sides",
        "left",
        "right",
    )
    expect[6] = None

    git.commit({"pkg/data.bin": b"\x89PNG\r\n\x1a\n\x00\x00\x00" + bytes(range(256))}, b"Add a picture (#7)")
    expect[7] = "binary_file"

    git.commit({"pkg/core.py": _edit(core, 8)}, "R\xe9sum\xe9 of the fix (#8)\n".encode("latin-1"))
    core = _edit(core, 8).decode()
    expect[8] = None  # undeclared latin-1: not fatal either

    git.commit({"pkg/core.py": _edit(core, 9)}, b"Fix the last function (#9)\n\nThe sign was wrong.\n")
    expect[9] = None
    return root, expect


def _rows(folder: Path) -> list[dict]:
    return [row for shard in sorted(folder.glob("*.parquet")) for row in pq.read_table(shard).to_pylist()]


def rows_and_drops(out: Path) -> tuple[dict[int, dict], dict[int, str]]:
    """A mining run's rows and its drop reasons over every stage, each by PR number."""
    rows = {row["pull_number"]: row for row in _rows(out / "data")}
    drops = {}
    for stage in ("collect", "extract", "dedup", "render"):
        drops |= {
            int(d["instance_id"].rsplit("-", 1)[1]): d["reason"] for d in _rows(out / stage) if "reason" in d
        }
    return rows, drops


@pytest.mark.parametrize("batch", [128, 2])
def test_every_pr_is_kept_or_dropped_with_its_reason_and_the_run_goes_on(history, monkeypatch, batch):
    root, expect = history
    monkeypatch.setattr(commits, "MAX_DIFF_BYTES", 200_000)
    monkeypatch.setattr(commits.PatchReader, "_BATCH", batch)
    out = root / f"out-{batch}"
    config = MineConfig(shard_size=4, filters=FilterConfig(require_issue=False))
    summary = mine(
        out, LocalSource(root / "repo", root / f"cache-{batch}", repo="acme/w"), config, progress=False
    )
    rows, drops = rows_and_drops(out)
    assert summary.candidates == len(expect)
    for number, reason in expect.items():
        if reason is None:
            assert number in rows, (number, drops.get(number))
        else:
            assert drops.get(number) == reason, number
    for row in rows.values():
        base = {
            item["path"]: item["content"]
            for item in row["code_context"]
            if item["path"] in row["modified_files"]
        }
        new = {item["path"]: item["content"] for item in row["oracle_new_content"]}
        assert apply_patch_to_contents(base, row["oracle_patch"]) == new
    assert "Corrige l'analyse du café" in rows[2]["problem_statement"]
    assert "Le paramètre « x » était ignoré." in rows[2]["problem_statement"]
    assert "\x1e0\nswerl: end of batch\ndiff --git a/x b/x" in rows[3]["problem_statement"]
    assert set(rows[6]["modified_files"]) == {"pkg/left.py", "pkg/right.py"}
    assert rows[8]["problem_statement"].endswith("sum\N{LATIN SMALL LETTER E WITH ACUTE} of the fix")


# Subjects of real first-parent commits: pallets/flask (8a6cdf1e, a7919970, 926ab921, authored by a
# maintainer who squash-merged the bot's PR) and psf/requests (4c800e9a, 1f6589ec: dependabot's own).
BOT_TITLES = [
    "[pre-commit.ci] pre-commit autoupdate (#5541)",
    "Bump the github-actions group with 3 updates (#5539)",
    "Bump the python-requirements group in /requirements with 5 updates (#5514)",
    "Bump actions/setup-python from 6.2.0 to 6.3.0 in the actions group (#7561)",
    "Bump https://github.com/astral-sh/ruff-pre-commit (#7598)",
    # Renovate's conventions (its default commit subjects).
    "chore(deps): update dependency pytest to v8.3.4",
    "Update actions/checkout action to v4",
    "fix(deps): update rust crate serde to 1.0.210",
    "chore(deps): lock file maintenance",
]
# Real subjects by people, from the same histories, some with the same words.
HUMAN_TITLES = [
    "update min blinker version (#5633)",
    "Inline pre-commit linting (#7539)",
    "set up pre-commit lite workflow",
    "Restrict URL preparation to HTTP/HTTPS",
    "Fixed issue #3696. Added a test for it as well.",
    "update requirements (#3823)",
]


@pytest.mark.parametrize("title", BOT_TITLES)
def test_bot_titles_are_known_whoever_authored_the_commit(title):
    assert bot_title(title)


@pytest.mark.parametrize("title", HUMAN_TITLES)
def test_human_titles_are_not_taken_for_bots(title):
    assert not bot_title(title)


# psf/requests 4c800e9a as Dependabot wrote it; here a maintainer squash-merges it under their name.
DEPENDABOT_MESSAGE = """Upgrade the setup action (#16)

Bumps the actions group with 1 update: [actions/setup-python](https://github.com/actions/setup-python).

---
updated-dependencies:
- dependency-name: actions/setup-python
  dependency-version: 6.3.0
...

Signed-off-by: dependabot[bot] <support@github.com>
Co-authored-by: dependabot[bot] <49699333+dependabot[bot]@users.noreply.github.com>
"""


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """A history of merge commits, squashes and chores, mined with and without the language filter."""
    root = tmp_path_factory.mktemp("texts")
    git = Git(root / "repo")
    core = CORE
    git.commit({"pkg/core.py": core.encode(), "setup.cfg": b"[metadata]\nname = w\n"}, b"Initial import")
    git.run("checkout", "-q", "-b", "f1")
    git.commit(
        {"pkg/core.py": _edit(core, 1)},
        b"Handle None in f1\n\nThe parser crashed on None.\n\nSigned-off-by: A <a@x.org>\n",
    )
    git.run("checkout", "-q", "main")
    git.commit({"README.md": b"# w\n"}, b"Add a readme")
    git.run("checkout", "-q", "f1")
    git.run("merge", "-q", "--no-ff", "-m", "Merge branch 'main' into f1", "main")
    git.commit({"pkg/core.py": _edit(_edit(core, 1).decode(), 2)}, b"Add a guard in f2")
    git.run("checkout", "-q", "main")
    git.run(
        "merge", "-q", "--no-ff", "-m", "Merge pull request #10 from dev/f1\n\nParse None in f1 and f2", "f1"
    )
    core = _edit(_edit(core, 1).decode(), 2).decode()
    git.run("checkout", "-q", "-b", "f3")
    git.commit({"pkg/core.py": _edit(core, 3)}, b"Speed up f3")
    git.run("checkout", "-q", "main")
    git.run("merge", "-q", "--no-ff", "-m", "Merge pull request #11 from dev/f3\n\nFaster f3", "f3")
    core = _edit(core, 3).decode()
    squash = b"Fix the sign of f5 (#12)\n\n* fix sign\n\n* explain why\n\nCo-authored-by: X <x@y.org>\n"
    git.commit({"pkg/core.py": _edit(core, 5)}, squash)
    core = _edit(core, 5).decode()
    ci = b"on: push\njobs: {}\n"
    git.commit(
        {".github/workflows/ci.yml": ci, "pkg/core.py": _edit(core, 6)},
        BOT_TITLES[1].replace("5539", "13").encode(),
    )
    core = _edit(core, 6).decode()
    git.commit(
        {"setup.cfg": b"[metadata]\nname = w\nversion = 2\n"}, b"Declare the version in setup.cfg (#14)"
    )
    git.commit({"pkg/core.py": _edit(core, 7)}, DEPENDABOT_MESSAGE.encode())
    runs = {}
    for name, languages in (("py", ("py",)), ("any", ())):
        config = MineConfig(filters=FilterConfig(require_issue=False, languages=languages))
        mine(root / name, LocalSource(root / "repo", root / "cache", repo="acme/w"), config, progress=False)
        runs[name] = rows_and_drops(root / name)
    return runs


def test_a_merge_commit_s_text_is_its_title_then_the_messages_it_merged(texts):
    rows, _ = texts["py"]
    assert rows[10]["problem_source"] == "merge_commits"
    # Oldest first; trailers and the merge of the base branch into the PR left out.
    assert rows[10]["problem_statement"] == (
        "Parse None in f1 and f2\n\nHandle None in f1\n\nThe parser crashed on None.\n\nAdd a guard in f2"
    )
    # The next merge brings only its own commit, not what the line already holds.
    assert rows[11]["problem_statement"] == "Faster f3\n\nSpeed up f3"


def test_a_squash_commit_s_text_is_its_whole_message_without_trailers(texts):
    rows, _ = texts["py"]
    assert rows[12]["problem_source"] == "commit_message"
    assert rows[12]["problem_statement"] == "Fix the sign of f5\n\n* fix sign\n\n* explain why"


def test_bots_and_other_languages_are_dropped_by_reason(texts):
    rows, drops = texts["py"]
    assert drops[13] == "bot_author"  # a bot's title under a maintainer's name
    assert drops[16] == "bot_author"  # signed off by Dependabot
    assert drops[14] == "not_in_languages"  # setup.cfg only
    rows_any, _ = texts["any"]
    assert 14 in rows_any and rows_any[14]["modified_files"] == ["setup.cfg"]
    assert set(rows) == set(rows_any) - {14}
