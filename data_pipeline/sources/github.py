"""`--github OWNER/REPO`: merged PRs and the issues they resolve, through the REST API (PyGithub).

Pages and objects are fetched one request at a time under our own retry policy, because PyGithub's
built-in retry sleeps where a test cannot see it: a primary rate limit (403/429 with
`X-RateLimit-Remaining: 0`) waits until `X-RateLimit-Reset`, a secondary limit (429, or 403 with
`Retry-After` or a message naming a rate limit) waits for `Retry-After`, and 5xx answers and dropped or
timed-out connections back off exponentially. The clock and the sleep are injectable. A request that
still fails ends the run with one line naming it (`GitHubError`), never a traceback.

A PR is linked to the issues its title and body close with GitHub's closing keywords ("Fixes #12"), as
GitHub links them; a bare mention ("see #12") links nothing.

The token is handed to PyGithub only. It is never put in a clone URL, a manifest or a message: errors
are re-raised with the token scrubbed, whatever the server echoed.

PRs are listed oldest first, so a resumed run can skip every PR number at or below the last one it
recorded for that repository (see `skip`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import github
import requests
from github import Auth, GithubException, RateLimitExceededException

from data_pipeline.schema import Candidate, instance_id
from data_pipeline.sources.refs import closing_issues
from swerl.errors import UserError
from swerl.git.clones import ensure_bare_clone

T = TypeVar("T")
MAX_ATTEMPTS = 8


class GitHubError(UserError):
    """A GitHub request that failed for good (message scrubbed of the token): shown as one line, since
    what is wrong (the network, the token, a limit) is the user's to fix, not a bug."""


class Retrier:
    """Runs one request with GitHub's rate-limit and 5xx rules; `sleep`/`now` are injectable for tests."""

    def __init__(
        self,
        token: str | None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
        max_wait: float = 3600.0,
    ) -> None:
        self._token = token
        self.sleep = sleep
        self.now = now
        self.max_wait = max_wait
        self.waits: list[float] = []

    def scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _wait_for(self, err: GithubException, attempt: int) -> float | None:
        """Seconds to wait before asking again, or None when asking again cannot help (404, 401, a 403
        that is no rate limit)."""
        headers = {k.lower(): v for k, v in (err.headers or {}).items()}
        message = str((err.data or {}).get("message", "") if isinstance(err.data, dict) else err.data).lower()
        limited = (
            isinstance(err, RateLimitExceededException)
            or err.status == 429
            or (err.status == 403 and ("retry-after" in headers or "rate limit" in message))
            or (err.status == 403 and headers.get("x-ratelimit-remaining") == "0")
        )
        if limited:
            if "retry-after" in headers:
                return float(headers["retry-after"])
            if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
                return max(1.0, float(headers["x-ratelimit-reset"]) - self.now() + 1)
            # GitHub's advice for a secondary limit without Retry-After: at least a minute, growing.
            return 60.0 * (attempt + 1)
        if err.status >= 500:
            return min(60.0, 2.0**attempt)
        return None

    def __call__(self, what: str, fn: Callable[[], T]) -> T:
        for attempt in range(MAX_ATTEMPTS):
            try:
                return fn()
            except GithubException as err:
                wait = self._wait_for(err, attempt)
                failure = f"HTTP {err.status}: {err.data}"
            except (requests.ConnectionError, requests.Timeout) as err:
                # Dropped connections, resets, DNS hiccups, read timeouts: the network, not the request.
                wait = min(60.0, 2.0**attempt)
                failure = f"connection failed ({type(err).__name__}: {err})"
            if wait is None or attempt == MAX_ATTEMPTS - 1:
                raise GitHubError(self.scrub(f"{what}: {failure}")) from None
            self.waits.append(min(wait, self.max_wait))
            self.sleep(min(wait, self.max_wait))
        raise AssertionError("unreachable")


def _iso(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value else ""


def _client(token: str | None, api_url: str) -> github.Github:
    """PyGithub with its own retry off (ours is `Retrier`) and no pacing between requests."""
    auth = Auth.Token(token) if token else None
    return github.Github(
        auth=auth, base_url=api_url, retry=None, per_page=100, seconds_between_requests=None, timeout=30
    )


class PullLookup:
    """Single PRs from the REST API, for sources whose records lack what the API knows (GH Archive's
    trimmed events): one request per PR, under the same retry policy as `GitHubSource`."""

    def __init__(self, token: str | None, api_url: str = "https://api.github.com", **retry: Any) -> None:
        self.retry = Retrier(token, **retry)
        self._gh = _client(token, api_url)
        self._repos: dict[str, Any] = {}

    def get(self, repo: str, number: int) -> dict[str, Any] | None:
        """merged, merge commit, title, body, author, creation time and number of commits of PR
        `repo#number`; None when the API does not know it (404, 410)."""
        try:
            if repo not in self._repos:
                self._repos[repo] = self.retry(repo, lambda: self._gh.get_repo(repo))
            pr = self.retry(f"{repo}#{number}", lambda: self._repos[repo].get_pull(number))
        except GitHubError as err:
            if "HTTP 404" in str(err) or "HTTP 410" in str(err):
                return None
            raise
        return {
            "merged": pr.merged_at is not None,
            "merge_commit": pr.merge_commit_sha or "",
            "title": pr.title or "",
            "body": pr.body or "",
            "author": (pr.user.login if pr.user else "") or "",
            "created_at": _iso(pr.created_at),
            "commits": int(pr.commits or 0),
        }


class GitHubSource:
    kind = "github"
    supports_skip = True

    def __init__(
        self,
        repos: list[str],
        cache: Path,
        *,
        token: str | None = None,
        api_url: str = "https://api.github.com",
        clone_url: str = "https://github.com/{repo}.git",
        max_prs: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.repos = list(repos)
        self.cache = cache
        self.api_url = api_url
        self.clone_url = clone_url
        self.max_prs = max_prs
        self.retry = Retrier(token, sleep, now)
        self._gh = _client(token, api_url)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "repos": self.repos, "api_url": self.api_url, "max_prs": self.max_prs}

    def prepare(self, state: dict[str, Any]) -> None:
        state.setdefault("started", True)

    def git_dir(self, repo: str) -> Path:
        return ensure_bare_clone(self.cache, repo, self.clone_url.format(repo=repo))

    def _issue_text(self, repo_obj: Any, repo: str, number: int, before: datetime | None) -> str | None:
        """Title, body and the comments made before the PR; None when #number is a PR, not an issue."""
        try:
            issue = self.retry(f"{repo}#{number}", lambda: repo_obj.get_issue(number))
        except GitHubError as err:
            if "HTTP 404" in str(err) or "HTTP 410" in str(err):
                return None
            raise
        if issue.pull_request is not None:
            return None
        parts = [issue.title or "", issue.body or ""]
        if issue.comments:
            comments = issue.get_comments()
            page = 0
            while batch := self.retry(f"{repo}#{number} comments", lambda p=page: comments.get_page(p)):
                for comment in batch:
                    if before is None or comment.created_at < before:
                        parts.append(comment.body or "")
                page += 1
        return "\n\n".join(part.strip() for part in parts if part and part.strip())

    def candidates(self, state: dict[str, Any], skip: dict[str, int] | None = None) -> Iterator[Candidate]:
        skip = skip or {}
        for repo in self.repos:
            repo_obj = self.retry(repo, lambda r=repo: self._gh.get_repo(r))
            pulls = repo_obj.get_pulls(state="closed", sort="created", direction="asc")
            page, seen = 0, 0
            while batch := self.retry(f"{repo} pulls page {page}", lambda p=page, pl=pulls: pl.get_page(p)):
                for pr in batch:
                    seen += 1
                    if self.max_prs is not None and seen > self.max_prs:
                        break
                    if pr.number <= skip.get(repo, 0):
                        continue
                    yield self._candidate(repo_obj, repo, pr)
                if self.max_prs is not None and seen > self.max_prs:
                    break
                page += 1

    def _candidate(self, repo_obj: Any, repo: str, pr: Any) -> Candidate:
        text = f"{pr.title or ''}\n{pr.body or ''}"
        numbers = [n for n in closing_issues(text, repo) if n != pr.number]
        issues, texts = [], []
        merged = pr.merged_at is not None
        commits = 0
        if merged:
            for number in numbers:
                body = self._issue_text(repo_obj, repo, number, pr.created_at)
                if body is not None:
                    issues.append(number)
                    texts.append(body)
        if issues:
            commits = self._commit_count(repo_obj, repo, pr.number)
        return Candidate(
            instance_id=instance_id(repo, pr.number),
            source=self.kind,
            repo=repo,
            pull_number=pr.number,
            merge_commit=pr.merge_commit_sha or "",
            problem_statement="\n\n".join(texts),
            problem_source="issue",
            issue_numbers=issues,
            created_at=_iso(pr.created_at),
            merged=merged,
            author=(pr.user.login if pr.user else "") or "",
            commits=commits,
        )

    def _commit_count(self, repo_obj: Any, repo: str, number: int) -> int:
        """How many commits PR `number` had. The PR listing leaves this out, but a rebase merge of several
        commits is told from a squash only by it (`extract.contents.pr_base`), so a PR that can become a
        row costs one more request; the others (no linked issue, unmerged) are dropped without it."""
        pr = self.retry(f"{repo}#{number}", lambda: repo_obj.get_pull(number))
        return int(pr.commits or 0)
