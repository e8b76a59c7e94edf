"""The GH Archive source on hourly dump files written by the test in the real event format."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq

from data_pipeline.config import MineConfig
from data_pipeline.run.runner import mine
from data_pipeline.sources.gharchive import GHArchiveSource, archive_files
from data_pipeline.synthetic import edge_case_history
from swerl.edit_format import canonical_answer
from swerl.reward import similarity_reward

REPO = "acme/widgets"


def _event(kind: str, at: str, payload: dict, repo: str = REPO) -> dict:
    return {
        "id": "1",
        "type": kind,
        "actor": {"login": "someone"},
        "repo": {"id": 1, "name": repo, "url": f"https://api.github.com/repos/{repo}"},
        "payload": payload,
        "public": True,
        "created_at": at,
    }


def _pr(number: int, sha: str | None, body: str, at: str, merged: bool = True) -> dict:
    return {
        "action": "closed",
        "number": number,
        "pull_request": {
            "number": number,
            "state": "closed",
            "title": f"Fix {number}",
            "body": body,
            "merged": merged,
            "merge_commit_sha": sha,
            "user": {"login": "dev"},
            "created_at": at,
        },
    }


def _write(path, events):
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for event in events:
            f.write(json.dumps(event) + "\n")


def test_gharchive_pairs_prs_with_issues(tmp_path):
    prs = [pr for pr in edge_case_history(tmp_path / "remotes" / "acme" / "widgets") if pr.expect is None]
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    early = [_event("WatchEvent", "2024-01-01T00:00:01Z", {"action": "started"})]
    late = [_event("PushEvent", "2024-01-02T10:00:00Z", {"size": 1})]
    for pr in prs:
        issue = 1000 + pr.number
        early.append(
            _event(
                "IssuesEvent",
                "2024-01-01T00:10:00Z",
                {
                    "action": "opened",
                    "issue": {
                        "number": issue,
                        "title": f"Bug {pr.number}",
                        "body": f"Broken thing {pr.number}",
                    },
                },
            )
        )
        early.append(
            _event(
                "IssueCommentEvent",
                "2024-01-01T00:20:00Z",
                {
                    "action": "created",
                    "issue": {"number": issue, "title": f"Bug {pr.number}"},
                    "comment": {"body": "early comment", "created_at": "2024-01-01T00:20:00Z"},
                },
            )
        )
        late.append(
            _event(
                "PullRequestEvent",
                "2024-01-02T11:00:00Z",
                _pr(pr.number, pr.sha, f"Fixes #{issue}", "2024-01-02T09:00:00Z"),
            )
        )
        late.append(
            _event(
                "IssueCommentEvent",
                "2024-01-02T12:00:00Z",
                {
                    "action": "created",
                    "issue": {"number": issue},
                    "comment": {"body": "late comment", "created_at": "2024-01-02T12:00:00Z"},
                },
            )
        )
    late.append(
        _event("PullRequestEvent", "2024-01-02T11:00:00Z", _pr(500, None, "Fixes #1", "x", merged=False))
    )
    late.append(_event("PullRequestEvent", "2024-01-02T11:00:00Z", _pr(501, "ab" * 20, "Fixes #1", "2024")))
    late.append(
        _event(
            "PullRequestEvent",
            "2024-01-02T11:00:00Z",
            _pr(7, "cd" * 20, "Fixes #1", "2024"),
            repo="other/repo",
        )
    )
    _write(dumps / "2024-01-01-0.json.gz", early)
    _write(dumps / "2024-01-02-10.json.gz", late)
    _write(dumps / "2024-01-02-9.json.gz", [_event("ForkEvent", "2024-01-02T09:00:00Z", {})])
    assert [p.name for p in archive_files(dumps)] == [
        "2024-01-01-0.json.gz",
        "2024-01-02-9.json.gz",
        "2024-01-02-10.json.gz",
    ]
    source = GHArchiveSource(
        dumps, tmp_path / "cache", clone_url=str(tmp_path / "remotes") + "/{repo}", repos=[REPO]
    )
    out = tmp_path / "out"
    mine(out, source, MineConfig(shard_size=4), workers=1, progress=False)
    rows = [r for f in sorted((out / "data").glob("shard-*.parquet")) for r in pq.read_table(f).to_pylist()]
    drops = {
        r["instance_id"]: r["reason"]
        for f in sorted((out / "extract").glob("drops-*.parquet"))
        for r in pq.read_table(f).to_pylist()
    }
    assert sorted(r["pull_number"] for r in rows) == sorted(pr.number for pr in prs)
    assert drops["acme__widgets-500"] == "not_merged"
    assert drops["acme__widgets-501"] == "no_linked_issue"  # issue #1 never appears in the dumps
    for row in rows:
        assert row["issue_numbers"] == [1000 + row["pull_number"]]
        assert f"Broken thing {row['pull_number']}" in row["problem_statement"]
        assert "early comment" in row["problem_statement"] and "late comment" not in row["problem_statement"]
        context = {f["path"]: f["content"] for f in row["code_context"]}
        oracle = {f["path"]: f["content"] for f in row["oracle_new_content"]}
        assert similarity_reward(canonical_answer(context, oracle), context, oracle).reward == 1.0
