"""Generic in-context recall pretraining of a tiny model: what a pretrained LLM brings to RLEF (experiment).

A real RLEF run starts from an LLM that has read a lot of text, and one of the first things such a model
learns is to copy from its context: induction heads (after an earlier `A B`, a later `A` predicts `B`)
and associative recall. Using execution feedback is largely that skill: the value a failed test expects
sits in the feedback, and the fix copies it. A tiny model built from scratch has no such circuit, and
forming one from a few hundred task examples, where a single token per example needs it, takes a long
and unpredictable plateau (docs/rlef.md, the hidden-constant problems). Small transformers form
induction heads within a few hundred steps when every position of a sequence rewards copying, so this
stage trains exactly that, on data that is not the task: sequences of uniformly random tokens of the
tokenizer's vocabulary (no chat template, no program, no feedback text), of two kinds:

- repeat: a random segment, then the same segment again; the loss is on the repeat;
- pairs: random key-value token pairs, then some of the keys again, each followed by its value; the
  loss is on those values.

`pretrain_recall` trains a saved model on them in place. Measured (docs/rlef.md): it teaches recall,
but it did not shorten the hidden-constant warm-up's plateau, so the shipped RLEF demonstration does not
use it; it stays here as the experiment that showed so.

    PYTHONPATH=. python bench/rlef_recall_pretraining.py runs/rlef/tiny128-recall --steps 400
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch


def repeat_sequence(rng: random.Random, vocab: Sequence[int], half: int) -> tuple[list[int], list[bool]]:
    """`half` random tokens then the same tokens again. The mask marks the positions whose next token is
    in the repeat: all of it is a copy, its first token too (the repeat always starts at `half`)."""
    segment = [rng.choice(vocab) for _ in range(half)]
    ids = segment + segment
    # Position i predicts ids[i + 1]: every token of the repeat is a target.
    return ids, [i >= half - 1 and i < 2 * half - 1 for i in range(2 * half)]


def pairs_sequence(
    rng: random.Random, vocab: Sequence[int], pairs: int, queries: int
) -> tuple[list[int], list[bool]]:
    """`pairs` key-value pairs (distinct keys), then `queries` of the keys again, each followed by its
    value; the mask marks the positions whose next token is a queried value."""
    keys = rng.sample(list(vocab), pairs)
    values = [rng.choice(vocab) for _ in keys]
    ids = [token for pair in zip(keys, values, strict=True) for token in pair]
    targets = [False] * len(ids)
    for index in rng.sample(range(pairs), queries):
        ids += [keys[index], values[index]]
        targets += [True, False]
    return ids, targets


def recall_batch(
    rng: random.Random, vocab: Sequence[int], batch_size: int, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of `length`-token sequences, half of each kind: input ids and a mask of the positions whose
    next token is a recall target (same shape; the last column is never a target)."""
    rows, masks = [], []
    for i in range(batch_size):
        if i % 2 == 0:
            ids, mask = repeat_sequence(rng, vocab, length // 2)
        else:
            pairs = length // 3
            ids, mask = pairs_sequence(rng, vocab, pairs, (length - 2 * pairs) // 2)
        ids, mask = ids + [ids[-1]] * (length - len(ids)), mask + [False] * (length - len(mask))
        rows.append(ids)
        masks.append(mask)
    return torch.tensor(rows), torch.tensor(masks)


def recall_loss(model: torch.nn.Module, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the recall targets: position i predicts token i + 1 where mask[i]."""
    logits = model(input_ids=ids).logits[:, :-1]
    targets = ids[:, 1:]
    keep = mask[:, :-1]
    return torch.nn.functional.cross_entropy(logits[keep], targets[keep])


def pretrain_recall(
    model_dir: str | Path,
    steps: int = 300,
    lr: float = 3e-3,
    batch_size: int = 32,
    length: int = 96,
    seed: int = 0,
    log: Callable[[str], None] | None = print,
) -> list[float]:
    """Train the model saved in `model_dir` on recall sequences for `steps` steps and save it back there.

    Tokens come from the tokenizer's whole vocabulary except the special tokens, so copying is learned
    for every token, digits included, and the model is left no wiser about any task. AdamW with beta2
    0.95 (see docs/rlef.md for why not 0.999) and gradient clipping at 1. Returns the loss per step;
    `log` gets a line every 50 steps. Deterministic given `seed` (data and batch order).
    """
    from swerl.models.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(model_dir)
    special = set(tokenizer.all_special_ids)
    vocab = [i for i in range(len(tokenizer)) if i not in special]
    torch.manual_seed(seed)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    model.train()
    losses, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        ids, mask = recall_batch(rng, vocab, batch_size, length)
        loss = recall_loss(model, ids, mask)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
        if log is not None and step % 50 == 0:
            recent = sum(losses[-50:]) / len(losses[-50:])
            log(f"recall pretraining: step {step} loss {recent:.3f} ({time.perf_counter() - start:.0f} s)")
    model.save_pretrained(model_dir)
    return losses


def main() -> None:
    from swerl.cli.args import nonnegative_int, positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a saved tiny model, trained in place (copy it first to keep it)")
    parser.add_argument("--steps", type=positive_int, default=400)
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    args = parser.parse_args()
    losses = pretrain_recall(Path(args.model_dir), steps=args.steps, seed=args.seed)
    print(f"recall loss {losses[0]:.2f} -> {sum(losses[-50:]) / len(losses[-50:]):.2f} nats")


if __name__ == "__main__":
    main()
