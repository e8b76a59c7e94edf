"""The reward never raises, stays in [-1, 1], and the compiled engine equals pure difflib on
random and mutated answers (hypothesis)."""

from __future__ import annotations

import json
from importlib import resources

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swerl.reward import similarity_reward
from swerl.reward.reference import DIFFLIB

SAMPLE_ROWS = [
    json.loads(line)
    for line in (resources.files("swerl.data") / "reward_sample.jsonl").read_text().splitlines()
]
ROW = SAMPLE_ROWS[0]
MARKERS = [
    "<think>",
    "</think>",
    "<solution>",
    "</solution>",
    "```",
    "```python\n",
    "### ",
    "<<<<<<< SEARCH\n",
    "\n=======\n",
    "\n>>>>>>> REPLACE\n",
    "\n",
    "textstats/words.py",
    '    return text.split(" ")',
    "\r\n",
    " ",
]


def check(output: str, context=ROW["code_context"], oracle=ROW["oracle_new_content"]) -> None:
    fast = similarity_reward(output, context, oracle)
    assert -1.0 <= fast.reward <= 1.0
    assert (fast.reward == -1.0) == (fast.error is not None)
    assert fast == similarity_reward(output, context, oracle, engine=DIFFLIB)


@st.composite
def mutated_answers(draw):
    text = draw(st.sampled_from([row["output"] for row in SAMPLE_ROWS]))
    for _ in range(draw(st.integers(1, 6))):
        pos = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "marker", "duplicate"]))
        if action == "insert":
            text = text[:pos] + draw(st.text(max_size=8)) + text[pos:]
        elif action == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 40)) :]
        elif action == "marker":
            text = text[:pos] + draw(st.sampled_from(MARKERS)) + text[pos:]
        else:
            text = text[:pos] + text[pos : pos + 200] + text[pos:]
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_answers())
def test_mutated_answers_never_raise(output):
    check(output)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*MARKERS, "a", "b"]), max_size=30).map("".join))
def test_marker_soup_never_raises(output):
    check(output)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.dictionaries(st.text(max_size=5), st.text(max_size=50), max_size=3))
def test_random_text_and_contexts_never_raise(output, context):
    check(output, context, {path: content + "x" for path, content in context.items()})
