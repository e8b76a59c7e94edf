"""Turn-level GAE, clipped value loss and whitening on hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from swerl.algorithms import clipped_value_loss, turn_level_gae, whiten


def test_gae_gamma_lambda_one_is_monte_carlo_minus_baseline():
    # A_2 = 1 - 0.7 = 0.3; A_1 = (0.7 - 0.6) + 0.3 = 0.4; A_0 = (0.6 - 0.5) + 0.4 = 0.5; returns all 1.
    adv, ret = turn_level_gae(
        torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.6, 0.7]), torch.tensor([0, 0, 1]), 1.0, 1.0
    )
    torch.testing.assert_close(adv, torch.tensor([0.5, 0.4, 0.3]))
    torch.testing.assert_close(ret, torch.tensor([1.0, 1.0, 1.0]))


def test_gae_discounted():
    # gamma 0.9, lam 0.5: deltas 0.9*0.6-0.5 = 0.04, 0.9*0.7-0.6 = 0.03, 1-0.7 = 0.3;
    # A_2 = 0.3, A_1 = 0.03 + 0.45*0.3 = 0.165, A_0 = 0.04 + 0.45*0.165 = 0.11425.
    adv, ret = turn_level_gae(
        torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.6, 0.7]), torch.tensor([0, 0, 1]), 0.9, 0.5
    )
    torch.testing.assert_close(adv, torch.tensor([0.11425, 0.165, 0.3]))
    torch.testing.assert_close(ret, torch.tensor([0.61425, 0.765, 1.0]))


def test_gae_does_not_cross_episode_boundaries():
    # Episodes [turn 0] and [turns 1, 2]: A_2 = 2 - 0.4 = 1.6, A_1 = (0.4 - 0.2) + 1.6 = 1.8, A_0 = 1 - 0.5.
    adv, _ = turn_level_gae(
        torch.tensor([1.0, 0.0, 2.0]), torch.tensor([0.5, 0.2, 0.4]), torch.tensor([1, 0, 1]), 1.0, 1.0
    )
    torch.testing.assert_close(adv, torch.tensor([0.5, 1.8, 1.6]))


def test_gae_bootstraps_from_value_after_last_turn_and_batches():
    # Cut-off trajectory: A_1 = 0.9 - 0.6 = 0.3, A_0 = (0.6 - 0.5) + 0.3 = 0.4.
    rewards = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 0.9], [0.5, 0.6, 0.9]])
    dones = torch.tensor([[0, 0], [0, 1]])
    adv, _ = turn_level_gae(rewards, values, dones)
    # second row ends: A_1 = 1 - 0.6 = 0.4, A_0 = 0.1 + 0.4 = 0.5 (the 0.9 is never used).
    torch.testing.assert_close(adv, torch.tensor([[0.4, 0.3], [0.5, 0.4]]))
    with pytest.raises(ValueError):
        turn_level_gae(rewards, torch.zeros(2, 5), dones)


def test_clipped_value_loss():
    # entry 0: V_clip 0.7, errors 1.0 vs 1.69 -> 1.69 (clip binds); entry 1: V_clip 0.3, 0 vs 0.09 -> 0.09
    # (binds); entry 2: inside the clip, 0.36 both. loss = 0.5 * (1.69 + 0.09 + 0.36) / 3.
    values = torch.tensor([1.0, 0.0, 0.6], requires_grad=True)
    loss, m = clipped_value_loss(
        values, torch.tensor([0.5, 0.5, 0.5]), torch.tensor([2.0, 0.0, 0.0]), clip=0.2
    )
    assert loss.item() == pytest.approx(0.5 * 2.14 / 3)
    assert m["vf_clipfrac"].item() == pytest.approx(2 / 3)
    loss.backward()
    # clipped entries have zero gradient; entry 2: 0.5 * 2 * 0.6 / 3 = 0.2
    torch.testing.assert_close(values.grad, torch.tensor([0.0, 0.0, 0.2]))
    masked, _ = clipped_value_loss(
        values, torch.tensor([0.5, 0.5, 0.5]), torch.tensor([2.0, 0.0, 0.0]), 0.2, torch.tensor([0, 0, 1])
    )
    assert masked.item() == pytest.approx(0.18)


def test_whiten():
    x = torch.tensor([1.0, 2.0, 3.0, 100.0])
    mask = torch.tensor([1, 1, 1, 0])
    # masked mean 2, unbiased var 1: [-1, 0, 1]; the masked-out 100 is untouched.
    torch.testing.assert_close(whiten(x, mask), torch.tensor([-1.0, 0.0, 1.0, 100.0]))
    torch.testing.assert_close(whiten(x, mask, shift_mean=False), torch.tensor([1.0, 2.0, 3.0, 100.0]))
    y = torch.tensor([1.0, 3.0])  # var 2 -> [-1, 1] / sqrt(2)
    torch.testing.assert_close(whiten(y), torch.tensor([-1.0, 1.0]) / 2**0.5)
