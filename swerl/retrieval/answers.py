"""The file paths a model names in its answer, for the rankers that ask a model which files matter
(the mining's context ranker, localization's model ranking)."""

from __future__ import annotations

import re

_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)
_PATHLIKE = re.compile(r"[\w./-]+\.\w+")


def paths_in_answer(text: str) -> list[str]:
    """Path-like tokens of a model's answer, in order, without repeats: those of its first fenced block,
    or of the whole text when it has none (models do not always fence). Leading and trailing `./` are
    stripped; matching the tokens against real files is the caller's business."""
    block = _FENCED.search(text)
    body = block.group(1) if block else text
    return list(dict.fromkeys(token.strip("./") for token in _PATHLIKE.findall(body)))
