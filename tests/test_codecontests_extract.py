"""Code extraction from model answers."""

from __future__ import annotations

from swerl.codecontests.extract import ExtractConfig, extract_code

ANSWER = """First try:
```python
print(1)
```
Better:
```py
print(2)
```
And some C++ for comparison:
```cpp
int main() {}
```
"""


def test_last_python_block_wins() -> None:
    assert extract_code(ANSWER) == "print(2)\n"


def test_first_when_configured() -> None:
    assert extract_code(ANSWER, ExtractConfig(pick="first")) == "print(1)\n"


def test_untagged_blocks_count_unless_disabled() -> None:
    answer = "```\nprint(3)\n```"
    assert extract_code(answer) == "print(3)\n"
    assert extract_code(answer, ExtractConfig(accept_untagged=False)) is None


def test_no_code_or_invalid_code_is_none() -> None:
    assert extract_code("I think the answer is 42.") is None
    assert extract_code("```python\n\n```") is None
    assert extract_code("```python\ndef f(:\n```") is None
    assert extract_code("```python\ndef f(:\n```", ExtractConfig(require_valid_syntax=False)) == "def f(:\n"
    assert extract_code("```cpp\nint main(){}\n```") is None
