"""Stage 5 (context), optional: a model behind an OpenAI-compatible chat endpoint names the unmodified files a
developer would open for an issue; `ContextBuilder` puts its picks before the model-free tiers.

The model-free tiers (imports, same package, BM25) only see words and import lines; a model also reads
what the issue means. It sees the issue, the files the fix changed (for orientation) and a layout of the
unmodified files that context may show, and answers with paths in a fenced block. Only unmodified
candidates count: a modified file is in the prompt anyway, and an unknown path cannot be shown.

Requests go out a shard at a time, a few in flight (`MAX_IN_FLIGHT` per worker process), greedy and
seeded with the context seed. A server that keeps failing after the retries stops the run
(`RankServerError`); an answer that names no usable file only leaves its row without model picks.
The API key is read from the environment when the ranker is built in the worker, so it is never part
of the config, the manifest or a row, and error messages are scrubbed of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from data_pipeline.config import ContextConfig
from swerl.errors import UserError
from swerl.retrieval.answers import paths_in_answer

if TYPE_CHECKING:
    from swerl.rollout.openai_client import ChatClient

# Requests in flight per worker process (each of `--workers` processes ranks its own shards).
MAX_IN_FLIGHT = 8
# Retry policy of the ranking client: a busy server gets about a minute before the run stops.
CLIENT_TIMEOUT = 300.0
CLIENT_RETRIES = 5
CLIENT_BACKOFF = 1.0
# Size caps of a request, so that a model with a small context window still gets a whole prompt.
MAX_LAYOUT_CHARS = 20_000
MAX_ISSUE_CHARS = 12_000
# Room for the fenced list of paths, plus whatever a model writes around it.
_ANSWER_TOKENS = 128
_ANSWER_TOKENS_PER_PATH = 64


class RankServerError(UserError, RuntimeError):
    """The ranking server refused a request or kept failing: the run stops (it is resumable)."""


@dataclass(frozen=True)
class RankRequest:
    """What the model is asked about one row: the issue, the unmodified files context may show
    (`ContextBuilder._pool`), and the paths the fix modified or added."""

    issue: str
    candidates: tuple[str, ...]
    changed: tuple[str, ...]


def file_layout(candidates: Sequence[str], changed: Sequence[str], max_chars: int = MAX_LAYOUT_CHARS) -> str:
    """One path per line, at most `max_chars` characters: first the files in the directories of the
    changed files (where relevant files usually are), then the others, each group sorted. When the
    cap cuts the list, the tail goes and a last line says how many files are not shown, so the model
    knows the layout is partial."""
    near = {path.rpartition("/")[0] for path in changed}
    ordered = sorted(candidates, key=lambda path: (path.rpartition("/")[0] not in near, path))
    lines: list[str] = []
    size = 0
    room = max_chars - 40  # for the "not shown" line
    for path in ordered:
        if size + len(path) + 1 > room:
            lines.append(f"({len(ordered) - len(lines)} more files not shown)")
            break
        lines.append(path)
        size += len(path) + 1
    return "\n".join(lines)


_PROMPT = """\
Below is an issue reported on a software repository, the files its fix changed, and the other files of \
the repository.

<issue>
{issue}
</issue>

<changed_files>
{changed}
</changed_files>

<other_files>
{layout}
</other_files>

Which of the other files would a developer open to understand and fix the issue? Name at most {k} \
files from <other_files>, the most relevant first, one full path per line, exactly as listed, inside a \
single ``` block. Write nothing else."""


def rank_messages(request: RankRequest, k: int) -> list[dict[str, str]]:
    """The chat messages of one request (the issue is cut at `MAX_ISSUE_CHARS`)."""
    issue = request.issue.strip()
    if len(issue) > MAX_ISSUE_CHARS:
        issue = issue[:MAX_ISSUE_CHARS] + "\n[... issue cut ...]"
    content = _PROMPT.format(
        issue=issue,
        changed="\n".join(sorted(request.changed)),
        layout=file_layout(request.candidates, request.changed),
        k=k,
    )
    return [{"role": "user", "content": content}]


def picks_from_answer(answer: str, request: RankRequest, k: int) -> list[str]:
    """The unmodified candidates the answer names, in its order, at most `k`; changed files and paths
    that are not candidates are dropped."""
    candidates = set(request.candidates) - set(request.changed)
    return [path for path in paths_in_answer(answer) if path in candidates][:k]


class ModelRanker:
    """Asks a chat model for the `top_k` most relevant unmodified files of each row."""

    def __init__(self, client: ChatClient, top_k: int) -> None:
        self.client = client
        self.top_k = top_k

    @classmethod
    def from_config(cls, config: ContextConfig) -> ModelRanker | None:
        """The ranker of `config`, or None when it names no model. The key comes from the environment
        variable `config.rank_api_key_env` (unset or empty: no key, as a local vLLM server needs)."""
        if config.rank_model is None or config.rank_base_url is None:
            return None
        # Imported here: `swerl.rollout` imports torch, which a mining worker otherwise never loads.
        from swerl.rollout.openai_client import ChatClient

        client = ChatClient(
            config.rank_base_url,
            config.rank_model,
            api_key=os.environ.get(config.rank_api_key_env) or None,
            seed=config.seed,
            timeout=CLIENT_TIMEOUT,
            max_retries=CLIENT_RETRIES,
            backoff=CLIENT_BACKOFF,
        )
        return cls(client, config.rank_top_k)

    def rank_many(self, requests: Sequence[RankRequest]) -> list[list[str]]:
        """The picks of each request, in order, `MAX_IN_FLIGHT` requests at a time."""
        from swerl.rollout.openai_client import CompletionServerError

        conversations = [rank_messages(request, self.top_k) for request in requests]
        max_tokens = _ANSWER_TOKENS + _ANSWER_TOKENS_PER_PATH * self.top_k
        try:
            answers = self.client.complete_many(
                conversations, max_tokens=max_tokens, max_concurrency=MAX_IN_FLIGHT
            )
        except CompletionServerError as err:
            raise RankServerError(
                f"the context ranking model {self.client.model!r} failed: {err}. The run stopped and is "
                "resumable: fix the server and run the same command again, or drop --rank-model and use "
                "a new --out"
            ) from None
        return [
            picks_from_answer(answer, request, self.top_k)
            for answer, request in zip(answers, requests, strict=True)
        ]
