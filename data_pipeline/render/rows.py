"""Stage 6, render: the training row, with the prompt rendered by the core's edit format.

A row is kept only if the core's `canonical_answer` can express its oracle as SEARCH/REPLACE edits over
exactly the shown context. That makes the reward of a perfect answer 1.0 by construction, which the
tests check on every row (a row whose best answer scores less would teach the policy noise).
"""

from __future__ import annotations

import hashlib
from typing import Any

from data_pipeline.context.builder import ContextResult
from data_pipeline.context.tokens import TokenCounter
from data_pipeline.extract.contents import Dropped, Extracted
from data_pipeline.schema import Candidate
from swerl.edit_format import answer_error


def patch_fingerprint(patch: str) -> str:
    """A key equal for patches that change the same lines the same way, whitespace aside.

    Used for exact-duplicate detection (backports, cherry-picks, re-submitted PRs); near duplicates are
    compared by `dedup` on the same changed lines.
    """
    changed = [
        " ".join(line[1:].split())  # whitespace runs made one space, as `dedup.changed_lines` does
        for line in patch.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++ ", "--- "))
    ]
    return hashlib.sha256("\n".join(changed).encode("utf-8", "surrogatepass")).hexdigest()


def check_expressible(extracted: Extracted) -> None:
    """Raises `Dropped("not_expressible")` when no exact answer exists in the format.

    The answer edits only the modified files, and `canonical_answer` reads only their base contents, so
    this check on the base contents gives what it gives on the full shown context."""
    error = answer_error(extracted.base, extracted.new)
    if error is not None:
        raise Dropped("not_expressible", error[:200])


def build_row(
    candidate: Candidate, extracted: Extracted, context: ContextResult, count: TokenCounter
) -> dict[str, Any]:
    """The output row, for a PR that passed `check_expressible`."""
    problem_tokens = count(candidate.problem_statement)
    context_tokens = sum(count(text) for _, text in context.files)
    return {
        "instance_id": candidate.instance_id,
        "source": candidate.source,
        "repo": candidate.repo,
        "pull_number": candidate.pull_number,
        "issue_numbers": list(candidate.issue_numbers),
        "created_at": candidate.created_at,
        "problem_statement": candidate.problem_statement,
        "problem_source": candidate.problem_source,
        "base_commit": extracted.base_commit,
        "merge_commit": extracted.merge_commit,
        "code_context": [{"path": p, "content": c} for p, c in context.files],
        "oracle_new_content": [{"path": p, "content": c} for p, c in sorted(extracted.new.items())],
        "oracle_patch": extracted.oracle_patch,
        "test_patch": extracted.test_patch,
        "changed_test_files": extracted.changed_test_files,
        "modified_files": sorted(extracted.new),
        "excluded_files": extracted.excluded_files,
        "num_context_files": len(context.files),
        "lines_changed": extracted.lines_changed,
        "problem_tokens": problem_tokens,
        "context_tokens": context_tokens,
        "prompt_tokens": context.prompt_tokens,
        "prompt": context.messages,
        "dedup_key": patch_fingerprint(extracted.oracle_patch),
    }
