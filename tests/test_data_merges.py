"""GH Archive events in both shapes on a history made with git, with a PR merged each way GitHub merges.

Before October 2025 a `PullRequestEvent` carried the whole PR; since then it carries the action, the
number and the head and base refs (the fixture's trimmed events have the fields of a real one:
XAMPPRocky/octocrab's test resources as updated for the change, GitHub changelog 2025-08-08, gharchive.org
issue #312). The history holds a merge commit, a squash commit and a rebase merge of three commits
(GitHub writes those with its own committer identity and one commit time); every row's oracle must be
the PR's whole change against the PR's base. Then the faults of dumps: a truncated file, a line that
is not JSON, a file removed between runs, and a failed first run in the same output directory.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from test_data_github import TOKEN, Replay, _issue, _pull, replay_server
from test_data_realgit import CORE, Git, _edit, _rows, rows_and_drops

from data_pipeline.config import MineConfig
from data_pipeline.run.runner import mine
from data_pipeline.sources.gharchive import GHArchiveSource
from data_pipeline.sources.github import GitHubSource, PullLookup
from data_pipeline.sources.local import LocalSource
from swerl.edit_format import apply_patch_to_contents
from swerl.git import GitError

REPO = "acme/widgets"
GITHUB = {"name": "GitHub", "email": "noreply@github.com", "date": "2024-01-01T05:00:00Z"}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The repository under `remotes/acme/widgets` and what each PR's row must be."""
    root = tmp_path_factory.mktemp("merges")
    git = Git(root / "remotes" / REPO)
    core = CORE
    git.commit({"pkg/core.py": core.encode()}, b"Initial import")
    # 1: a merge commit of a branch of two commits.
    git.run("checkout", "-q", "-b", "b1")
    git.commit({"pkg/core.py": _edit(core, 1)}, b"Handle None in f1")
    git.commit({"pkg/core.py": _edit(_edit(core, 1).decode(), 2)}, b"Guard f2")
    git.run("checkout", "-q", "main")
    git.run(
        "merge", "-q", "--no-ff", "-m", "Merge pull request #1 from dev/b1\n\nFix f1 and f2, fixes #101", "b1"
    )
    core = _edit(_edit(core, 1).decode(), 2).decode()
    # 2: a squash commit of a PR that had two commits.
    git.commit({"pkg/core.py": _edit(_edit(core, 4).decode(), 5)}, b"Fix f4 and f5 (#2)\n\nFixes #102")
    core = _edit(_edit(core, 4).decode(), 5).decode()
    # 3: a rebase merge of three commits: GitHub's committer identity and time on all three.
    for i in (7, 8, 9):
        git.commit({"pkg/core.py": _edit(core, i)}, f"Edit f{i}".encode(), committer=GITHUB)
        core = _edit(core, i).decode()
    git.commit({"README.md": b"# w\n"}, b"Add a readme")
    log = git.run("log", "--first-parent", "--format=%H %s").splitlines()
    sha = {subject: line.split()[0] for line in log for subject in [line.split(" ", 1)[1]]}
    merges = {1: sha["Merge pull request #1 from dev/b1"], 2: sha["Fix f4 and f5 (#2)"], 3: sha["Edit f9"]}
    bases = {
        1: git.run("rev-parse", f"{merges[1]}^1"),
        2: git.run("rev-parse", f"{merges[2]}^1"),
        3: git.run("rev-parse", f"{merges[3]}~3"),
    }
    changed = {1: (1, 2), 2: (4, 5), 3: (7, 8, 9)}
    return root, merges, bases, changed


def _event(kind: str, at: str, payload: dict, actor: str = "dev") -> dict:
    return {
        "id": "1",
        "type": kind,
        "actor": {
            "id": 1,
            "login": actor,
            "display_login": actor,
            "url": f"https://api.github.com/users/{actor}",
        },
        "repo": {"id": 7, "name": REPO, "url": f"https://api.github.com/repos/{REPO}"},
        "payload": payload,
        "public": True,
        "created_at": at,
    }


def _issues() -> list[dict]:
    """Issues 101-103 opened before their PRs; 101 edited after its PR was opened to describe the fix."""
    events = [
        _event(
            "IssuesEvent",
            "2024-01-01T01:00:00Z",
            {
                "action": "opened",
                "issue": {"number": 100 + n, "title": f"f{n} is wrong", "body": f"f{n} breaks."},
            },
        )
        for n in (1, 2, 3)
    ]
    edited = {"number": 101, "title": "f1 is wrong", "body": "f1 breaks. Fixed by returning x - 1."}
    events.append(_event("IssuesEvent", "2024-01-01T07:00:00Z", {"action": "closed", "issue": edited}))
    return events


def _full_pr(number: int, action: str, merge: str, commits: int) -> dict:
    """A `PullRequestEvent` payload as GH Archive stored them until October 2025 (the fields read)."""
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "number": number,
            "state": "closed" if action == "closed" else "open",
            "title": f"Fix PR {number}",
            "body": f"Fixes #{100 + number}"
            if action == "opened"
            else f"Fixes #{100 + number}\n\nEdited: done.",
            "user": {"login": "dev"},
            "created_at": "2024-01-01T02:00:00Z",
            "merged": action == "closed",
            "merge_commit_sha": merge if action == "closed" else None,
            "commits": commits,
            "head": {"ref": f"b{number}", "sha": "1" * 40},
            "base": {"ref": "main", "sha": "2" * 40},
        },
    }


def _trimmed_pr(number: int, action: str) -> dict:
    """A `PullRequestEvent` payload since October 2025: no title, body, user, merged or merge commit."""
    repo = {"id": 7, "url": f"https://api.github.com/repos/{REPO}", "name": "widgets"}
    return {
        "action": action,
        "number": number,
        "pull_request": {
            "url": f"https://api.github.com/repos/{REPO}/pulls/{number}",
            "id": 9000 + number,
            "node_id": f"PR_{number}",
            "number": number,
            "head": {"ref": f"b{number}", "sha": "1" * 40, "repo": repo},
            "base": {"ref": "main", "sha": "2" * 40, "repo": repo},
        },
    }


def _write(path: Path, events: list[dict]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(event) + "\n" for event in events)


def _trimmed_dumps(dumps: Path) -> Path:
    """One hour of events in the trimmed shape: the issues, then PRs 1-4 opened and closed."""
    dumps.mkdir()
    events = [*_issues()]
    events += [
        _event("PullRequestEvent", "2024-01-01T02:00:00Z", _trimmed_pr(n, "opened")) for n in (1, 2, 3, 4)
    ]
    events += [
        _event("PullRequestEvent", "2024-01-01T06:00:00Z", _trimmed_pr(n, "closed"), "maintainer")
        for n in (1, 2, 3, 4)
    ]
    _write(dumps / "2025-11-02-0.json.gz", events)
    return dumps


def _mine(root: Path, name: str, dumps: Path) -> tuple[dict, dict, object]:
    source = GHArchiveSource(dumps, root / f"cache-{name}", clone_url=str(root / "remotes") + "/{repo}")
    summary = mine(root / name, source, MineConfig(shard_size=3), workers=1, progress=False)
    rows, drops = rows_and_drops(root / name)
    return rows, drops, summary


def _check_oracles(rows: dict, merges: dict, bases: dict, changed: dict) -> None:
    for number, row in rows.items():
        assert (row["merge_commit"], row["base_commit"]) == (merges[number], bases[number]), number
        base = {f["path"]: f["content"] for f in row["code_context"] if f["path"] in row["modified_files"]}
        new = {f["path"]: f["content"] for f in row["oracle_new_content"]}
        assert apply_patch_to_contents(base, row["oracle_patch"]) == new
        # The whole change: every function the PR edited, and nothing else.
        edited = {i for i in range(30) if f"return x - {i}\n" in new["pkg/core.py"]}
        assert edited - {i for i in range(30) if f"return x - {i}\n" in base["pkg/core.py"]} == set(
            changed[number]
        )


def test_events_before_october_2025_yield_each_merge_method_s_whole_change(history):
    root, merges, bases, changed = history
    dumps = root / "dumps-full"
    dumps.mkdir()
    opened = [
        _event("PullRequestEvent", "2024-01-01T02:00:00Z", _full_pr(n, "opened", "", 0)) for n in (1, 2, 3)
    ]
    closed = [
        _event("PullRequestEvent", "2024-01-01T06:00:00Z", _full_pr(n, "closed", merges[n], commits))
        for n, commits in ((1, 2), (2, 2), (3, 3))
    ]
    _write(dumps / "2024-01-01-0.json.gz", [*_issues(), *opened, *closed])
    rows, drops, _ = _mine(root, "out-full", dumps)
    assert sorted(rows) == [1, 2, 3], drops
    _check_oracles(rows, merges, bases, changed)
    # The issue as it read when the PR was opened, not as edited once the fix was known.
    assert rows[1]["problem_statement"] == "f1 is wrong\n\nf1 breaks."


def test_trimmed_events_are_completed_from_the_history(history):
    root, merges, bases, changed = history
    rows, drops, _ = _mine(root, "out-trimmed", _trimmed_dumps(root / "dumps-trimmed"))
    assert sorted(rows) == [1, 2], drops
    _check_oracles(rows, merges, bases, changed)
    assert rows[1]["problem_statement"] == "f1 is wrong\n\nf1 breaks."
    # A rebase merge names no PR in its commits, and #4 was closed unmerged: the history cannot tell.
    assert drops[3] == drops[4] == "merge_not_found"
    assert rows[2]["created_at"] == "2024-01-01T02:00:00Z"  # the `opened` event's time


def test_trimmed_events_the_history_cannot_settle_are_asked_of_the_api(history):
    """With a token, the rebase merge (#3) and the unmerged PR (#4) are looked up on the REST API
    (a loopback server in its JSON shape): #3 becomes a row with its whole change, #4 is `not_merged`."""
    root, merges, bases, changed = history
    replay = Replay()
    with replay_server(replay) as base:
        for number, sha in ((3, merges[3]), (4, None)):
            pull = _pull(base, number, sha, f"Edit f7 to f9 ({number})", f"Fixes #{100 + number}")
            replay.routes[f"/repos/{REPO}/pulls/{number}"] = {**pull, "commits": 3}
        replay.failures[f"/repos/{REPO}/pulls/3"] = [(0, {}, {})]  # a dropped connection on the way
        dumps = _trimmed_dumps(root / "dumps-api")
        slept: list[float] = []
        api = PullLookup(TOKEN, base, sleep=slept.append)
        source = GHArchiveSource(
            dumps, root / "cache-api", clone_url=str(root / "remotes") + "/{repo}", api=api
        )
        mine(root / "out-api", source, MineConfig(shard_size=3), workers=1, progress=False)
    rows = {row["pull_number"]: row for row in _rows(root / "out-api" / "data")}
    build = _rows(root / "out-api" / "extract")
    drops = {int(d["instance_id"].rsplit("-", 1)[1]): d["reason"] for d in build if "reason" in d}
    assert sorted(rows) == [1, 2, 3] and drops[4] == "not_merged"
    _check_oracles(rows, merges, bases, changed)
    assert rows[3]["problem_statement"] == "f3 is wrong\n\nf3 breaks."
    asked = {path for path, _ in replay.requests}
    assert f"/repos/{REPO}/pulls/1" not in asked  # the history settled #1 and #2
    assert slept == [1.0] and all(auth == f"token {TOKEN}" for _, auth in replay.requests)


def test_github_listing_yields_each_merge_method_s_whole_change(history):
    """`--github` lists PRs without their number of commits; a PR that can become a row is asked for it,
    so the rebase merge (#3) gets its whole change on the right base, like the other two methods."""
    root, merges, bases, changed = history
    replay = Replay()
    with replay_server(replay) as base:
        pulls = [_pull(base, n, merges[n], f"Fix f{n}", f"Fixes #{100 + n}") for n in (1, 2, 3)]
        pulls.append(_pull(base, 4, None, "Closed unmerged", "Fixes #104"))
        replay.routes[f"/repos/{REPO}/pulls"] = pulls
        for pull, commits in zip(pulls, (2, 2, 3, 1), strict=True):
            replay.routes[f"/repos/{REPO}/pulls/{pull['number']}"] = {**pull, "commits": commits}
        for n in (1, 2, 3, 4):
            replay.routes[f"/repos/{REPO}/issues/{100 + n}"] = _issue(
                base, 100 + n, f"f{n} is wrong", "breaks", 0
            )
        source = GitHubSource(
            [REPO], root / "cache-gh", token=TOKEN, api_url=base, clone_url=str(root / "remotes") + "/{repo}"
        )
        mine(root / "out-gh", source, MineConfig(shard_size=3), workers=1, progress=False)
    rows = {row["pull_number"]: row for row in _rows(root / "out-gh" / "data")}
    assert sorted(rows) == [1, 2, 3]
    _check_oracles(rows, merges, bases, changed)
    asked = {path for path, _ in replay.requests}
    assert f"/repos/{REPO}/pulls/4" not in asked  # unmerged: dropped without the extra request


def test_bad_dumps_are_skipped_named_and_counted_and_a_rerun_continues(history, capsys):
    root, merges, _, _ = history
    dumps = root / "dumps-faults"
    dumps.mkdir()
    good = [
        *_issues(),
        _event("PullRequestEvent", "2024-01-01T06:00:00Z", _full_pr(2, "closed", merges[2], 2)),
    ]
    _write(dumps / "2024-01-01-0.json.gz", good)
    with gzip.open(dumps / "2024-01-01-1.json.gz", "wt") as f:
        f.write('{"type": "PullRequestEvent", "payload": {"action": \n')  # a line cut short
    whole = gzip.compress(b"".join(json.dumps(e).encode() + b"\n" for e in good * 50))
    (dumps / "2024-01-01-2.json.gz").write_bytes(whole[: len(whole) // 2])  # truncated
    (dumps / "2024-01-01-3.json.gz").write_bytes(b"")  # a failed download: gzip reads it as no events
    rows, _, summary = _mine(root, "out-faults", dumps)
    err = capsys.readouterr().err
    assert f"swerl: warning: skipping {dumps / '2024-01-01-2.json.gz'}:" in err
    assert f"swerl: warning: skipping {dumps / '2024-01-01-3.json.gz'}: empty file (0 bytes)" in err
    assert sorted(rows) == [2]
    assert "unreadable dumps skipped: 2 (see the warnings)" in summary.notes
    assert "lines not JSON: 1 (see the warnings)" in summary.notes
    # The damaged dump removed, the same command again: the run goes on from its manifest.
    (dumps / "2024-01-01-2.json.gz").unlink()
    (dumps / "2024-01-01-3.json.gz").unlink()
    again, _, _ = _mine(root, "out-faults", dumps)
    assert again == rows


def test_a_failed_first_run_does_not_block_the_corrected_command(tmp_path):
    git = Git(tmp_path / "repo")
    git.commit({"pkg/core.py": CORE.encode()}, b"Initial import")
    git.commit({"pkg/core.py": _edit(CORE, 3)}, b"Fix the sign of f3 (#1)\n\nIt returned x + 3.")
    out = tmp_path / "out"
    with pytest.raises(GitError):
        mine(
            out,
            LocalSource(tmp_path / "repo", tmp_path / "cache", ref="no-such-branch"),
            MineConfig(),
            progress=False,
        )
    summary = mine(out, LocalSource(tmp_path / "repo", tmp_path / "cache"), MineConfig(), progress=False)
    assert summary.candidates == 1
    # Once a shard is recorded, another configuration is still refused rather than mixed in.
    with pytest.raises(ValueError, match="different configuration"):
        mine(
            out, LocalSource(tmp_path / "repo", tmp_path / "cache"), MineConfig(shard_size=7), progress=False
        )
    assert (
        subprocess.run(["git", "-C", str(tmp_path / "repo"), "status"], capture_output=True).returncode == 0
    )
