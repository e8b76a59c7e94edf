"""The in-context recall pretraining stage: its sequences are solvable only by copying; it teaches that."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from swerl.models import build_tiny_model, load_model_and_tokenizer
from swerl.models.recall import pairs_sequence, pretrain_recall, recall_batch, recall_loss, repeat_sequence

VOCAB = list(range(10, 60))


def test_repeat_targets_are_copies_of_the_first_half() -> None:
    ids, mask = repeat_sequence(random.Random(0), VOCAB, 8)
    assert len(ids) == len(mask) == 16 and ids[:8] == ids[8:]
    targets = [i for i, m in enumerate(mask) if m]
    # Every token of the repeat is predicted, each from the same token 8 positions earlier.
    assert [i + 1 for i in targets] == list(range(8, 16))
    assert all(ids[i + 1] == ids[i + 1 - 8] for i in targets)


def test_pairs_targets_are_the_queried_keys_values() -> None:
    rng = random.Random(1)
    for _ in range(20):
        ids, mask = pairs_sequence(rng, VOCAB, pairs=6, queries=3)
        assert len(ids) == len(mask) == 12 + 6 and sum(mask) == 3
        table = dict(zip(ids[0:12:2], ids[1:12:2], strict=True))
        assert len(table) == 6  # distinct keys: a query has one answer
        for i, target in enumerate(mask):
            if target:
                assert i >= 12 and table[ids[i]] == ids[i + 1]


def test_recall_batch_mixes_both_kinds_at_a_fixed_length() -> None:
    ids, mask = recall_batch(random.Random(2), VOCAB, batch_size=4, length=30)
    assert ids.shape == mask.shape == (4, 30) and not mask[:, -1].any()
    assert mask[0].sum() == 15 and mask[1].sum() == 5  # repeat of 15, then 10 pairs with 5 queries


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("recall") / "model", hidden_size=64, num_layers=2)


def test_pretraining_teaches_copying_and_saves_in_place(tiny: Path) -> None:
    """Recall targets are uniformly random tokens: without copying the loss stays near ln(vocab). After
    the stage the saved model predicts them much better, on fresh sequences it never saw."""
    model, tokenizer = load_model_and_tokenizer(tiny)
    vocab = [i for i in range(len(tokenizer)) if i not in set(tokenizer.all_special_ids)]
    held_out = recall_batch(random.Random(99), vocab, batch_size=16, length=48)
    with torch.no_grad():
        before = float(recall_loss(model, *held_out))
    assert before > math.log(len(vocab)) - 0.5

    losses = pretrain_recall(tiny, steps=150, batch_size=16, length=48, seed=0, log=None)
    assert len(losses) == 150
    model, _ = load_model_and_tokenizer(tiny)
    with torch.no_grad():
        after = float(recall_loss(model, *held_out))
    assert after < before - 1.0  # measured: 8.32 -> 6.58 nats
