"""RLEF's per-turn rewards and turn-level GAE on hand-computed numbers."""

from __future__ import annotations

import pytest
import torch

from swerl.algorithms import kl_penalized_rewards, turn_level_gae, whiten
from swerl.environments.codecontests import EpisodeConfig, TurnRecord, task_reward
from swerl.trainers.rlef import turn_tensor


def test_kl_penalized_rewards_by_hand() -> None:
    # Episode A: wrong first answer (r=0 until the end), right second answer (+1).
    # log pi(a_t|c_t) summed over the answer's tokens: -3.0, -2.0; log rho: -2.5, -2.4.
    task = torch.tensor([[0.0, 1.0]])
    rewards = kl_penalized_rewards(
        task, torch.tensor([[-3.0, -2.0]]), torch.tensor([[-2.5, -2.4]]), beta=0.05
    )
    # R_1 = 0 - 0.05 * (-3.0 + 2.5) = 0.025;  R_2 = 1 - 0.05 * (-2.0 + 2.4) = 0.98
    assert rewards.flatten().tolist() == pytest.approx([0.025, 0.98])


def test_turn_level_gae_by_hand() -> None:
    rewards = torch.tensor([[0.025, 0.98], [-1.0, 0.0]])  # episode B has one turn (padded)
    values = torch.tensor([[0.2, 0.5], [0.1, 0.0]])
    dones = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    adv, ret = turn_level_gae(rewards, values, dones, gamma=1.0, lam=0.9)
    # A: delta_2 = 0.98 - 0.5 = 0.48 = A_2;  delta_1 = 0.025 + 0.5 - 0.2 = 0.325, A_1 = 0.325 + 0.9 * 0.48
    # B: A_1 = -1 - 0.1 (terminal), the padded turn stays 0
    assert adv.flatten().tolist() == pytest.approx([0.757, 0.48, -1.1, 0.0])
    assert ret.flatten().tolist() == pytest.approx([0.957, 0.98, -1.0, 0.0])
    adv, _ = turn_level_gae(rewards[:1], values[:1], dones[:1], gamma=0.9, lam=0.8)
    # delta_1 = 0.025 + 0.9 * 0.5 - 0.2 = 0.275; A_1 = 0.275 + 0.72 * 0.48
    assert adv.flatten().tolist() == pytest.approx([0.6206, 0.48])


def test_whitening_uses_real_turns_only() -> None:
    adv = torch.tensor([[0.757, 0.48], [-1.1, 0.0]])
    mask = torch.tensor([[True, True], [True, False]])
    white = whiten(adv, mask)
    real = torch.tensor([0.757, 0.48, -1.1])
    expected = (real - real.mean()) / real.std()  # unbiased std, as verl
    assert white[mask].tolist() == pytest.approx(expected.tolist(), abs=1e-6)
    assert white[1, 1].item() == 0.0


def test_task_rewards() -> None:
    cfg = EpisodeConfig()

    def turn(code: str | None, private: bool | None = None) -> TurnRecord:
        return TurnRecord(0, [], [], "", code, public_passed=bool(private), private_passed=private)

    assert task_reward(turn("print(1)"), final=False, config=cfg) == 0.0
    assert task_reward(turn(None), final=False, config=cfg) == -0.2
    # A final answer without valid code fails like a wrong program: -1, never the -0.2 of earlier turns.
    assert task_reward(turn(None, False), final=True, config=cfg) == -1.0
    assert task_reward(turn("print(1)", True), final=True, config=cfg) == 1.0
    assert task_reward(turn("print(1)", False), final=True, config=cfg) == -1.0


def test_turn_tensor_pads_with_zeros() -> None:
    assert turn_tensor([[1.0, 2.0], [3.0]], 3).tolist() == [[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]]
