"""The SWE-RL action format, defined once for the reward, SFT data building and Agentless repair.

An answer is `<think>...</think>` followed by `<solution>...</solution>` holding fenced SEARCH/REPLACE
blocks. `prompts` teaches the format, `parse` reads it, `apply` executes it and `inverse` writes it
from (old, new) contents. `patch` converts contents to and from git patches. The paper's quirks are
kept in the default semantics, so training and serving can't disagree about what an answer means.
"""

from swerl.edit_format.apply import apply_edits, count_occurrences, group_edits_by_path
from swerl.edit_format.inverse import (
    DEFAULT_THOUGHT,
    answer_error,
    canonical_answer,
    canonical_edits,
    edits_to_text,
)
from swerl.edit_format.parse import (
    EDIT_BLOCK_RE,
    FormatError,
    FormatErrorKind,
    ParsedAnswer,
    SearchReplace,
    extract_thought_solution,
    parse_answer,
    parse_edits,
)
from swerl.edit_format.patch import (
    PatchApplyError,
    apply_patch_to_contents,
    build_git_patch,
    parse_patch,
    patch_paths,
    split_lines,
)
from swerl.edit_format.prompts import (
    COMPACT_SYSTEM_PROMPT,
    PROMPT_STYLES,
    SYSTEM_PROMPT,
    PromptStyle,
    build_messages,
    render_repair_prompt,
    system_prompt_for,
)

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "DEFAULT_THOUGHT",
    "EDIT_BLOCK_RE",
    "PROMPT_STYLES",
    "SYSTEM_PROMPT",
    "FormatError",
    "FormatErrorKind",
    "ParsedAnswer",
    "PatchApplyError",
    "PromptStyle",
    "SearchReplace",
    "answer_error",
    "apply_edits",
    "apply_patch_to_contents",
    "build_git_patch",
    "build_messages",
    "canonical_answer",
    "canonical_edits",
    "count_occurrences",
    "edits_to_text",
    "extract_thought_solution",
    "group_edits_by_path",
    "parse_answer",
    "parse_edits",
    "parse_patch",
    "patch_paths",
    "render_repair_prompt",
    "split_lines",
    "system_prompt_for",
]
