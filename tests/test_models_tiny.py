"""Tiny models and tokenizers: built offline, saved with save_pretrained, reloaded by the Auto classes."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from swerl.edit_format import build_messages, canonical_answer
from swerl.models import (
    EOS_TOKEN,
    build_tiny_model,
    default_corpus,
    load_model_and_tokenizer,
    train_tokenizer,
)

SAMPLE = (
    "def  héllo(x1=123):\n\treturn x1  # ok\r\n\n\n<|im_end|>"
    + canonical_answer({"a.py": "x = 1\n"}, {"a.py": "x = 2\n"})
    + "".join(chr(c) for c in range(32, 600, 7))
)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def built(request, tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp(request.param) / "m", arch=request.param, seed=1)
    return request.param, path


def test_auto_classes_reload_identically(built):
    arch, path = built
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == arch and config["tie_word_embeddings"]
    auto_tok = AutoTokenizer.from_pretrained(path)
    fast_tok = PreTrainedTokenizerFast.from_pretrained(path)
    ids = fast_tok(SAMPLE)["input_ids"]
    assert auto_tok(SAMPLE)["input_ids"] == ids  # Qwen2Tokenizer for qwen2, same ids
    assert auto_tok.decode(ids) == SAMPLE  # byte-level: lossless on NFC text
    for tok in (auto_tok, fast_tok):
        assert tok.eos_token == EOS_TOKEN and tok.pad_token_id is not None
        assert tok.pad_token_id != tok.eos_token_id
        assert tok(EOS_TOKEN)["input_ids"] == [tok.eos_token_id]

    model = AutoModelForCausalLM.from_pretrained(path)
    assert type(model).__name__ == {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
    assert model.config.vocab_size == len(fast_tok)
    assert model.generation_config.eos_token_id == fast_tok.eos_token_id
    n_params = sum(p.numel() for p in model.parameters())
    assert 300_000 < n_params < 500_000
    with torch.no_grad():
        logits = model(torch.tensor([ids[:20]])).logits
    assert logits.shape == (1, 20, len(fast_tok)) and torch.isfinite(logits).all()


def test_build_is_deterministic(built, tmp_path):
    arch, path = built
    again = build_tiny_model(tmp_path / "again", arch=arch, seed=1)
    a = AutoModelForCausalLM.from_pretrained(path).state_dict()
    b = AutoModelForCausalLM.from_pretrained(again).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (path / "tokenizer.json").read_text() == (again / "tokenizer.json").read_text()


def test_chat_template_renders_swe_rl_messages(built):
    _, path = built
    tok = AutoTokenizer.from_pretrained(path)
    messages = build_messages("add() is wrong", {"m.py": "def add(a, b):\n    return a - b\n"})
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected = (
        f"<|im_start|>system\n{messages[0]['content']}<|im_end|>\n"
        f"<|im_start|>user\n{messages[1]['content']}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert text == expected
    no_prompt = tok.apply_chat_template(messages, tokenize=False)
    assert no_prompt == expected.removesuffix("<|im_start|>assistant\n")
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    assert ids == tok(text)["input_ids"]
    assert ids.count(tok.convert_tokens_to_ids("<|im_start|>")) == 3


def test_format_markers_tokenize_compactly(built):
    _, path = built
    tok = AutoTokenizer.from_pretrained(path)
    for marker in ("<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE", "</solution>", "<think>"):
        assert len(tok(marker)["input_ids"]) <= 3, marker


def test_load_model_and_tokenizer_dtype(built):
    _, path = built
    model, tok = load_model_and_tokenizer(path, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    assert tok.pad_token_id is not None
    model32, _ = load_model_and_tokenizer(str(path), dtype=torch.float32, device="cpu")
    assert next(model32.parameters()).dtype == torch.float32
    with pytest.raises(ValueError):
        load_model_and_tokenizer(path, dtype="float77")


def test_train_tokenizer_small_vocab_and_default_corpus():
    tok = train_tokenizer(["aaa bbb aaa bbb ccc"] * 10, vocab_size=300)
    assert len(tok) <= 300
    assert tok.decode(tok("zebra ü")["input_ids"]) == "zebra ü"  # unseen bytes still encode
    chunks = list(default_corpus(max_chars=10_000))
    assert any("<<<<<<< SEARCH" in c for c in chunks) and any("def " in c for c in chunks)
