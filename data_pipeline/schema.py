"""The shapes of what each stage writes: candidates (stage 1), drops (every stage) and training rows.

Schemas are explicit so that every shard of a run, and every run, has the same column types whatever the
data (an empty shard, a shard without issues), and `datasets.load_dataset("parquet", ...)` reads all
shards as one table. Contents are lists of `{path, content}` records: a shape the reward accepts as is
and one that keeps the shuffled file order that a Parquet map would not promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

FILES = pa.list_(pa.struct([("path", pa.string()), ("content", pa.string())]))
MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))

CANDIDATE_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("source", pa.string()),
        ("repo", pa.string()),
        ("pull_number", pa.int64()),
        ("issue_numbers", pa.list_(pa.int64())),
        ("created_at", pa.string()),
        ("merged", pa.bool_()),
        ("merge_commit", pa.string()),
        ("author", pa.string()),
        ("title", pa.string()),
        ("commits", pa.int64()),
        ("drop_reason", pa.string()),
        ("problem_statement", pa.string()),
        ("problem_source", pa.string()),
    ]
)

DROP_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("repo", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)

# A candidate that passed filter, decontamination and extraction (stages 2-3, folder `extract/`): what
# dedup compares, and all it needs to rebuild its index on resume. The extracted contents themselves go
# from extract to render in the worker's memory (see `run.stages`).
EXTRACTED_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("repo", pa.string()),
        ("oracle_patch", pa.string()),
    ]
)

ROW_SCHEMA = pa.schema(
    [
        ("instance_id", pa.string()),
        ("source", pa.string()),
        ("repo", pa.string()),
        ("pull_number", pa.int64()),
        ("issue_numbers", pa.list_(pa.int64())),
        ("created_at", pa.string()),
        ("problem_statement", pa.string()),
        ("problem_source", pa.string()),
        ("base_commit", pa.string()),
        ("merge_commit", pa.string()),
        ("code_context", FILES),
        ("oracle_new_content", FILES),
        ("oracle_patch", pa.string()),
        ("test_patch", pa.string()),
        ("changed_test_files", pa.list_(pa.string())),
        ("modified_files", pa.list_(pa.string())),
        ("excluded_files", pa.list_(pa.string())),
        ("num_context_files", pa.int64()),
        ("lines_changed", pa.int64()),
        ("problem_tokens", pa.int64()),
        ("context_tokens", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("prompt", MESSAGES),
        ("dedup_key", pa.string()),
    ]
)


@dataclass
class Candidate:
    """A merged PR (or a PR-like commit) with its problem text, before any file is read."""

    instance_id: str
    source: str
    repo: str
    pull_number: int
    merge_commit: str
    problem_statement: str
    problem_source: str
    issue_numbers: list[int] = field(default_factory=list)
    created_at: str = ""
    merged: bool = True
    author: str = ""
    # The PR's title (a commit's subject for `--local`): bots are known by theirs too (`filters`).
    title: str = ""
    # The PR's number of commits when the source knows it (0: unknown): a rebase merge of several
    # commits is told from a squash by it (`extract.contents.pr_base`).
    commits: int = 0
    # A reason to drop the PR that the source already knows (`merge_not_found`), else empty.
    drop_reason: str = ""

    def record(self) -> dict[str, Any]:
        """`dataclasses.asdict(self)`, without its recursive deep copy (the only container is a list of
        ints)."""
        return {
            "instance_id": self.instance_id,
            "source": self.source,
            "repo": self.repo,
            "pull_number": self.pull_number,
            "merge_commit": self.merge_commit,
            "problem_statement": self.problem_statement,
            "problem_source": self.problem_source,
            "issue_numbers": list(self.issue_numbers),
            "created_at": self.created_at,
            "merged": self.merged,
            "author": self.author,
            "title": self.title,
            "commits": self.commits,
            "drop_reason": self.drop_reason,
        }


def instance_id(repo: str, pull_number: int) -> str:
    """SWE-bench's id convention (`owner__name-123`), so decontamination compares like with like."""
    return f"{repo.replace('/', '__')}-{pull_number}"


def drop(instance: str, repo: str, stage: str, reason: str, detail: str = "") -> dict[str, str]:
    return {"instance_id": instance, "repo": repo, "stage": stage, "reason": reason, "detail": detail}
