"""The SWE-RL patch-similarity reward (Wei et al., 2025), exact and fast.

reward = -1 for a malformed answer, else the mean over changed files of the character-level
`difflib.SequenceMatcher(None, pred_diff, oracle_diff, autojunk=False).ratio()`.

The default mode reproduces the paper's reference implementation including its quirks; each one is
deliberate and tested (tests/test_reward_quirks.py):

* Malformed (-1): any of `<think>`, `</think>`, `<solution>`, `</solution>` not exactly once; an empty
  thought; no SEARCH/REPLACE block; a search text not found; a search text equal to its replacement.
  Parsing and applying live in `swerl.edit_format`, shared with SFT and Agentless.
* Edits apply in order with "\\n"-anchored replace-all semantics; a path missing from the context is an
  empty new file (see `swerl.edit_format.apply_edits`).
* The compared text per file is the unified diff of `old.splitlines()` vs `new.splitlines()` with 3 lines of
  context, without its two header lines, joined by "\\n". `str.splitlines` also splits on \\r, \\x0b,
  \\x0c, \\x1c-\\x1e, \\x85, \\u2028 and \\u2029, and drops the final newline, so "a\\n" -> "a" is no change.
* A file changed by only one side scores 0; the reward is the mean over the union of changed files; 1.0
  when neither side changed anything; files whose diff is empty (content unchanged) are ignored.

Two documented departures, neither of which changes a single reward value for inputs within the cap:

* The paper sums per-file similarities while iterating a Python `set` of paths, so the last bit of a
  multi-file mean depends on PYTHONHASHSEED. We use `math.fsum` (exactly rounded), which is deterministic.
* `max_diff_chars` (default 200,000 characters, 10x the 20 KB size we guarantee <= 200 ms for) caps the
  similarity computation: a file whose predicted or oracle diff is longer scores 0 and is listed under
  `capped` in the info. Set it to None to disable.

`strict=True` tightens the format (unique search matches, no unknown paths); it is never the default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swerl import fastdiff
from swerl.edit_format import FormatError, apply_edits, parse_answer

DEFAULT_MAX_DIFF_CHARS = 200_000
CONTEXT_LINES = 3


@dataclass(frozen=True)
class DiffEngine:
    """The two diff computations the reward needs.

    Swappable so that tests and `bench/reward.py` run the very same reward logic on pure `difflib`
    (`swerl.reward.reference.DIFFLIB`) and compare values bit for bit.
    """

    diff_body: Callable[[list[str], list[str], int], str]
    ratio: Callable[[str, str], float]


FAST = DiffEngine(diff_body=fastdiff.unified_diff_body, ratio=fastdiff.ratio)


@dataclass(frozen=True)
class RewardConfig:
    """Options of the similarity reward; the defaults reproduce the paper."""

    strict: bool = False
    max_diff_chars: int | None = DEFAULT_MAX_DIFF_CHARS


@dataclass
class RewardResult:
    """A reward and why: either an error kind (malformed answer) or per-file similarities."""

    reward: float
    error: str | None = None
    message: str | None = None
    similarities: dict[str, float] = field(default_factory=dict)
    capped: list[str] = field(default_factory=list)
    kind: str = "similarity"
    """Which reward judged the answer: `similarity`, or `execution` (the tests)."""
    outcome: str | None = None
    """The execution reward's verdict kind: resolved, unresolved, malformed or infra_error (an
    infrastructure failure, whose reward says nothing about the answer and is not trained on)."""

    def info(self) -> dict[str, Any]:
        """JSON-ready description, as written to `reward_info` by the batch scorer."""
        if self.error is not None:
            return {"error": self.error, "message": self.message}
        info: dict[str, Any] = {"similarities": self.similarities}
        if self.capped:
            info["capped"] = self.capped
        return info


def normalized_diffs(
    code_context: Mapping[str, str], new_contents: Mapping[str, str], engine: DiffEngine = FAST
) -> dict[str, str]:
    """Per path, the diff text the reward compares; paths whose content did not change are left out."""
    diffs = {}
    for path, new in new_contents.items():
        old = code_context.get(path, "")
        body = engine.diff_body(old.splitlines(), new.splitlines(), CONTEXT_LINES)
        if body:
            diffs[path] = body
    return diffs


def _too_long(text: str, cap: int | None) -> bool:
    return cap is not None and len(text) > cap


def compare_diffs(
    pred: Mapping[str, str],
    oracle: Mapping[str, str],
    cap: int | None = DEFAULT_MAX_DIFF_CHARS,
    engine: DiffEngine = FAST,
) -> RewardResult:
    """Mean per-file similarity of two normalized diff maps (the part of the reward after parsing)."""
    paths = sorted(set(pred) | set(oracle))
    if not paths:
        return RewardResult(reward=1.0)
    similarities: dict[str, float] = {}
    capped: list[str] = []
    for path in paths:
        pred_diff, oracle_diff = pred.get(path, ""), oracle.get(path, "")
        if not pred_diff or not oracle_diff:
            similarities[path] = 0.0
        elif _too_long(pred_diff, cap) or _too_long(oracle_diff, cap):
            similarities[path] = 0.0
            capped.append(path)
        else:
            similarities[path] = engine.ratio(pred_diff, oracle_diff)
    reward = math.fsum(similarities.values()) / len(similarities)
    return RewardResult(reward=reward, similarities=similarities, capped=capped)


def similarity_reward(
    output: str,
    code_context: Mapping[str, str],
    oracle_new_content: Mapping[str, str],
    *,
    config: RewardConfig = RewardConfig(),
    oracle_diffs: Mapping[str, str] | None = None,
    engine: DiffEngine = FAST,
) -> RewardResult:
    """Score one model answer against the developers' change.

    `oracle_diffs` lets a caller that scores a whole GRPO group (16 answers to one issue) compute
    `normalized_diffs(code_context, oracle_new_content)` once instead of once per answer.
    """
    try:
        edits = parse_answer(output).edits
        pred_new = apply_edits(code_context, edits, strict=config.strict)
    except FormatError as err:
        return RewardResult(reward=-1.0, error=str(err.kind.value), message=str(err))
    if oracle_diffs is None:
        oracle_diffs = normalized_diffs(code_context, oracle_new_content, engine)
    pred_diffs = normalized_diffs(code_context, pred_new, engine)
    return compare_diffs(pred_diffs, oracle_diffs, config.max_diff_chars, engine)
