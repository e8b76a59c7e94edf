"""Policy loss, aggregation, KL, entropy and log-prob helpers on hand-computed numbers."""

from __future__ import annotations

import math

import pytest
import torch

from swerl.algorithms import (
    aggregate_loss,
    clipped_policy_loss,
    entropy_from_logits,
    kl_k3,
    logprob_mismatch,
    masked_mean,
    reinforce_loss,
    token_logprobs,
    truncated_is_weights,
)

# Two completions, three token slots. Row 0 has advantage +1, row 1 has -2 and a padded last token.
# old_logp = 0, so ratio = exp(logp): ratios row 0 [1.0, 1.5, 0.5], row 1 [1.5, 0.5, (1.1 masked)].
RATIOS = torch.tensor([[1.0, 1.5, 0.5], [1.5, 0.5, 1.1]])
ADV = torch.tensor([1.0, -2.0])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
# Per-token loss -min(r A, clip(r, 0.8, 1.2) A):
#   row 0: -1.0, -min(1.5, 1.2) = -1.2 (high clip), -min(0.5, 0.8) = -0.5 (A > 0: not a clip event)
#   row 1: -min(-3.0, -2.4) = 3.0, -min(-1.0, -1.6) = 1.6 (low clip)
PER_TOKEN = [[-1.0, -1.2, -0.5], [3.0, 1.6]]


def _inputs():
    logp = RATIOS.log().clone().requires_grad_(True)
    return logp, torch.zeros_like(logp)


@pytest.mark.parametrize(
    ("aggregation", "expected"),
    [
        ("token-mean", (-1.0 - 1.2 - 0.5 + 3.0 + 1.6) / 5),  # 0.38
        ("seq-mean", (-2.7 / 3 + 4.6 / 2) / 2),  # 0.7
        ("seq-mean-token-sum", (-2.7 + 4.6) / 2),  # 0.95
        ("seq-mean-token-sum-norm", (-2.7 + 4.6) / (2 * 8)),  # Dr. GRPO, max_length 8: 0.11875
    ],
)
def test_clipped_loss_values(aggregation, expected):
    logp, old = _inputs()
    loss, metrics = clipped_policy_loss(
        logp, old, ADV, MASK, eps_low=0.2, aggregation=aggregation, max_length=8
    )
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert metrics["clip_ratio/low_mean"].item() == pytest.approx(1 / 5)
    assert metrics["clip_ratio/high_mean"].item() == pytest.approx(1 / 5)
    assert metrics["clip_ratio/region_mean"].item() == pytest.approx(2 / 5)


def test_clipped_loss_gradient_is_zero_where_clip_binds():
    logp, old = _inputs()
    loss, _ = clipped_policy_loss(logp, old, ADV, MASK)
    loss.backward()
    # d/dlogp of -r A is -A r on unclipped tokens, 0 on clipped and padded ones; token-mean divides by 5.
    expected = torch.tensor([[-1.0, 0.0, -0.5], [3.0, 0.0, 0.0]]) / 5
    torch.testing.assert_close(logp.grad, expected)


def test_clip_higher():
    logp, old = _inputs()
    loss, metrics = clipped_policy_loss(logp, old, ADV, MASK, eps_low=0.2, eps_high=0.6)
    # r = 1.5 with A = +1 is inside 1 + 0.6 now: -1.5 instead of -1.2.
    assert loss.item() == pytest.approx((-1.0 - 1.5 - 0.5 + 3.0 + 1.6) / 5, abs=1e-6)
    assert metrics["clip_ratio/high_mean"].item() == 0.0


def test_per_token_advantages_broadcast_like_per_sequence():
    logp, old = _inputs()
    loss_seq, _ = clipped_policy_loss(logp, old, ADV, MASK)
    loss_tok, _ = clipped_policy_loss(logp, old, ADV[:, None].expand(2, 3), MASK)
    torch.testing.assert_close(loss_seq, loss_tok)


def test_on_policy_gradient_equals_reinforce():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, requires_grad=True)
    adv = torch.tensor([0.5, -1.0, 2.0])
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    grads = []
    for loss_fn in (clipped_policy_loss, reinforce_loss):
        logp = torch.log_softmax(logits, -1)
        grads.append(torch.autograd.grad(loss_fn(logp, logp.detach(), adv, mask)[0], logits)[0])
    g1, g2 = grads
    torch.testing.assert_close(g1, g2)


def test_kl_term_added_per_token():
    logp, old = _inputs()
    ref = torch.full_like(RATIOS, math.log(0.5))
    base, _ = clipped_policy_loss(logp, old, ADV, MASK)
    with_kl, metrics = clipped_policy_loss(logp, old, ADV, MASK, ref_logp=ref, beta=0.1)
    kl = kl_k3(logp.detach(), ref)
    expected_kl = (kl * MASK).sum() / 5
    torch.testing.assert_close(with_kl, base + 0.1 * expected_kl)
    torch.testing.assert_close(metrics["kl"], expected_kl)


@pytest.mark.parametrize(
    "aggregation", ["token-mean", "seq-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
)
def test_global_normalizer_makes_accumulation_equal_one_batch(aggregation):
    """Micro-batches with the global count as normalizer sum to the big-batch loss and gradient."""
    torch.manual_seed(1)
    b, t = 6, 7
    logp_full = torch.randn(b, t).requires_grad_(True)
    old = (logp_full.detach() + 0.3 * torch.randn(b, t)).clone()
    adv = torch.randn(b)
    lengths = torch.tensor([7, 1, 3, 5, 2, 6])
    mask = (torch.arange(t)[None, :] < lengths[:, None]).int()

    big, _ = clipped_policy_loss(logp_full, old, adv, mask, aggregation=aggregation, max_length=t)
    (g_big,) = torch.autograd.grad(big, logp_full)

    count = mask.sum() if aggregation == "token-mean" else torch.tensor(b)
    total = 0.0
    grad = torch.zeros_like(logp_full)
    for rows in (slice(0, 2), slice(2, 3), slice(3, 6)):  # uneven micro-batches
        part = logp_full.detach()[rows].clone().requires_grad_(True)
        share, _ = clipped_policy_loss(
            part, old[rows], adv[rows], mask[rows], aggregation=aggregation, normalizer=count, max_length=t
        )
        share.backward()
        grad[rows] = part.grad
        total = total + share.detach()
    torch.testing.assert_close(total, big.detach())
    torch.testing.assert_close(grad, g_big)


def test_aggregate_rejects_unknown_mode_and_handles_empty_mask():
    with pytest.raises(ValueError):
        aggregate_loss(torch.zeros(1, 1), torch.ones(1, 1), "sum")  # type: ignore[arg-type]
    assert aggregate_loss(torch.ones(2, 2), torch.zeros(2, 2)).item() == 0.0


def test_masked_mean_ignores_nan_padding():
    x = torch.tensor([[1.0, 3.0, float("nan")]])
    m = torch.tensor([[1, 1, 0]])
    assert masked_mean(x, m).item() == 2.0
    torch.testing.assert_close(masked_mean(x, m, dim=-1), torch.tensor([2.0]))
    assert masked_mean(x, torch.zeros_like(m)).item() == 0.0


def test_kl_k3_values():
    # ref - logp = ln(0.25) - ln(0.5) = -ln 2: exp(-ln 2) + ln 2 - 1 = 0.5 + 0.693147 - 1 = 0.193147
    kl = kl_k3(torch.tensor([math.log(0.5), -1.0]), torch.tensor([math.log(0.25), -1.0]))
    torch.testing.assert_close(kl, torch.tensor([0.5 + math.log(2) - 1, 0.0]))
    assert (kl_k3(torch.randn(100), torch.randn(100)) >= 0).all()


def test_entropy_from_logits():
    # p = [0.5, 0.25, 0.25]: H = 0.5 ln 2 + 2 * 0.25 ln 4 = 1.5 ln 2; uniform over 4: ln 4.
    logits = torch.tensor([[math.log(0.5), math.log(0.25), math.log(0.25), -math.inf], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(entropy_from_logits(logits), torch.tensor([1.5 * math.log(2), math.log(4)]))
    assert entropy_from_logits(logits.bfloat16()).dtype == torch.float32


def test_token_logprobs_matches_log_softmax_at_temperature():
    torch.manual_seed(2)
    logits = torch.randn(2, 4, 11)
    ids = torch.randint(0, 11, (2, 4))
    for temp in (1.0, 0.7):
        expected = torch.log_softmax(logits / temp, -1).gather(-1, ids[..., None]).squeeze(-1)
        torch.testing.assert_close(token_logprobs(logits, ids, temp), expected)
    # hand-computed: logits [0, ln 3] at T=1 -> p = [1/4, 3/4]
    lp = token_logprobs(torch.tensor([[[0.0, math.log(3)]]]), torch.tensor([[1]]))
    assert lp.item() == pytest.approx(math.log(0.75))
    with pytest.raises(ValueError):
        token_logprobs(logits, ids, 0.0)


def test_logprob_mismatch_metrics():
    sampler = torch.tensor([[-1.0, -2.0, -3.0]])
    trainer = torch.tensor([[-1.1, -2.0, -2.5]])
    mask = torch.tensor([[1, 1, 0]])
    m = logprob_mismatch(sampler, trainer, mask)
    assert m["sampling/sampling_logp_difference/mean"].item() == pytest.approx(0.05, abs=1e-6)
    assert m["sampling/sampling_logp_difference/max"].item() == pytest.approx(0.1, abs=1e-6)
    assert m["sampling/importance_sampling_ratio/min"].item() == pytest.approx(math.exp(-0.1), abs=1e-6)
    assert m["sampling/importance_sampling_ratio/max"].item() == pytest.approx(1.0)
    assert m["sampling/importance_sampling_ratio/mean"].item() == pytest.approx((math.exp(-0.1) + 1) / 2)
    assert m["sampling/kl_k3"].item() == pytest.approx((math.exp(-0.1) + 0.1 - 1) / 2, abs=1e-7)
    empty = logprob_mismatch(sampler, trainer, torch.zeros_like(mask))
    assert all(v.item() == 0.0 for v in empty.values())


def test_dr_grpo_normaliser_is_the_constant_budget_not_the_batch_width():
    """Token sums over sequences x max_length: trimming padding columns off a batch changes nothing."""
    per_token = torch.tensor([[1.0, 2.0, 0.0, 0.0], [3.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0]])
    agg = "seq-mean-token-sum-norm"
    assert aggregate_loss(per_token, mask, agg, max_length=10).item() == pytest.approx(6 / (2 * 10))
    assert aggregate_loss(per_token[:, :2], mask[:, :2], agg, max_length=10).item() == pytest.approx(0.3)
    assert aggregate_loss(per_token, mask, agg, normalizer=4, max_length=10).item() == pytest.approx(6 / 40)
    with pytest.raises(ValueError, match="max_length"):
        aggregate_loss(per_token, mask, agg)


def test_kl_k3_is_bounded_on_extreme_log_ratios():
    """A token the reference all but forbids: unclamped exp(1000) = inf; clamped, the value is capped at 10
    and the gradient is finite (verl's bounds)."""
    logp = torch.tensor([0.0, -1000.0, math.log(0.5)], requires_grad=True)
    ref = torch.tensor([-1000.0, 0.0, math.log(0.25)])
    kl = kl_k3(logp, ref)
    # ref - logp = -1000 -> clamp -20: exp(-20) + 20 - 1 = 19.0 -> 10; +1000 -> +20: exp(20) - 21 -> 10
    torch.testing.assert_close(kl, torch.tensor([10.0, 10.0, 0.5 + math.log(2) - 1]))
    kl.sum().backward()
    assert torch.isfinite(logp.grad).all()


def test_sequence_level_ratio_is_gspo():
    """Each answer's ratio is the geometric mean of its token ratios, applied to all its tokens."""
    logp, old = _inputs()
    r0, r1 = 0.75 ** (1 / 3), 0.75 ** (1 / 2)  # (1 * 1.5 * 0.5)^(1/3), (1.5 * 0.5)^(1/2)
    loss, _ = clipped_policy_loss(logp, old, ADV, MASK, importance_sampling_level="sequence")
    assert loss.item() == pytest.approx((-3 * r0 + 2 * 2 * r1) / 5, abs=1e-6)
    # eps 0.1: row 1's ratio 0.866 < 0.9 with A < 0 binds the clip for the whole answer (zero gradient);
    # row 0's ratio 0.909 is inside: each of its 3 token losses -r0 moves with every logp_t by -r0 / 3,
    # so d loss / d logp_t = 3 * (-r0 / 3) / 5 (token-mean over 5 tokens).
    loss, metrics = clipped_policy_loss(
        logp, old, ADV, MASK, eps_low=0.1, importance_sampling_level="sequence"
    )
    assert loss.item() == pytest.approx((-3 * r0 + 2 * 2 * 0.9) / 5, abs=1e-6)
    assert metrics["clip_ratio/low_mean"].item() == pytest.approx(2 / 5)
    loss.backward()
    expected = torch.tensor([[-r0 / 5] * 3, [0.0, 0.0, 0.0]])
    torch.testing.assert_close(logp.grad, expected)
    with pytest.raises(ValueError):
        clipped_policy_loss(logp, old, ADV, MASK, importance_sampling_level="batch")  # type: ignore[arg-type]


def test_truncated_importance_weights_scale_the_policy_term_only():
    old = torch.zeros(2, 3)
    sampler = torch.tensor([[0.0, -math.log(3), math.log(2)], [0.0, 0.0, 0.0]])
    w = truncated_is_weights(old, sampler, cap=2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 2.0, 0.5], [1.0, 1.0, 1.0]]))  # 3 is capped to 2
    logp, old_logp = _inputs()
    loss, _ = clipped_policy_loss(logp, old_logp, ADV, MASK, is_weights=w)
    # row 0 per-token [-1.0, -1.2, -0.5] * [1, 2, 0.5]; row 1 [3.0, 1.6] unweighted
    assert loss.item() == pytest.approx((-1.0 - 2.4 - 0.25 + 3.0 + 1.6) / 5, abs=1e-6)
    ref = torch.full_like(RATIOS, math.log(0.5))
    base, _ = clipped_policy_loss(logp, old_logp, ADV, MASK, is_weights=w)
    with_kl, _ = clipped_policy_loss(logp, old_logp, ADV, MASK, is_weights=w, ref_logp=ref, beta=0.1)
    torch.testing.assert_close(with_kl, base + 0.1 * (kl_k3(logp.detach(), ref) * MASK).sum() / 5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_log_probs_and_entropy_equal_the_whole_tensor_path(temperature):
    """Chunks of 3 positions over a strided view (`logits[:, :-1]`, as the trainer slices): values and
    gradients equal log_softmax over the whole float32 tensor."""
    torch.manual_seed(3)
    full = torch.randn(2, 8, 11, requires_grad=True)
    ids = torch.randint(0, 11, (2, 7))
    upstream = torch.randn(2, 7)
    ref = torch.log_softmax(full[:, :-1] / temperature, -1).gather(-1, ids[..., None]).squeeze(-1)
    (g_ref,) = torch.autograd.grad((ref * upstream).sum(), full)
    for rows in (3, None):
        got = token_logprobs(full[:, :-1], ids, temperature, chunk_rows=rows)
        torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)
        (g_got,) = torch.autograd.grad((got * upstream).sum(), full)
        torch.testing.assert_close(g_got, g_ref, rtol=0, atol=1e-6)
        p = torch.softmax(full[:, :-1].detach() / temperature, -1)
        whole = -(p * p.log()).sum(-1)
        torch.testing.assert_close(entropy_from_logits(full[:, :-1], temperature, chunk_rows=rows), whole)
    double = torch.randn(1, 4, 5, dtype=torch.float64, requires_grad=True)
    ids5 = torch.randint(0, 5, (1, 4))
    assert torch.autograd.gradcheck(lambda x: token_logprobs(x, ids5, temperature, chunk_rows=3), (double,))


def test_chunked_log_probs_keep_bf16_gradients_in_bf16():
    torch.manual_seed(4)
    logits = torch.randn(1, 5, 9).bfloat16().requires_grad_(True)
    ids = torch.randint(0, 9, (1, 5))
    logp = token_logprobs(logits, ids, chunk_rows=2)
    assert logp.dtype == torch.float32
    logp.sum().backward()
    assert logits.grad.dtype == torch.bfloat16
    as_fp32 = logits.detach().float().requires_grad_(True)
    torch.log_softmax(as_fp32, -1).gather(-1, ids[..., None]).sum().backward()
    torch.testing.assert_close(logits.grad.float(), as_fp32.grad, rtol=0, atol=1e-2)
