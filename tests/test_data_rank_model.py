"""Context ranking by a chat model (`data_pipeline/context/model_rank.py`) against a loopback fake of the chat
completions endpoint (no network): the model's picks lead the extras, its other words are ignored, a
busy server is retried, a dead one stops the run, and the API key goes nowhere but the request header."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_http import JsonPostServer

from data_pipeline.config import ContextConfig, FilterConfig, MineConfig
from data_pipeline.context import model_rank
from data_pipeline.context.builder import ContextBuilder
from data_pipeline.context.model_rank import RankRequest, RankServerError, file_layout, picks_from_answer
from data_pipeline.context.tokens import estimate_tokens
from data_pipeline.run.runner import mine
from data_pipeline.sources.local import LocalSource
from data_pipeline.synthetic import HistoryBuilder, random_fix
from swerl.cli.main import main as swerl_main
from swerl.git.objects import ObjectReader
from swerl.retrieval.answers import paths_in_answer
from swerl.rollout.openai_client import ChatClient, CompletionServerError

KEY_ENV = "SWERL_TEST_RANK_KEY"
KEY = "sk-test-DO-NOT-LEAK-4242"
MADE_UP = "pkg/not_in_the_repo.py"


class FakeChat(JsonPostServer):
    """`POST /v1/chat/completions`: answers `choices[0].message.content = answer(body)`. Failure answers
    echo the Authorization header, as a careless proxy might."""

    def __init__(self, answer: Callable[[dict], str | None]) -> None:
        def reply(body: dict) -> dict:
            return {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer(body)}}]}

        super().__init__(reply, lambda auth: {"error": f"overloaded; your headers: Authorization: {auth}"})


def _section(content: str, tag: str) -> list[str]:
    found = re.search(f"<{tag}>\n(.*?)\n</{tag}>", content, re.DOTALL)
    assert found, f"no <{tag}> in the prompt"
    return found.group(1).split("\n")


def last_of_layout(body: dict) -> str:
    """The model of test (a): names a changed file, a made-up path, then the last file of the layout."""
    content = body["messages"][0]["content"]
    layout = [line for line in _section(content, "other_files") if not line.startswith("(")]
    changed = _section(content, "changed_files")
    return f"Sure.\n```\n{changed[0]}\n./{MADE_UP}\n./{layout[-1]}\n```\n"


@pytest.fixture
def fake():
    servers: list[FakeChat] = []

    def start(answer: Callable[[dict], str | None] = last_of_layout) -> FakeChat:
        servers.append(FakeChat(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rank")
    builder = HistoryBuilder(seed=5, files=10)
    for _ in range(8):
        random_fix(builder)
    builder.write(root / "repo")
    return root


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(model_rank, "CLIENT_BACKOFF", 0.01)
    monkeypatch.setattr(model_rank, "CLIENT_RETRIES", 2)
    monkeypatch.setenv(KEY_ENV, KEY)


def ranked_config(server: FakeChat | None, **context) -> MineConfig:
    rank = {}
    if server is not None:
        rank = {"rank_model": "picker", "rank_base_url": server.base_url, "rank_api_key_env": KEY_ENV}
    return MineConfig(shard_size=3, context=ContextConfig(max_extra_files=1, **rank, **context))


def run_mine(history: Path, out: str, config: MineConfig):
    source = LocalSource(history / "repo", history / "cache", repo="acme/rank")
    return mine(history / out, source, config, workers=1, progress=False)


def rows_of(out: Path) -> list[dict]:
    return [
        row for shard in sorted((out / "data").glob("*.parquet")) for row in pq.read_table(shard).to_pylist()
    ]


def extras_of(row: dict) -> list[str]:
    return [c["path"] for c in row["code_context"] if c["path"] not in row["modified_files"]]


def test_the_models_pick_is_the_first_extra_and_its_other_words_are_ignored(history, fake):
    server = fake()
    summary = run_mine(history, "ranked", ranked_config(server))
    baseline = run_mine(history, "plain", ranked_config(None))
    rows = rows_of(history / "ranked")
    without_model = {row["instance_id"]: extras_of(row) for row in rows_of(history / "plain")}
    assert rows and summary.rows == baseline.rows == len(rows) and summary.model_no_picks == 0
    assert len(server.requests) == len(rows)  # one request per row, none for dropped rows
    # Every source file is under pkg/, so the last of every layout is the one test file.
    picks = {_section(r["body"]["messages"][0]["content"], "other_files")[-1] for r in server.requests}
    assert picks == {"tests/test_basic.py"}
    for row in rows:
        # max_extra_files=1: the single extra is the first of the ranking, which is the model's pick.
        assert extras_of(row) == ["tests/test_basic.py"]
        assert without_model[row["instance_id"]] != ["tests/test_basic.py"]  # not the tiers' first
        assert MADE_UP not in json.dumps(row)


def test_requests_carry_the_key_greedy_seeded_and_the_issue(history, fake):
    server = fake()
    run_mine(history, "request", ranked_config(server, seed=7))
    problems = [row["problem_statement"] for row in rows_of(history / "request")]
    for request in server.requests:
        body = request["body"]
        assert request["path"] == "/v1/chat/completions" and request["auth"] == f"Bearer {KEY}"
        assert body["model"] == "picker" and body["temperature"] == 0 and body["seed"] == 7
        assert body["max_tokens"] > 0 and body["messages"][0]["role"] == "user"
    issues = ["\n".join(_section(r["body"]["messages"][0]["content"], "issue")) for r in server.requests]
    assert problems and sorted(issues) == sorted(problem.strip() for problem in problems)
    manifest = (history / "request" / "manifest.json").read_text()
    assert KEY not in manifest and KEY_ENV in manifest and '"rank_model":"picker"' in manifest


def test_a_busy_server_is_retried(history, fake):
    server = fake()
    server.failures = [429, 503]
    summary = run_mine(history, "busy", ranked_config(server))
    assert summary.rows > 0 and len(server.requests) == summary.rows + 2


def test_a_dead_server_stops_the_run_without_leaking_the_key(history, fake, capsys):
    server = fake()
    server.failures = [500] * 1000
    out = history / "dead"
    argv = ["mine", "--local", str(history / "repo"), "--repo-name", "acme/rank"]
    argv += ["--clones", str(history / "cache"), "--out", str(out), "--workers", "1", "--quiet"]
    argv += ["--rank-model", "picker", "--rank-base-url", server.base_url, "--rank-api-key-env", KEY_ENV]
    assert swerl_main(["data", *argv]) == 1
    error = capsys.readouterr().err
    assert "HTTP 500 after 3 attempt(s)" in error and "drop --rank-model and use a new --out" in error
    assert "resumable" in error and "Bearer ***" in error
    assert KEY not in error and KEY not in (out / "manifest.json").read_text()
    assert not list((out / "data").glob("*.parquet"))
    # The same error from the library, for callers that do not go through the CLI.
    with pytest.raises(RankServerError) as err:
        run_mine(history, "dead2", ranked_config(server))
    assert KEY not in str(err.value)


def test_answers_without_a_usable_path_leave_the_row_to_the_tiers(history, fake):
    answers = iter(["I would not know.", None, "```\n```"])
    server = fake(lambda body: next(answers, "``` nothing ```"))
    summary = run_mine(history, "empty", ranked_config(server))
    plain = run_mine(history, "plain-empty", ranked_config(None))
    assert summary.rows == plain.rows and summary.model_no_picks == summary.rows
    assert "named no usable file" in summary.report()
    strip = ("prompt", "code_context")
    for ranked, unranked in zip(rows_of(history / "empty"), rows_of(history / "plain-empty"), strict=True):
        assert {k: ranked[k] for k in strip} == {k: unranked[k] for k in strip}


def test_the_builder_tags_the_models_picks_and_keeps_the_tiers_after_them(history):
    repo = history / "repo"
    reader = ObjectReader(repo / ".git")
    try:
        config = ContextConfig(max_extra_files=4)
        builder = ContextBuilder(reader, config, FilterConfig(), estimate_tokens)
        shas = dict(reader.matching_files("HEAD", "all", lambda _: True))
        modified_path = min(p for p in shas if p.startswith("pkg/"))
        modified = {modified_path: reader.blob(shas[modified_path]).decode()}
        request = builder.rank_request("HEAD", "empty input", modified, [])
        assert request is not None and modified_path not in request.candidates
        assert "tests/test_basic.py" in request.candidates
        plain = builder.build("x-1", "HEAD", "empty input", modified, [])
        picks = ["tests/test_basic.py", plain.extra[0]]
        ranked = builder.build("x-1", "HEAD", "empty input", modified, [], picks)
    finally:
        reader.close()
    assert "tests/test_basic.py" not in plain.extra
    assert ranked.extra[:2] == picks and ranked.reasons["tests/test_basic.py"] == "model"
    assert ranked.reasons[picks[1]] == "model"
    assert ranked.extra[2:] == [p for p in plain.extra if p != picks[1]][:2]


def test_shared_parser_and_picks():
    answer = "Here:\n```text\n./pkg/a.py\npkg/b.py (the parser)\npkg/a.py\n```\nalso pkg/c.py"
    assert paths_in_answer(answer) == ["pkg/a.py", "pkg/b.py"]
    assert paths_in_answer("pkg/c.py, then lib/d.txt.") == ["pkg/c.py", "lib/d.txt"]
    request = RankRequest("issue", ("pkg/a.py", "pkg/b.py", "pkg/c.py"), ("pkg/b.py",))
    answer = "```\npkg/b.py\nnope/x.py\npkg/c.py\npkg/a.py\n```"
    assert picks_from_answer(answer, request, 5) == ["pkg/c.py", "pkg/a.py"]
    assert picks_from_answer(answer, request, 1) == ["pkg/c.py"]
    assert picks_from_answer("no idea", request, 5) == []


def test_layout_puts_the_changed_directories_first_and_is_capped():
    candidates = [f"lib/m{i:03}.py" for i in range(400)] + ["pkg/z.py", "pkg/a.py"]
    text = file_layout(candidates, ["pkg/fixed.py"], max_chars=500)
    lines = text.split("\n")
    assert len(text) <= 500 and lines[:3] == ["pkg/a.py", "pkg/z.py", "lib/m000.py"]
    assert re.fullmatch(r"\((\d+) more files not shown\)", lines[-1])
    assert int(lines[-1][1:].split()[0]) + len(lines) - 1 == len(candidates)
    assert file_layout(["b.py", "a.py"], []) == "a.py\nb.py"


def test_chat_client_keeps_order_retries_and_reports_protocol_errors(fake):
    in_flight = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def slow_echo(body):
        with lock:
            in_flight["now"] += 1
            in_flight["peak"] = max(in_flight["peak"], in_flight["now"])
        time.sleep(0.02 * (int(body["messages"][0]["content"]) % 3))
        with lock:
            in_flight["now"] -= 1
        return "echo " + body["messages"][0]["content"]

    server = fake(slow_echo)
    client = ChatClient(server.base_url, "m", backoff=0.01, max_retries=1)
    server.failures = [429]
    conversations = [[{"role": "user", "content": str(i)}] for i in range(9)]
    answers = client.complete_many(conversations, max_tokens=5, max_concurrency=3)
    assert answers == [f"echo {i}" for i in range(9)] and in_flight["peak"] <= 3
    assert "seed" not in server.requests[0]["body"] and server.requests[0]["auth"] is None
    server.failures = [500, 500]
    with pytest.raises(CompletionServerError, match="HTTP 500 after 2 attempt"):
        client.complete(conversations[0], max_tokens=5)
    silent = fake(lambda body: None)
    assert ChatClient(silent.base_url, "m").complete(conversations[0], max_tokens=5) == ""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rank_model": "m"}, "both a model and a base URL"),
        ({"rank_base_url": "http://x/v1"}, "both a model and a base URL"),
        ({"rank_model": "m", "rank_base_url": "http://x/v1", "rank_top_k": 0}, "at least 1"),
        ({"rank_model": "m", "rank_base_url": "http://x/v1", "rank_api_key_env": ""}, "environment variable"),
    ],
)
def test_config_validation(options, message):
    with pytest.raises(ValueError, match=message):
        ContextConfig(**options)


def test_the_manifest_records_the_rank_options_but_not_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-recognisable-secret")
    ranked = replace(MineConfig(), context=ContextConfig(rank_model="m", rank_base_url="http://x/v1"))
    assert ranked.record()["context"]["rank_api_key_env"] == "OPENAI_API_KEY"
    assert "sk-recognisable-secret" not in json.dumps(ranked.record())
    assert model_rank.ModelRanker.from_config(ContextConfig()) is None
