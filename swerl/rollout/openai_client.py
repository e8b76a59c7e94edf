"""`RolloutEngine` over an OpenAI-compatible completions server (`vllm serve`, SGLang, `transformers serve`,
OpenAI's own API, ...).

For evaluation and serving against a model that runs elsewhere. Two protocols, because only vLLM gives
back what training needs:

- "vllm": prompts go out as token ids (`prompt: list[int]` or a list of those), and sampled ids come
  back as ids: vLLM returns them with `return_token_ids: true` (`choices[i].token_ids`), older vLLM with
  `return_tokens_as_token_ids: true` (logprob tokens spelled `token_id:123`). Both are requested; a
  server that returns neither is refused rather than re-tokenized. Log-probs are `logprobs.token_logprobs`
  (`logprobs: 0` asks for the sampled token's only); which distribution they describe is the server's
  choice (vLLM: `--logprobs-mode`, by default the raw logits before temperature).
- "openai": the plain OpenAI completions API, which every compatible server takes and which refuses
  unknown fields (OpenAI, `transformers serve`: HTTP 422). Prompts go out as text (the ids decoded with
  the model's tokenizer, special tokens kept), one prompt per request because some servers take no list,
  and only text comes back: `Completion.token_ids` and `logprobs` are empty. Good for evaluation
  (Agentless needs text), not for training, which asks for `require_token_ids` and is refused here.
- "transformers": "openai" as `transformers serve` needs it. That server decodes greedily whatever the
  `temperature` unless the request's `generation_config` (a JSON string, a field of its own) says
  `do_sample`: without it every "sample" of a prompt is the same greedy answer. A sampled request sends
  `{"do_sample": true, "top_k": ...}` there (`top_k` 0 included: unset, the model's own default, often 50,
  would filter).

"auto" (the default) asks the server once which it is (`detect_protocol`).

Standard library only (urllib + threads): requests go out in chunks of `prompts_per_request`, a few at a
time, and connection errors, 429 and 5xx answers are retried with exponential backoff; other 4xx
answers are the caller's mistake and fail at once (`post_json`).

`ChatClient` is the text counterpart over the chat completions endpoint, which every hosted and
self-hosted OpenAI-compatible server offers and which needs no local tokenizer: for side tasks that
want a model's words, not its token ids (the data pipeline's context ranking).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from itertools import accumulate
from typing import Any, Literal, TypeVar

from swerl.errors import UserError
from swerl.rollout.base import Completion, FinishReason, SamplingParams

_TOKEN_ID_PREFIX = "token_id:"

Protocol = Literal["auto", "vllm", "openai", "transformers"]
Resolved = Literal["vllm", "openai", "transformers"]
PROTOCOLS: tuple[str, ...] = ("auto", "vllm", "openai", "transformers")
# The protocols that send text and get text back.
TEXT_PROTOCOLS = ("openai", "transformers")
# The request fields only vLLM knows; a server that names one of them in a refusal is not vLLM.
_VLLM_FIELDS = ("return_token_ids", "return_tokens_as_token_ids", "skip_special_tokens")

_T = TypeVar("_T")
_R = TypeVar("_R")


class CompletionServerError(UserError, RuntimeError):
    """The server refused a request, or kept failing after all retries, or answered malformed JSON."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def completion_request_body(
    model: str, prompts: Sequence[Sequence[int]], params: SamplingParams, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body for `POST /completions`. Options the plain OpenAI API lacks are sent only when set.

    `top_k`, `stop_token_ids`, `return_token_ids` and `return_tokens_as_token_ids` are vLLM extensions
    (servers that do not know them ignore or reject them; `extra` can add or override any field).
    `temperature` 0 is greedy on every compatible server.
    """
    body: dict[str, Any] = {
        "model": model,
        "prompt": [[int(t) for t in p] for p in prompts],
        "n": params.n,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "logprobs": 0,
        "echo": False,
        "stream": False,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "skip_special_tokens": True,
    }
    if params.top_k > 0:
        body["top_k"] = params.top_k
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop_token_ids:
        body["stop_token_ids"] = list(params.stop_token_ids)
    body.update(extra or {})
    return body


def plain_completion_request_body(
    model: str,
    prompt: str,
    params: SamplingParams,
    n: int,
    seed: int | None,
    extra: dict[str, Any] | None = None,
    *,
    transformers: bool = False,
) -> dict[str, Any]:
    """The body for `POST /completions` in the plain OpenAI API: one text prompt, fields OpenAI documents.

    vLLM's `top_k` and `stop_token_ids` have no plain equivalent and are refused rather than dropped,
    since dropping them would sample from another distribution than the caller asked for. With
    `transformers` (`transformers serve`), a sampled request also carries `generation_config`, that
    server's switch to sampling, which holds `top_k` too.
    """
    sampled = transformers and params.temperature > 0
    if (params.top_k > 0 and not sampled) or params.stop_token_ids:
        raise CompletionServerError(
            "top_k and stop_token_ids are vLLM extensions; this server speaks the plain OpenAI API"
        )
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stream": False,
    }
    if n > 1:
        body["n"] = n
    if seed is not None:
        body["seed"] = seed
    if sampled:
        body["generation_config"] = json.dumps({"do_sample": True, "top_k": params.top_k})
    body.update(extra or {})
    return body


def parse_plain_choices(response: dict[str, Any], prompt_ids: Sequence[int]) -> list[Completion]:
    """Text-only completions from a plain OpenAI answer, in `index` order (token ids and log-probs empty)."""
    out = []
    for choice in sorted(response.get("choices") or [], key=lambda c: c.get("index", 0)):
        reason = choice.get("finish_reason")
        if reason not in ("stop", "length"):
            raise CompletionServerError(f"unexpected finish_reason {reason!r}")
        text = choice.get("text")
        if not isinstance(text, str):
            raise CompletionServerError("the server answered a choice without text")
        out.append(Completion(list(prompt_ids), [], [], reason, text))
    if not out:
        raise CompletionServerError("the server answered no choices")
    return out


def _choice_token_ids(choice: dict[str, Any]) -> list[int]:
    if choice.get("token_ids") is not None:
        return [int(t) for t in choice["token_ids"]]
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if tokens is not None and all(isinstance(t, str) and t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
        return [int(t[len(_TOKEN_ID_PREFIX) :]) for t in tokens]
    raise CompletionServerError(
        "the server returned no sampled token ids (it needs vLLM's return_token_ids or "
        "return_tokens_as_token_ids); refusing to re-tokenize text"
    )


def parse_completion_response(
    response: dict[str, Any], prompts: Sequence[Sequence[int]], n: int
) -> list[list[Completion]]:
    """Group `choices` by prompt: choice `index` i belongs to prompt i // n (the OpenAI convention)."""
    choices = sorted(response.get("choices", []), key=lambda c: c["index"])
    if len(choices) != len(prompts) * n:
        raise CompletionServerError(f"expected {len(prompts) * n} choices, got {len(choices)}")
    groups: list[list[Completion]] = [[] for _ in prompts]
    for choice in choices:
        prompt_index = choice["index"] // n
        token_ids = _choice_token_ids(choice)
        logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
        if logprobs is None or len(logprobs) != len(token_ids) or any(lp is None for lp in logprobs):
            raise CompletionServerError("the server returned no log-prob for some sampled tokens")
        reason = choice.get("finish_reason")
        if reason not in ("stop", "length"):
            raise CompletionServerError(f"unexpected finish_reason {reason!r}")
        finish: FinishReason = reason
        groups[prompt_index].append(
            Completion(
                prompt_ids=[int(t) for t in prompts[prompt_index]],
                token_ids=token_ids,
                logprobs=[float(lp) for lp in logprobs],
                finish_reason=finish,
                text=choice.get("text") or "",
            )
        )
    return groups


def post_json(
    url: str,
    body: dict[str, Any] | None,
    *,
    api_key: str | None = None,
    timeout: float = 600.0,
    max_retries: int = 5,
    backoff: float = 0.5,
    max_backoff: float = 30.0,
) -> dict[str, Any]:
    """POST `body` as JSON (GET when it is None) and return the decoded answer, retrying what a busy or
    restarting server causes.

    Connection errors, timeouts, 429 and 5xx are retried up to `max_retries` times, waiting `backoff`
    seconds doubled on each retry (at most `max_backoff`); any other 4xx is the caller's mistake (a wrong
    model name, an oversized request) and fails at once, as does a 200 that is not JSON. Every error is a
    `CompletionServerError` whose message names the URL, the attempts and what the server said, with
    `api_key` replaced by `***`: a server or proxy may echo request headers in its error page.
    """
    data = None if body is None else json.dumps(body).encode("utf-8")
    method = "GET" if data is None else "POST"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    attempt = 0
    while True:
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                payload = response.read()
            try:
                return json.loads(payload)
            except json.JSONDecodeError as exc:
                raise CompletionServerError(f"the server answered invalid JSON: {exc}") from exc
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:2000]
            retriable = exc.code == 429 or exc.code >= 500
            if not retriable or attempt >= max_retries:
                message = (
                    f"{method} {url} failed with HTTP {exc.code} after {attempt + 1} attempt(s): {detail}"
                )
                raise CompletionServerError(_scrub(message, api_key), status=exc.code) from exc
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            if attempt >= max_retries:
                message = f"{method} {url} failed after {attempt + 1} attempt(s): {exc}"
                raise CompletionServerError(_scrub(message, api_key)) from exc
        time.sleep(min(max_backoff, backoff * 2**attempt))
        attempt += 1


def _scrub(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def map_in_threads(fn: Callable[[_T], _R], items: Sequence[_T], max_concurrency: int) -> list[_R]:
    """`[fn(item) for item in items]` with up to `max_concurrency` calls in flight, results in input order.

    The first failure (in input order) is raised once the calls in flight have ended; the calls not
    started yet are cancelled, so a dead server is not retried once per remaining item. One item runs
    inline: a thread would only add its start-up.
    """
    if len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=max(1, min(max_concurrency, len(items)))) as pool:
        futures = [pool.submit(fn, item) for item in items]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def completed_in_threads(
    fn: Callable[[_T], _R], items: Sequence[_T], max_concurrency: int
) -> Iterator[tuple[int, _R]]:
    """`(i, fn(items[i]))` for every item as each call returns, up to `max_concurrency` in flight.

    The first failure to happen is raised once the calls in flight have ended; the calls not started yet
    are cancelled, also when the caller stops iterating early. One item runs inline, as in
    `map_in_threads`.
    """
    if len(items) <= 1:
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    with ThreadPoolExecutor(max_workers=max(1, min(max_concurrency, len(items)))) as pool:
        futures = {pool.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()


def detect_protocol(base_url: str, **retry: Any) -> Resolved:
    """ "vllm" when the server at `base_url` (e.g. `http://h:8000/v1`) is vLLM, "transformers" when it is
    `transformers serve`, else "openai".

    vLLM says so in two places other servers lack: `GET /v1/models` lists its models as `owned_by:
    "vllm"`, and `GET /version` (at the server's root) answers `{"version": ...}`. `transformers serve`
    lists each model with a `status` object (`{"value": "loaded"}`), a field the OpenAI API lacks. A
    server that cannot be reached raises `CompletionServerError` after `post_json`'s retries (it may still
    be starting); any HTTP refusal of these reads only means "not vLLM". `retry` is `post_json`'s keyword
    arguments.
    """
    base = base_url.rstrip("/")
    try:
        models = post_json(base + "/models", None, **retry)
    except CompletionServerError as err:
        if err.status is None:
            raise
    else:
        data = models.get("data") if isinstance(models, dict) else None
        if any(isinstance(m, dict) and m.get("owned_by") == "vllm" for m in data or []):
            return "vllm"
        if any(isinstance(m, dict) and isinstance(m.get("status"), dict) for m in data or []):
            return "transformers"
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    try:
        version = post_json(root + "/version", None, **{**retry, "max_retries": 0})
    except CompletionServerError:
        return "openai"
    return "vllm" if isinstance(version, dict) and "version" in version else "openai"


class _JsonClient:
    """What the clients below share: an endpoint URL, a key and a retry policy, used by `_post`."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_backoff: float,
    ) -> None:
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        return post_json(
            self.url,
            body,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=self.max_retries,
            backoff=self.backoff,
            max_backoff=self.max_backoff,
        )


class OpenAIEngine(_JsonClient):
    """Samples from a completions server; `base_url` ends before `/completions` (e.g. `http://h:8000/v1`).

    `protocol` is "vllm" (token ids in and out), "openai" (text in and out; needs `tokenizer` to turn
    the prompt ids into text), "transformers" ("openai" with `transformers serve`'s switch to sampling)
    or "auto": asked of the server at the first `generate`. With
    `require_token_ids` (training: the trainer scores the exact sampled ids) a server that is not vLLM
    is refused with that reason before any sampling. Requests hold up to `prompts_per_request` prompts
    (one in the plain protocol), at most `max_concurrency` in flight. A fixed `SamplingParams.seed` is
    sent unchanged with every request (vLLM then seeds each prompt with it).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        prompts_per_request: int = 16,
        max_concurrency: int = 4,
        extra_body: dict[str, Any] | None = None,
        protocol: Protocol = "auto",
        tokenizer: Any = None,
        require_token_ids: bool = False,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise UserError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        self.base_url = base_url.rstrip("/")
        super().__init__(self.base_url + "/completions", api_key, timeout, max_retries, backoff, max_backoff)
        self.model = model
        self.prompts_per_request = max(1, prompts_per_request)
        self.max_concurrency = max(1, max_concurrency)
        self.extra_body = dict(extra_body or {})
        self.protocol: Protocol = protocol
        self.tokenizer = tokenizer
        self.require_token_ids = require_token_ids

    def resolved_protocol(self) -> Resolved:
        """The protocol in use, asking the server once when it is "auto"; refuses what cannot work."""
        if self.protocol == "auto":
            retry = {
                "api_key": self.api_key,
                "timeout": min(self.timeout, 30.0),
                "max_retries": self.max_retries,
            }
            self.protocol = detect_protocol(self.base_url, **retry, backoff=self.backoff)
        if self.protocol in TEXT_PROTOCOLS and self.require_token_ids:
            raise CompletionServerError(
                f"{self.base_url} is not a vLLM server: sampling for training needs the sampled token ids, "
                "which only vLLM's return_token_ids extension returns (serve the model with vllm serve, "
                "or pass protocol 'vllm' if it is vLLM behind a proxy)"
            )
        if self.protocol in TEXT_PROTOCOLS and self.tokenizer is None:
            raise UserError(
                f"{self.base_url} speaks the plain OpenAI API, which takes text: pass a tokenizer"
            )
        return self.protocol

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt, grouped and in input order, however the requests were split."""
        send, requests = self._requests(prompts, params)
        answers = map_in_threads(send, requests, self.max_concurrency)
        return [group for answered in answers for group in answered]

    def generate_groups(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> Iterator[tuple[int, list[Completion]]]:
        """`(i, prompt i's completions)` as each request is answered: the requests and their bodies are
        `generate`'s, so the groups are too; only the order in which they arrive differs."""
        send, requests = self._requests(prompts, params)
        starts = list(accumulate((len(chunk) for chunk in requests), initial=0))
        for r, answered in completed_in_threads(send, requests, self.max_concurrency):
            yield from enumerate(answered, start=starts[r])

    def _requests(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams
    ) -> tuple[Callable[[list[Sequence[int]]], list[list[Completion]]], list[list[Sequence[int]]]]:
        """The function that sends one request and the requests' prompts: runs of `prompts_per_request`
        prompts (one each in the plain protocol), each answered with its prompts' groups in order."""
        if self.resolved_protocol() in TEXT_PROTOCOLS:
            return (lambda one: [self._generate_plain(one[0], params)]), [[p] for p in prompts]
        per_request = self.prompts_per_request
        chunks = [list(prompts[i : i + per_request]) for i in range(0, len(prompts), per_request)]

        def send(chunk: list[Sequence[int]]) -> list[list[Completion]]:
            body = completion_request_body(self.model, chunk, params, self.extra_body)
            try:
                return parse_completion_response(self._post(body), chunk, params.n)
            except CompletionServerError as err:
                if err.status in (400, 422) and any(f in str(err) for f in _VLLM_FIELDS):
                    raise CompletionServerError(
                        f"{err} (this server refuses vLLM's extensions: it is not vLLM; use protocol "
                        "'openai' for text-only sampling)",
                        status=err.status,
                    ) from err
                raise

        return send, chunks

    def _generate_plain(self, prompt_ids: Sequence[int], params: SamplingParams) -> list[Completion]:
        """`params.n` text completions of one prompt. Servers that ignore `n` (`transformers serve`) answer
        one choice: the rest are asked for again, each with the next seed so that they differ."""
        text = self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False)
        out: list[Completion] = []
        while len(out) < params.n:
            seed = None if params.seed is None else params.seed + len(out)
            body = plain_completion_request_body(
                self.model,
                text,
                params,
                params.n - len(out),
                seed,
                self.extra_body,
                transformers=self.protocol == "transformers",
            )
            try:
                answer = self._post(body)
            except CompletionServerError as err:
                if err.status in (400, 422) and "generation_config" in str(err):
                    raise CompletionServerError(
                        f"{err} (this server is not transformers serve; use protocol 'openai')",
                        status=err.status,
                    ) from err
                raise
            out += parse_plain_choices(answer, prompt_ids)
        return out[: params.n]

    def sync_weights(self, model: object) -> None:
        """Not possible over the OpenAI API: the served weights belong to the server process."""
        raise NotImplementedError(
            "OpenAIEngine samples from a remote server and cannot receive weights; use HFEngine or "
            "VLLMEngine for training, or restart the server from a saved checkpoint"
        )

    def close(self) -> None:
        """Nothing to release: every request opens and closes its own connection."""


class ChatClient(_JsonClient):
    """Text answers from `POST {base_url}/chat/completions` (`base_url` like `http://h:8000/v1`).

    Greedy (`temperature` 0) and, when `seed` is set, seeded: as reproducible as the server makes them.
    Retries and errors are `post_json`'s. A content of `null` (a refusal, or a reasoning model that used
    its whole budget before answering) comes back as "", which callers treat as no answer; an answer
    without `choices[0].message` is not the chat completions API and raises `CompletionServerError`.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        seed: int | None = None,
        timeout: float = 300.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
    ) -> None:
        url = base_url.rstrip("/") + "/chat/completions"
        super().__init__(url, api_key, timeout, max_retries, backoff, max_backoff)
        self.model = model
        self.seed = seed

    def complete(self, messages: Sequence[dict[str, str]], *, max_tokens: int) -> str:
        """The model's answer to one conversation."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        return _message_content(self._post(body))

    def complete_many(
        self, conversations: Sequence[Sequence[dict[str, str]]], *, max_tokens: int, max_concurrency: int = 8
    ) -> list[str]:
        """One answer per conversation, in input order, with at most `max_concurrency` requests in flight."""
        return map_in_threads(
            lambda messages: self.complete(messages, max_tokens=max_tokens), conversations, max_concurrency
        )


def _message_content(response: dict[str, Any]) -> str:
    try:
        content = response["choices"][0]["message"].get("content")
    except (KeyError, IndexError, TypeError, AttributeError):
        raise CompletionServerError("the server answered without choices[0].message") from None
    return content if isinstance(content, str) else ""
