"""OpenAIEngine against a loopback fake of vLLM's completions endpoint (no network, no vLLM)."""

from __future__ import annotations

import json
import threading

import pytest
from fake_http import JsonPostServer

from swerl.errors import UserError
from swerl.rollout import RolloutEngine, SamplingParams
from swerl.rollout.openai_client import (
    CompletionServerError,
    OpenAIEngine,
    completion_request_body,
    detect_protocol,
    parse_completion_response,
)


class FakeServer(JsonPostServer):
    """Answers like vLLM: for prompt p and sample j the completion is [p[0] + j, 99], log-probs -0.5 each.

    `failures` is a list of HTTP statuses to answer first, one per request, before behaving.
    `style` is "token_ids" (new vLLM) or "token_id_strings" (return_tokens_as_token_ids only).
    """

    def __init__(self):
        super().__init__(self.answer)
        self.style = "token_ids"
        self.gets["/v1/models"] = {"object": "list", "data": [{"id": "tiny", "owned_by": "vllm"}]}

    def answer(self, body):
        choices = []
        for p, prompt in enumerate(body["prompt"]):
            for j in range(body["n"]):
                ids = [prompt[0] + j, 99]
                logprobs = {"token_logprobs": [-0.5, -0.25], "top_logprobs": None, "text_offset": [0, 1]}
                choice = {"index": p * body["n"] + j, "text": f"t{ids[0]}", "finish_reason": "stop"}
                if self.style == "token_ids":
                    choice["token_ids"] = ids
                    logprobs["tokens"] = ["a", "b"]
                else:
                    logprobs["tokens"] = [f"token_id:{t}" for t in ids]
                choice["logprobs"] = logprobs
                choices.append(choice)
        choices.reverse()  # servers may answer in any order; `index` is what counts
        return {"id": "cmpl-1", "object": "text_completion", "choices": choices}


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


def engine_for(server, **kwargs):
    kwargs.setdefault("backoff", 0.01)
    return OpenAIEngine(server.base_url, "tiny", **kwargs)


def test_grouping_across_chunks_and_request_contents(server):
    engine = engine_for(server, prompts_per_request=2, max_concurrency=3, api_key="k")
    assert isinstance(engine, RolloutEngine)
    prompts = [[10, 1], [20], [30, 3, 3], [40], [50]]
    params = SamplingParams(n=3, temperature=0.8, top_k=5, max_new_tokens=7, seed=4, stop_token_ids=(9,))
    groups = engine.generate(prompts, params)
    assert len(groups) == 5 and all(len(g) == 3 for g in groups)
    for prompt, group in zip(prompts, groups, strict=True):
        for j, c in enumerate(group):
            assert c.prompt_ids == prompt
            assert c.token_ids == [prompt[0] + j, 99]
            assert c.logprobs == [-0.5, -0.25]
            assert c.finish_reason == "stop" and c.text == f"t{prompt[0] + j}"
    assert len(server.requests) == 3  # 2 + 2 + 1 prompts
    assert server.requests[0]["path"] == "/v1/completions" and server.requests[0]["auth"] == "Bearer k"
    req = server.requests[0]["body"]
    assert req["model"] == "tiny" and req["n"] == 3 and req["max_tokens"] == 7 and req["top_k"] == 5
    assert req["seed"] == 4 and req["stop_token_ids"] == [9] and req["logprobs"] == 0
    assert req["return_token_ids"] and req["return_tokens_as_token_ids"]


def test_token_id_strings_fallback(server):
    server.style = "token_id_strings"
    groups = engine_for(server).generate([[7]], SamplingParams(n=2))
    assert [c.token_ids for c in groups[0]] == [[7, 99], [8, 99]]


def test_retries_on_5xx_and_429(server):
    server.failures = [503, 500, 429]
    groups = engine_for(server, max_retries=3).generate([[5]], SamplingParams())
    assert groups[0][0].token_ids == [5, 99]
    assert len(server.requests) == 4


def test_gives_up_after_max_retries(server):
    server.failures = [502] * 10
    with pytest.raises(CompletionServerError) as err:
        engine_for(server, max_retries=2).generate([[5]], SamplingParams())
    assert err.value.status == 502 and len(server.requests) == 3


def test_client_errors_are_not_retried(server):
    server.failures = [400]
    with pytest.raises(CompletionServerError, match="HTTP 400"):
        engine_for(server).generate([[5]], SamplingParams())
    assert len(server.requests) == 1


def test_connection_refused_is_retried_then_fails():
    engine = OpenAIEngine("http://127.0.0.1:9/v1", "m", max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(CompletionServerError, match="2 attempt"):
        engine.generate([[1]], SamplingParams())


def test_request_body_defaults_and_parse_errors():
    body = completion_request_body("m", [(1, 2)], SamplingParams(temperature=0), {"min_tokens": 2})
    assert body["prompt"] == [[1, 2]] and body["temperature"] == 0 and body["min_tokens"] == 2
    assert "top_k" not in body and "seed" not in body and "stop_token_ids" not in body
    no_ids = {"choices": [{"index": 0, "text": "x", "finish_reason": "stop", "logprobs": {"tokens": ["x"]}}]}
    with pytest.raises(CompletionServerError, match="re-tokenize"):
        parse_completion_response(no_ids, [[1]], 1)
    with pytest.raises(CompletionServerError, match="choices"):
        parse_completion_response({"choices": []}, [[1]], 1)
    aborted = {
        "choices": [
            {"index": 0, "token_ids": [1], "finish_reason": "abort", "logprobs": {"token_logprobs": [-1.0]}}
        ]
    }
    with pytest.raises(CompletionServerError, match="finish_reason"):
        parse_completion_response(aborted, [[1]], 1)
    with pytest.raises(NotImplementedError):
        OpenAIEngine("http://x/v1", "m").sync_weights(object())


class PlainServer(JsonPostServer):
    """Answers like `transformers serve`: a string prompt only, unknown fields refused with 422, `n` ignored
    (one choice per request), the text "<prompt>|<seed>" so the test sees what was asked."""

    KNOWN = frozenset({"model", "prompt", "max_tokens", "temperature", "top_p", "stream", "n", "seed"})

    def __init__(self):
        super().__init__(self.answer)
        self.gets["/v1/models"] = {"object": "list", "data": [{"id": "tiny", "owned_by": "huggingface"}]}

    def answer(self, body):
        unknown = set(body) - self.KNOWN
        if unknown or not isinstance(body["prompt"], str):
            raise AssertionError(f"a plain client sent {sorted(unknown)} / {body['prompt']!r}")
        text = f"{body['prompt']}|{body.get('seed')}"
        return {
            "object": "text_completion",
            "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
        }


class CharTokenizer:
    """Ids are code points: enough to check the prompt goes out as the decoded text."""

    def decode(self, ids, skip_special_tokens=False):
        assert skip_special_tokens is False  # the chat template's special tokens are part of the prompt
        return "".join(map(chr, ids))


@pytest.fixture
def plain():
    s = PlainServer()
    yield s
    s.close()


def test_plain_server_gets_text_prompts_and_repeated_requests_for_n(plain):
    engine = OpenAIEngine(plain.base_url, "tiny", tokenizer=CharTokenizer(), backoff=0.01)
    groups = engine.generate([[104, 105], [111]], SamplingParams(n=3, temperature=0.7, seed=5))
    assert engine.protocol == "openai" and plain.got[0] == "/v1/models"
    assert [c.text for c in groups[0]] == ["hi|5", "hi|6", "hi|7"]  # the server ignored n: asked again
    assert [c.text for c in groups[1]] == ["o|5", "o|6", "o|7"]
    c = groups[0][0]
    assert (
        c.token_ids == [] and c.logprobs == [] and c.prompt_ids == [104, 105] and c.finish_reason == "length"
    )
    assert plain.requests[0]["body"]["n"] == 3 and "n" not in plain.requests[-1]["body"]
    with pytest.raises(CompletionServerError, match="vLLM extensions"):
        engine.generate([[104]], SamplingParams(top_k=4))


def test_training_refuses_a_server_without_token_ids(plain):
    engine = OpenAIEngine(plain.base_url, "tiny", tokenizer=CharTokenizer(), require_token_ids=True)
    with pytest.raises(CompletionServerError, match=r"not a vLLM server.*token ids"):
        engine.generate([[104]], SamplingParams())
    assert plain.requests == []  # refused before sampling anything
    with pytest.raises(UserError, match="pass a tokenizer"):
        OpenAIEngine(plain.base_url, "tiny").generate([[104]], SamplingParams())


def test_vllm_is_detected_by_its_version_route_too(server):
    server.gets = {"/version": {"version": "0.33.0"}}  # /v1/models missing: a proxy that hides it
    assert detect_protocol(server.base_url, backoff=0.01) == "vllm"
    server.gets = {}
    assert detect_protocol(server.base_url, backoff=0.01) == "openai"


def test_forced_vllm_protocol_on_a_plain_server_says_what_to_do():
    refusing = JsonPostServer(
        lambda body: {}, failure=lambda auth: {"detail": "Unexpected fields: {'return_token_ids'}"}
    )
    refusing.failures = [422]
    try:
        engine = OpenAIEngine(refusing.base_url, "tiny", protocol="vllm")
        with pytest.raises(CompletionServerError, match=r"HTTP 422.*not vLLM; use protocol 'openai'"):
            engine.generate([[1]], SamplingParams())
        assert refusing.got == []  # a protocol given is not asked again
    finally:
        refusing.close()


def test_groups_arrive_as_each_request_is_answered(server):
    """The first request is held until the later ones have been handed over: their groups come first,
    and all of them are `generate`'s, each index once."""
    held = threading.Event()
    answer = server.reply

    def slow_first(body):
        if body["prompt"][0] == [10, 1]:
            assert held.wait(5), "the client waited for the first request before yielding later groups"
        return answer(body)

    server.reply = slow_first
    engine = engine_for(server, prompts_per_request=2, max_concurrency=3)
    prompts = [[10, 1], [20], [30, 3, 3], [40], [50]]
    params = SamplingParams(n=2, seed=1)
    arrived = []
    for i, group in engine.generate_groups(prompts, params):
        arrived.append((i, [c.token_ids for c in group]))
        if len(arrived) == 3:  # the second and third requests are in: release the first
            held.set()
    assert [i for i, _ in arrived[:3]] != [0, 1, 2] and sorted(i for i, _ in arrived) == [0, 1, 2, 3, 4]
    held.set()
    expected = [[c.token_ids for c in g] for g in engine.generate(prompts, params)]
    assert [tokens for _, tokens in sorted(arrived)] == expected


def test_plain_protocol_groups_are_indexed_by_prompt(plain):
    engine = OpenAIEngine(plain.base_url, "tiny", tokenizer=CharTokenizer(), backoff=0.01)
    arrived = dict(engine.generate_groups([[104, 105], [111], [97]], SamplingParams(n=2, seed=5)))
    assert {i: [c.text for c in g] for i, g in arrived.items()} == {
        0: ["hi|5", "hi|6"],
        1: ["o|5", "o|6"],
        2: ["a|5", "a|6"],
    }


def test_transformers_serve_is_asked_to_sample_when_the_temperature_says_so(plain):
    """`transformers serve` lists models with a `status` and decodes greedily unless `generation_config`
    says `do_sample`: the client says it for sampled requests only, with `top_k` (0: no filter)."""
    plain.KNOWN = PlainServer.KNOWN | {"generation_config"}
    plain.gets["/v1/models"] = {"data": [{"id": "tiny", "owned_by": "", "status": {"value": "loaded"}}]}
    engine = OpenAIEngine(plain.base_url, "tiny", tokenizer=CharTokenizer(), backoff=0.01)
    engine.generate([[104]], SamplingParams(n=2, temperature=0.7, seed=5))
    engine.generate([[104]], SamplingParams(temperature=0.7, top_k=4))
    engine.generate([[104]], SamplingParams(temperature=0))
    assert engine.protocol == "transformers"
    bodies = [r["body"] for r in plain.requests]
    assert [json.loads(b["generation_config"]) for b in bodies[:3]] == [
        {"do_sample": True, "top_k": 0},
        {"do_sample": True, "top_k": 0},
        {"do_sample": True, "top_k": 4},
    ]
    assert "generation_config" not in bodies[3]  # greedy: the server's own default


def test_a_server_refusing_generation_config_is_named_not_transformers_serve():
    refusing = JsonPostServer(
        lambda body: {}, failure=lambda auth: {"detail": "Unexpected fields: {'generation_config'}"}
    )
    refusing.failures = [422]
    try:
        engine = OpenAIEngine(refusing.base_url, "m", protocol="transformers", tokenizer=CharTokenizer())
        with pytest.raises(
            CompletionServerError, match=r"HTTP 422.*not transformers serve; use protocol 'openai'"
        ):
            engine.generate([[104]], SamplingParams(temperature=1.0))
    finally:
        refusing.close()
