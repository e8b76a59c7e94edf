"""Issue and pull-request references in PR texts and commit messages.

GitHub links a PR to the issues it resolves through closing keywords ("fixes #12", "Closes owner/repo#12",
"resolved: #3"); merges and squashes put the PR number in the commit message ("Merge pull request #7
from ...", "Fix parser (#7)"). The same rules serve every source, so a PR found through the API, in GH
Archive or in a local history is linked to the same issues.
"""

from __future__ import annotations

import re

_KEYWORDS = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_CLOSING = re.compile(
    rf"\b{_KEYWORDS}\s*:?\s+(?:(?P<repo>[\w.-]+/[\w.-]+))?#(?P<num>\d+)\b"
    rf"|\b{_KEYWORDS}\s*:?\s+https://github\.com/(?P<urepo>[\w.-]+/[\w.-]+)/issues/(?P<unum>\d+)\b",
    re.IGNORECASE,
)
_MERGE_PR = re.compile(r"^Merge pull request #(\d+)\b")
_SQUASH_PR = re.compile(r"\(#(\d+)\)\s*$")


def closing_issues(text: str, repo: str) -> list[int]:
    """Issue numbers of `repo` that `text` closes with a GitHub closing keyword, in order, no repeats.

    References to another repository (`other/repo#5`) are ignored: that issue's text is not ours.
    """
    found: list[int] = []
    for match in _CLOSING.finditer(text or ""):
        other = match.group("repo") or match.group("urepo")
        number = int(match.group("num") or match.group("unum"))
        if other is not None and other.lower() != repo.lower():
            continue
        if number not in found:
            found.append(number)
    return found


def pr_number_from_commit(message: str) -> int | None:
    """The PR a merge or squash commit came from: `Merge pull request #N ...` or a subject ending `(#N)`."""
    subject = message.split("\n", 1)[0].strip()
    match = _MERGE_PR.match(subject) or _SQUASH_PR.search(subject)
    return int(match.group(1)) if match else None


# Trailers git and GitHub add to messages: who signed, co-wrote or reviewed says nothing of the problem.
_TRAILER = re.compile(
    r"^(?:Co-authored-by|Signed-off-by|Reviewed-by|Acked-by|Tested-by|Reported-by|Suggested-by|Helped-by"
    r"|Change-Id):.*(?:\n|$)",
    re.MULTILINE | re.IGNORECASE,
)


def strip_trailers(message: str) -> str:
    return _TRAILER.sub("", message).strip()


def commit_problem_text(message: str) -> str:
    """The problem text of a commit: its whole message without the merge boilerplate, the `(#N)` suffix
    and trailers.

    For `Merge pull request #N from user/branch` the subject says nothing about the change, so only the
    body (GitHub puts the PR title there) remains.
    """
    subject, _, body = strip_trailers(message).partition("\n")
    if _MERGE_PR.match(subject):
        return body.strip()
    subject = _SQUASH_PR.sub("", subject).strip()
    return f"{subject}\n{body}".strip()
