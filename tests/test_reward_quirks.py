"""Every rule and quirk of the paper's reward, on hand-built cases (see swerl/reward/similarity.py)."""

from __future__ import annotations

import difflib

import pytest

from swerl.reward import RewardConfig, normalized_diffs, similarity_reward
from swerl.reward.reference import DIFFLIB

OLD = "def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y * 2\n"
CONTEXT = {"m.py": OLD}
ORACLE = {"m.py": OLD.replace("x + 1", "x + 2")}


def block(path: str, search: str, replace: str, fence: str = "```python") -> str:
    return f"{fence}\n### {path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```"


def answer(*blocks: str, thought: str = "reasoning") -> str:
    return f"<think>\n{thought}\n</think>\n<solution>\n" + "\n".join(blocks) + "\n</solution>"


GOOD = answer(block("m.py", "    return x + 1", "    return x + 2"))


def score(output: str, context=CONTEXT, oracle=ORACLE, **config):
    fast = similarity_reward(output, context, oracle, config=RewardConfig(**config))
    slow = similarity_reward(output, context, oracle, config=RewardConfig(**config), engine=DIFFLIB)
    assert fast == slow  # the compiled engine agrees bit for bit on every case in this file
    return fast


def test_exact_answer_scores_one():
    result = score(GOOD)
    assert result.reward == 1.0
    assert result.similarities == {"m.py": 1.0}


@pytest.mark.parametrize("tag", ["<think>", "</think>", "<solution>", "</solution>"])
def test_each_tag_missing_or_doubled_is_malformed(tag):
    for broken in (GOOD.replace(tag, ""), GOOD.replace(tag, tag + tag)):
        result = score(broken)
        assert (result.reward, result.error) == (-1.0, "tag_count")


def test_tag_mentioned_in_the_thought_counts_too():
    result = score(GOOD.replace("reasoning", "I will write </solution> at the end"))
    assert result.error == "tag_count"


def test_empty_thought_after_strip_is_malformed():
    result = score(answer(block("m.py", "    return x + 1", "    return x + 2"), thought=" \n\t "))
    assert (result.reward, result.error) == (-1.0, "empty_thought")


def test_no_block_is_malformed():
    result = score(answer("Change x + 1 to x + 2."))
    assert (result.reward, result.error) == (-1.0, "no_blocks")


def test_crlf_answer_has_no_blocks():
    result = score(GOOD.replace("\n", "\r\n"))
    assert result.error == "no_blocks"


def test_search_not_found_is_malformed():
    result = score(answer(block("m.py", "    return x + 3", "    return x + 2")))
    assert (result.reward, result.error) == (-1.0, "search_not_found")


def test_search_equal_to_replace_is_malformed_even_with_other_good_edits():
    good = block("m.py", "    return x + 1", "    return x + 2")
    result = score(answer(good, block("m.py", "def g(y):", "def g(y):")))
    assert (result.reward, result.error) == (-1.0, "search_equals_replace")


def test_language_tag_is_optional_and_free():
    for fence in ("```", "```py", "```diff whatever"):
        assert score(answer(block("m.py", "    return x + 1", "    return x + 2", fence))).reward == 1.0


def test_path_is_not_stripped_so_a_trailing_space_names_a_new_empty_file():
    # "m.py " is not in the context: the paper treats it as an empty new file. The search "" is found
    # ("\n" in "\n"), so the answer is well formed but changes the wrong file: both files score 0.
    result = score(answer(block("m.py ", "", "x = 1")))
    assert result.error is None
    assert result.similarities == {"m.py": 0.0, "m.py ": 0.0}
    assert result.reward == 0.0


def test_missing_path_is_an_empty_new_file():
    oracle = {"new.py": "print('hi')\n"}
    result = score(answer(block("new.py", "", "print('hi')")), oracle=oracle)
    assert result.reward == 1.0


def test_replace_all_changes_every_occurrence():
    context = {"a.py": "x = 1\ny = 2\nx = 1\n"}
    both = {"a.py": "x = 3\ny = 2\nx = 3\n"}
    first_only = {"a.py": "x = 3\ny = 2\nx = 1\n"}
    out = answer(block("a.py", "x = 1", "x = 3"))
    assert score(out, context, both).reward == 1.0
    assert score(out, context, first_only).reward < 1.0
    assert score(out, context, first_only, strict=True).error == "ambiguous_search"


def test_search_is_anchored_at_a_line_start():
    context = {"a.py": "value = x = 1\n"}
    result = score(answer(block("a.py", "x = 1", "x = 2")), context, {"a.py": "value = x = 2\n"})
    assert result.error == "search_not_found"


def test_search_may_end_mid_line():
    context = {"a.py": "x = 10\n"}
    result = score(answer(block("a.py", "x = 1", "x = 2")), context, {"a.py": "x = 20\n"})
    assert result.reward == 1.0


def test_edits_apply_in_order_on_the_edited_text():
    out = answer(
        block("m.py", "    return x + 1", "    return x + 5"),
        block("m.py", "    return x + 5", "    return x + 2"),
    )
    assert score(out).reward == 1.0


def test_only_one_side_changing_a_file_scores_zero_for_it_and_the_mean_spans_the_union():
    out = answer(
        block("m.py", "    return x + 1", "    return x + 2"),
        block("other.py", "", "import os"),
    )
    result = score(out)
    assert result.similarities == {"m.py": 1.0, "other.py": 0.0}
    assert result.reward == 0.5


def test_unchanged_oracle_files_are_ignored():
    oracle = dict(ORACLE, **{"same.py": "unchanged\n"})
    result = score(GOOD, {"m.py": OLD, "same.py": "unchanged\n"}, oracle)
    assert result.similarities == {"m.py": 1.0}


def test_neither_side_changing_anything_scores_one():
    # "a" -> "a\n" changes no line under str.splitlines, so neither diff has a hunk.
    context = {"a.py": "a"}
    result = score(answer(block("a.py", "a", "a\n")), context, {"a.py": "a\n"})
    assert result.similarities == {}
    assert result.reward == 1.0


def test_splitlines_also_splits_on_form_feed():
    diffs = normalized_diffs({"a.txt": "p\x0cq\n"}, {"a.txt": "p\x0cr\n"})
    assert diffs == {"a.txt": "@@ -1,2 +1,2 @@\n p\n-q\n+r"}


def test_compared_text_is_the_headerless_unified_diff():
    diffs = normalized_diffs(CONTEXT, ORACLE)
    expected = "\n".join(
        list(difflib.unified_diff(OLD.splitlines(), ORACLE["m.py"].splitlines(), lineterm="", n=3))[2:]
    )
    assert diffs["m.py"] == expected
    assert diffs["m.py"].startswith("@@ -1,5 +1,5 @@\n def f(x):\n-    return x + 1\n+    return x + 2")


def test_similarity_is_character_level_difflib_ratio():
    out = answer(block("m.py", "    return x + 1", "    return x + 3"))
    result = score(out)
    pred, oracle = (
        normalized_diffs(CONTEXT, {"m.py": OLD.replace("x + 1", "x + 3")}),
        normalized_diffs(CONTEXT, ORACLE),
    )
    expected = difflib.SequenceMatcher(None, pred["m.py"], oracle["m.py"], autojunk=False).ratio()
    assert result.reward == expected
    assert 0.9 < expected < 1.0


def test_strict_rejects_unknown_paths_but_default_does_not():
    out = answer(block("m.py", "    return x + 1", "    return x + 2"), block("ghost.py", "a", "b"))
    assert score(out).error == "search_not_found"  # default: empty new file, so "a" is not found
    assert score(out, strict=True).error == "unknown_path"


def test_cap_scores_oversized_diffs_zero_and_reports_them():
    big_old = "".join(f"line {i}\n" for i in range(300))
    context, oracle = {"big.py": big_old}, {"big.py": big_old.replace("line ", "LINE ")}
    out = answer(block("big.py", big_old.rstrip("\n"), big_old.replace("line ", "LINE ").rstrip("\n")))
    assert score(out, context, oracle).reward == 1.0
    capped = score(out, context, oracle, max_diff_chars=1000)
    assert (capped.reward, capped.capped) == (0.0, ["big.py"])
    assert capped.info()["capped"] == ["big.py"]
    assert score(out, context, oracle, max_diff_chars=None).reward == 1.0
