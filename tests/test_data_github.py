"""The GitHub REST source against a loopback server that replays responses in the real API's JSON shape.

PyGithub talks to the server through `base_url`; the server injects a 502, a dropped connection, a
primary rate limit (403 with `X-RateLimit-Remaining: 0`) and secondary limits (429, and 403 with
`Retry-After`) mid-run, and the injected clock/sleep show the waits without sleeping.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pyarrow.parquet as pq
import pytest

from data_pipeline.config import MineConfig
from data_pipeline.run.runner import mine
from data_pipeline.sources.github import GitHubError, GitHubSource, Retrier
from data_pipeline.synthetic import edge_case_history
from swerl.edit_format import apply_patch_to_contents, canonical_answer
from swerl.reward import similarity_reward

TOKEN = "ghp_TopSecretToken0123456789"
NOW = 1_750_000_000.0
REPO = "acme/widgets"


class Replay:
    """Recorded responses keyed by path; `failures` maps a path to responses served before the real one."""

    def __init__(self) -> None:
        self.routes: dict[str, object] = {}
        self.failures: dict[str, list[tuple[int, dict, dict]]] = {}
        self.requests: list[tuple[str, str]] = []
        self.base = ""


def _handler(replay: Replay) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            url = urlparse(self.path)
            path = url.path.removeprefix("/api/v3")
            replay.requests.append((path, self.headers.get("Authorization", "")))
            pending = replay.failures.get(path)
            if pending:
                status, headers, body = pending.pop(0)
                if status == 0:  # the connection drops before any answer
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return None
                return self._send(status, body, headers)
            page = int(parse_qs(url.query).get("page", ["1"])[0])
            if path not in replay.routes:
                return self._send(
                    404, {"message": "Not Found", "documentation_url": "https://docs.github.com"}
                )
            body = replay.routes[path]
            if isinstance(body, list):
                body = body if page == 1 else []
            self._send(200, body)

        def _send(self, status: int, body: object, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pull(base: str, number: int, sha: str | None, title: str, body: str, login: str = "dev") -> dict:
    created = 1_700_000_000 + number * 1000
    return {
        "url": f"{base}/repos/{REPO}/pulls/{number}",
        "id": number,
        "number": number,
        "state": "closed",
        "title": title,
        "body": body,
        "user": {"login": login, "id": 1, "type": "User"},
        "created_at": _iso(created),
        "closed_at": _iso(created + 500),
        "merged_at": _iso(created + 500) if sha else None,
        "merge_commit_sha": sha,
        "html_url": f"https://github.com/{REPO}/pull/{number}",
    }


def _issue(base: str, number: int, title: str, body: str, comments: int, pr: bool = False) -> dict:
    issue = {
        "url": f"{base}/repos/{REPO}/issues/{number}",
        "id": number,
        "number": number,
        "title": title,
        "body": body,
        "state": "closed",
        "comments": comments,
        "user": {"login": "reporter", "id": 2, "type": "User"},
        "created_at": _iso(1_600_000_000),
    }
    if pr:
        issue["pull_request"] = {"url": f"{base}/repos/{REPO}/pulls/{number}"}
    return issue


@contextmanager
def replay_server(replay: Replay) -> Iterator[str]:
    """`replay` served on a loopback port, with `REPO`'s own page; yields the API's base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(replay))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = replay.base = f"http://127.0.0.1:{httpd.server_port}"
    replay.routes[f"/repos/{REPO}"] = {
        "id": 1,
        "name": "widgets",
        "full_name": REPO,
        "url": f"{base}/repos/{REPO}",
        "owner": {"login": "acme", "id": 3, "type": "Organization"},
    }
    try:
        yield base
    finally:
        httpd.shutdown()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("gh")
    prs = edge_case_history(root / "remotes" / "acme" / "widgets")
    replay = Replay()
    with replay_server(replay) as base:
        yield {"root": root, "replay": replay, "expected": _serve_history(replay, base, prs)}


def _serve_history(replay: Replay, base: str, prs: list) -> dict[int, str | None]:
    """Routes for `edge_case_history`'s PRs and their issues, with injected faults; returns each PR's
    expected drop reason (None: a row)."""
    pulls = []
    expected: dict[int, str | None] = {}
    kept = [pr for pr in prs if pr.expect is None]
    for pr in kept:
        issue = 1000 + pr.number
        pulls.append(_pull(base, pr.number, pr.sha, pr.title, f"This fixes #{issue}."))
        replay.routes[f"/repos/{REPO}/issues/{issue}"] = _issue(
            base, issue, f"Crash in widgets {pr.number}", f"Steps to reproduce {pr.number}", 2
        )
        created = 1_700_000_000 + pr.number * 1000
        replay.routes[f"/repos/{REPO}/issues/{issue}/comments"] = [
            {
                "id": 1,
                "body": "Same here, before the PR",
                "created_at": _iso(created - 10),
                "user": {"login": "a"},
            },
            {
                "id": 2,
                "body": "Thanks, fixed after the PR",
                "created_at": _iso(created + 900),
                "user": {"login": "b"},
            },
        ]
        expected[pr.number] = None
    sha = kept[0].sha
    pulls.append(_pull(base, 900, None, "Unmerged", "Fixes #1900"))
    pulls.append(_pull(base, 901, sha, "No issue", "Just a change"))
    pulls.append(_pull(base, 902, "de" * 20, "Force-pushed away", "Fixes #1902"))
    pulls.append(_pull(base, 903, sha, "Bump deps", "Fixes #1903", login="dependabot[bot]"))
    pulls.append(_pull(base, 904, sha, "Follow-up", "Closes #905"))
    # A mention is no link: GitHub links only what closing keywords name.
    pulls.append(_pull(base, 906, sha, "Tidy the loader", "Related to #1906, see also #1906."))
    replay.routes[f"/repos/{REPO}/issues/1906"] = _issue(base, 1906, "Loader", "It is untidy", 0)
    replay.routes[f"/repos/{REPO}/issues/1902"] = _issue(base, 1902, "Lost commit", "It vanished", 0)
    replay.routes[f"/repos/{REPO}/issues/1903"] = _issue(base, 1903, "Old dep", "Bump it", 0)
    replay.routes[f"/repos/{REPO}/issues/905"] = _issue(base, 905, "A PR", "not an issue", 0, pr=True)
    expected.update(
        {
            900: "not_merged",
            901: "no_linked_issue",
            902: "commit_missing",
            903: "bot_author",
            904: "no_linked_issue",
            906: "no_linked_issue",
        }
    )
    replay.routes[f"/repos/{REPO}/pulls"] = pulls
    for pull in pulls:  # one PR's own page adds its number of commits, which the listing lacks
        replay.routes[f"/repos/{REPO}/pulls/{pull['number']}"] = {**pull, "commits": 1}
    first_issue = f"/repos/{REPO}/issues/{1000 + kept[0].number}"
    replay.failures[f"/repos/{REPO}/pulls"] = [(502, {}, {"message": "Server Error"}), (0, {}, {})]
    secondary = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    replay.failures[f"/repos/{REPO}/issues/{1000 + kept[1].number}"] = [
        (429, {"Retry-After": "5", "X-RateLimit-Remaining": "4000"}, secondary),
        (403, {"Retry-After": "3", "X-RateLimit-Remaining": "3999"}, secondary),
    ]
    replay.failures[first_issue] = [
        (
            403,
            {
                "X-RateLimit-Limit": "60",
                "X-RateLimit-Remaining": "0",
                "X-RateLimit-Reset": str(int(NOW) + 120),
            },
            {
                "message": "API rate limit exceeded for 127.0.0.1.",
                "documentation_url": "https://docs.github.com",
            },
        ),
    ]
    return expected


def _source(server, **kw) -> GitHubSource:
    slept: list[float] = []
    source = GitHubSource(
        [REPO],
        server["root"] / "cache",
        token=TOKEN,
        api_url=server["replay"].base,
        clone_url=str(server["root"] / "remotes") + "/{repo}",
        sleep=slept.append,
        now=lambda: NOW,
        **kw,
    )
    return source


@pytest.fixture(scope="module")
def mined(server):
    source = _source(server)
    out = server["root"] / "out"
    summary = mine(out, source, MineConfig(shard_size=4), workers=1, progress=False)
    return {"out": out, "summary": summary, "source": source}


def _rows(folder: Path, prefix: str = "shard-") -> list[dict]:
    return [r for f in sorted(folder.glob(f"{prefix}*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_rate_limit_and_502_are_waited_out_not_slept(server, mined):
    waits = mined["source"].retry.waits
    assert 121.0 in waits  # until X-RateLimit-Reset, plus a second
    assert waits.count(1.0) == 1 and 2.0 in waits  # the 502, then the dropped connection: backoff
    assert 5.0 in waits and 3.0 in waits  # secondary limits: Retry-After, whatever is left of the primary
    assert all(auth == f"token {TOKEN}" for _, auth in server["replay"].requests)


def test_prs_are_linked_to_issues_and_filtered(server, mined):
    rows = {r["pull_number"]: r for r in _rows(mined["out"] / "data")}
    drops = {
        r["instance_id"]: r["reason"]
        for f in ("extract", "collect", "dedup", "render")
        for r in _rows(mined["out"] / f, "drops-")
    }
    for number, reason in server["expected"].items():
        if reason is None:
            assert number in rows, drops.get(f"acme__widgets-{number}")
        else:
            assert drops[f"acme__widgets-{number}"] == reason
    for row in rows.values():
        assert row["problem_source"] == "issue"
        assert row["issue_numbers"] == [1000 + row["pull_number"]]
        assert "Steps to reproduce" in row["problem_statement"]
        assert "before the PR" in row["problem_statement"]
        assert "after the PR" not in row["problem_statement"]
        context = {f["path"]: f["content"] for f in row["code_context"]}
        oracle = {f["path"]: f["content"] for f in row["oracle_new_content"]}
        assert (
            apply_patch_to_contents({p: context[p] for p in oracle if p in context}, row["oracle_patch"])
            == oracle
        )
        assert similarity_reward(canonical_answer(context, oracle), context, oracle).reward == 1.0


def test_token_never_written_anywhere(server, mined):
    for path in mined["out"].rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    for path in (server["root"] / "cache").rglob("config"):
        assert TOKEN not in path.read_text(errors="replace")


def test_errors_are_scrubbed_of_the_token(server):
    server["replay"].failures[f"/repos/{REPO}"] = [(401, {}, {"message": f"Bad credentials {TOKEN}"})]
    source = _source(server)
    with pytest.raises(GitHubError) as info:
        list(source.candidates({}))
    assert TOKEN not in str(info.value) and "***" in str(info.value)


def test_cli_never_prints_the_token(server, tmp_path):
    server["replay"].failures[f"/repos/{REPO}"] = [(401, {}, {"message": f"Bad credentials {TOKEN}"})] * 8
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "swerl",
            "data",
            "mine",
            "--github",
            REPO,
            "--api-url",
            server["replay"].base,
            "--out",
            str(tmp_path / "out"),
            "--clones",
            str(tmp_path / "c"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env={"GITHUB_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    server["replay"].failures.pop(f"/repos/{REPO}", None)
    assert proc.returncode != 0
    assert TOKEN not in proc.stdout + proc.stderr
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes()


def test_resume_skips_recorded_prs(server):
    source = _source(server)
    before = len(server["replay"].requests)
    numbers = [c.pull_number for c in source.candidates({}, skip={REPO: 17})]
    assert numbers and min(numbers) > 17
    asked = [p for p, _ in server["replay"].requests[before:] if "/issues/" in p]
    assert all(
        int(p.split("/")[5]) - 1000 > 17 or int(p.split("/")[5]) >= 1900 or p.endswith("/905") for p in asked
    )


def test_retrier_backs_off_on_secondary_limits():
    from github import GithubException

    slept: list[float] = []
    retry = Retrier(TOKEN, sleep=slept.append, now=lambda: NOW)
    calls = iter(
        [
            GithubException(
                403,
                {"message": "You have exceeded a secondary rate limit"},
                {"Retry-After": "7", "X-RateLimit-Remaining": "0"},
            ),
            "ok",
        ]
    )

    def fn() -> str:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    assert retry("x", fn) == "ok" and slept == [7.0]


def _raising(*items: object):
    calls = iter(items)

    def fn() -> object:
        item = next(calls)
        if isinstance(item, Exception):
            raise item
        return item

    return fn


def test_a_forbidden_request_is_not_retried_and_a_dead_network_ends_in_one_line():
    import requests
    from github import GithubException

    slept: list[float] = []
    retry = Retrier(TOKEN, sleep=slept.append, now=lambda: NOW)
    forbidden = GithubException(403, {"message": "Resource not accessible by integration"}, {})
    with pytest.raises(GitHubError, match="HTTP 403"):
        retry("x", _raising(forbidden))
    assert slept == []
    # A secondary limit without Retry-After: a minute, then more.
    limit = GithubException(403, {"message": "You have exceeded a secondary rate limit"}, {})
    assert retry("x", _raising(limit, limit, "ok")) == "ok" and slept == [60.0, 120.0]
    slept.clear()
    down = requests.ConnectionError(f"Max retries exceeded with url: /?access_token={TOKEN}")
    with pytest.raises(GitHubError) as failed:
        retry("acme/widgets pulls page 3", _raising(*[down] * 8))
    message = str(failed.value)
    assert message.startswith("acme/widgets pulls page 3: connection failed (ConnectionError: ")
    assert TOKEN not in message and "\n" not in message
    assert slept == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0]
