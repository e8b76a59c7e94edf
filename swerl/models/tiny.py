"""Tiny real-architecture models and a locally trained tokenizer, for offline CPU runs and tests.

Nothing may come from the HF hub here, yet every code path should load models the way a real run does.
So the tiny model is a genuine Llama or Qwen2 built from a config, with a byte-level BPE tokenizer
trained in well under a second on local Python source, and both are written with `save_pretrained`:
`AutoModelForCausalLM.from_pretrained(path)` and `AutoTokenizer.from_pretrained(path)` then load them
like any checkpoint.

The tokenizer has a ChatML-style chat template (system/user/assistant turns, `add_generation_prompt`),
so `swerl.edit_format.build_messages` renders through `apply_chat_template` exactly as with an instruct
model. `<|im_end|>` ends an assistant turn and is the EOS token, so generation stops at end of turn.
"""

from __future__ import annotations

import json
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

BOS_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|pad|>"
IM_START = "<|im_start|>"
SPECIAL_TOKENS = (BOS_TOKEN, PAD_TOKEN, IM_START, EOS_TOKEN)

# Qwen2's pre-tokenization split (contractions, letter runs, single digits, punctuation runs with their
# newlines, newline runs, other whitespace). Must stay byte-identical to transformers' Qwen2Tokenizer.
PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)

# ChatML: each message is "<|im_start|>role\ncontent<|im_end|>\n"; the generation prompt opens an
# assistant turn. Whitespace control (`-`) keeps Jinja from adding newlines of its own.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

# How many characters of stdlib source the default corpus takes: ~0.3 s of BPE training for 4k merges.
_DEFAULT_CORPUS_CHARS = 800_000


def _format_texts() -> list[str]:
    """Text in the SWE-RL prompt/answer format, so its tags and SEARCH/REPLACE markers get own merges."""
    from swerl.edit_format import SYSTEM_PROMPT, canonical_answer, render_repair_prompt

    old = {"pkg/util.py": "def add(a, b):\n    return a - b\n", "pkg/io.py": "import os\n\nPATH = '.'\n"}
    new = {"pkg/util.py": "def add(a, b):\n    return a + b\n", "pkg/io.py": old["pkg/io.py"]}
    prompt = render_repair_prompt("add() subtracts instead of adding.", old)
    answer = canonical_answer(old, new, thought="The operator in add() is wrong; use +.")
    # Repeated so BPE sees the markers often enough to merge them whole, next to ~1 MB of code.
    return [SYSTEM_PROMPT, prompt, answer] * 20


def default_corpus(max_chars: int = _DEFAULT_CORPUS_CHARS) -> Iterator[str]:
    """Python source from this interpreter's stdlib (sorted, so deterministic) plus SWE-RL format text."""
    yield from _format_texts()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    total = 0
    for path in sorted(stdlib.glob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        yield text
        total += len(text)
        if total >= max_chars:
            return


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts`, with special tokens, EOS/PAD and a chat template.

    Byte-level means every string encodes (no unknown token) and decode(encode(s)) == s for NFC text.
    The pipeline (NFC, then `PRETOKENIZE_PATTERN`, then bytes) is exactly Qwen2's: transformers 5 loads
    any folder whose config says `model_type: qwen2` with its own `Qwen2Tokenizer`, which rebuilds that
    pipeline and ignores ours, so only a Qwen2-identical pipeline gives the same ids after reloading.
    The pattern also splits digits one by one, like the real Qwen2.5-Coder tokenizer.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=BOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1 << 30,
        clean_up_tokenization_spaces=False,
    )


def _config(
    arch: str,
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int,
    intermediate_size: int,
    num_layers: int,
    num_heads: int,
    max_position_embeddings: int,
) -> Any:
    from transformers import LlamaConfig, Qwen2Config

    common: dict[str, Any] = {
        "vocab_size": len(tokenizer),
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_layers,
        "num_attention_heads": num_heads,
        "num_key_value_heads": num_heads,
        "max_position_embeddings": max_position_embeddings,
        "tie_word_embeddings": True,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
    }
    if arch == "llama":
        return LlamaConfig(**common)
    if arch == "qwen2":
        return Qwen2Config(**common)
    raise ValueError(f"arch must be 'llama' or 'qwen2', got {arch!r}")


def _pin_tokenizer_class(out_dir: Path) -> None:
    """Record `PreTrainedTokenizerFast` as the class, so loaders that honour it use tokenizer.json as is.

    transformers 5 still picks Qwen2Tokenizer for `model_type: qwen2` folders; the pipeline in
    `train_tokenizer` makes that choice harmless (tests check identical ids after reload for both).
    """
    path = out_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def build_tiny_model(
    out_dir: str | Path,
    arch: Literal["llama", "qwen2"] = "llama",
    vocab_size: int = 4096,
    hidden_size: int = 64,
    intermediate_size: int = 256,
    num_layers: int = 2,
    num_heads: int = 4,
    max_position_embeddings: int = 4096,
    corpus: Iterable[str] | None = None,
    seed: int = 0,
) -> Path:
    """Train a tokenizer, build a randomly initialised model of `arch`, save both to `out_dir`.

    The model's vocabulary is the tokenizer's actual size (BPE may stop short of `vocab_size` on a small
    corpus) and its embeddings are tied, as in small Qwen2 models. `seed` fixes the initial weights, so
    the same arguments give the same checkpoint. Returns `out_dir`.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(default_corpus() if corpus is None else corpus, vocab_size=vocab_size)
    config = _config(
        arch, tokenizer, hidden_size, intermediate_size, num_layers, num_heads, max_position_embeddings
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _pin_tokenizer_class(out)
    return out
