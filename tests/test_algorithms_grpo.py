"""GRPO advantages on numbers worked out by hand (see the comments for the arithmetic)."""

from __future__ import annotations

import math

import pytest
import torch

from swerl.algorithms import (
    group_advantages,
    group_reward_metrics,
    soft_overlong_penalty,
    zero_std_groups,
)

EPS = 1e-4


def test_group_scale_uses_unbiased_std():
    # Group [1, 2, 3]: mean 2, unbiased std sqrt((1 + 0 + 1) / 2) = 1 -> (r - 2) / (1 + eps).
    adv = group_advantages(torch.tensor([1.0, 2.0, 3.0]), group_size=3)
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0]) / (1 + EPS))


def test_std_choice_is_unbiased_not_population():
    # Group [0, 1]: unbiased std sqrt(0.5) = 0.70711 -> +-0.5 / 0.70721 = +-0.70700;
    # the population std (0.5) would give +-0.99980 instead.
    adv = group_advantages(torch.tensor([0.0, 1.0]), group_size=2)
    expected = 0.5 / (math.sqrt(0.5) + EPS)
    torch.testing.assert_close(adv, torch.tensor([-expected, expected]))
    assert abs(adv[1].item() - 0.5 / (0.5 + EPS)) > 0.2
    # and it is exactly torch.std's default (TRL's choice).
    r = torch.tensor([0.3, -1.0, 0.9, 0.1])
    torch.testing.assert_close(group_advantages(r, 4), (r - r.mean()) / (r.std() + EPS))


def test_groups_are_independent_and_contiguous():
    # [1, 2, 3 | 5, 5, 5]: first group as above, second group constant -> zeros (0 / (0 + eps)).
    adv = group_advantages(torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0]), group_size=3)
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]) / (1 + EPS))


def test_batch_scale_uses_one_std_over_all_rewards_but_group_means():
    # Centered by group means (2 and 5): [-1, 0, 1, 0, 0, 0].
    # Batch: mean 3.5, squared deviations 6.25 + 2.25 + 0.25 + 3 * 2.25 = 15.5, unbiased var 15.5 / 5 = 3.1.
    rewards = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])
    adv = group_advantages(rewards, group_size=3, scale="batch")
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]) / (math.sqrt(3.1) + EPS))


def test_no_scale_only_centers():
    adv = group_advantages(torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0]), group_size=3, scale="none")
    torch.testing.assert_close(adv, torch.tensor([-1.0, 0.0, 1.0, 0.0, 0.0, 0.0]))


def test_custom_eps_and_dtype():
    adv = group_advantages(torch.tensor([0.0, 2.0], dtype=torch.bfloat16), group_size=2, eps=0.5)
    # mean 1, unbiased std sqrt(2) -> +-1 / (1.41421 + 0.5)
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, torch.tensor([-1.0, 1.0]) / (math.sqrt(2) + 0.5))


def test_group_of_one_gives_zero_not_nan():
    adv = group_advantages(torch.tensor([0.7, -1.0]), group_size=1)
    assert torch.equal(adv, torch.zeros(2))
    assert torch.equal(group_advantages(torch.tensor([0.7]), 1, scale="batch"), torch.zeros(1))


@pytest.mark.parametrize("size", [0, 4])
def test_bad_group_size_is_refused(size):
    with pytest.raises(ValueError):
        group_advantages(torch.zeros(6), group_size=size)
    with pytest.raises(ValueError):
        group_advantages(torch.zeros(6), group_size=3, scale="population")  # type: ignore[arg-type]


def test_zero_std_groups_and_metrics():
    rewards = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0, -1.0, -1.0, -1.0 + 1e-6])
    assert zero_std_groups(rewards, 3).tolist() == [False, True, False]  # any difference is a signal
    m = group_reward_metrics(rewards[:6], 3)
    torch.testing.assert_close(m["reward"], torch.tensor(3.5))
    torch.testing.assert_close(m["reward_std"], torch.tensor(0.5))  # mean of stds 1 and 0
    torch.testing.assert_close(m["frac_reward_zero_std"], torch.tensor(0.5))


def test_soft_overlong_penalty():
    """Budget 10, buffer 4: free up to 6 tokens, then -1/4 per token to -1 at 10 (DAPO eq. 13)."""
    lengths = torch.tensor([5, 6, 7, 9, 10])
    torch.testing.assert_close(
        soft_overlong_penalty(lengths, max_length=10, buffer=4), torch.tensor([0.0, 0.0, -0.25, -0.75, -1.0])
    )
    torch.testing.assert_close(
        soft_overlong_penalty(lengths, 10, 4, factor=0.5), torch.tensor([0.0, 0.0, -0.125, -0.375, -0.5])
    )
    assert soft_overlong_penalty(lengths, 10, 0).abs().sum().item() == 0.0
    with pytest.raises(ValueError):
        soft_overlong_penalty(lengths, 10, 11)
