"""GRPO for SWE-RL: sample G answers per issue, score them, push the policy toward the better ones.

One step, top to bottom (`GRPOTrainer.train_step`):

1. rollout   — this rank's share of the prompts, G answers each (a group never spans ranks);
2. reward    — each group scored together (the oracle diff is computed once per group), on a background
               thread while the next groups generate (`overlap_rewards`), plus DAPO's soft
               overlong penalty when configured; under dynamic sampling, rounds 1-2 repeat with fresh
               prompts until every rank holds its share of groups whose rewards differ (bounded rounds);
3. advantage — (r - group mean) / (group std + eps), on the *global* rewards so "batch" scaling and the
               logged metrics see every rank's groups; zero-std groups are counted and optionally dropped;
4. update    — mu passes; each pass is micro-batches of clipped-ratio loss, token-mean over the global
               batch, then one optimizer step. Pass 1 of mu = 1 has ratio 1 (plain policy gradient).
               Truncated importance weights correct for a sampler that is not the learner.
5. log and checkpoint.

The trainer holds no algorithm: advantages, losses and KL come from `swerl.algorithms`.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from swerl.algorithms import (
    clipped_policy_loss,
    group_advantages,
    group_reward_metrics,
    logprob_mismatch,
    masked_mean,
    soft_overlong_penalty,
    truncated_is_weights,
    zero_std_groups,
)
from swerl.errors import UserError
from swerl.learner import Learner
from swerl.learner.dist import all_gather_floats, all_reduce
from swerl.learner.learner import AdaptersOff, FrozenModel
from swerl.rollout.base import SamplingParams, generate_groups
from swerl.trainers.common import (
    PackedBatch,
    copy_model,
    evaluate,
    load_reference,
    pack_sequences,
)
from swerl.trainers.config import GRPOConfig
from swerl.trainers.data import EpochSampler, Example, rank_slice
from swerl.trainers.loop import TrainLoop, build_engine, load_run, load_run_tokenizer, pad_id, write_config
from swerl.trainers.rewards import BackgroundRewards, GroupReward


@dataclass
class Rollout:
    """One step's groups on this rank: prompts, completions, reward results and the rewards trained on
    (reward + overlong penalty), flat in group order; `first` is the first round alone (what metrics
    describe, so dynamic sampling does not flatter the logged reward)."""

    examples: list[Example] = field(default_factory=list)
    completions: list[Any] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    rounds: int = 0
    first: Rollout | None = None
    generate_seconds: float = 0.0
    reward_seconds: float = 0.0
    reward_wait_seconds: float = 0.0

    def extend(self, other: Rollout, groups: Sequence[int], g: int) -> None:
        """Append groups `groups` (indices into `other`'s groups of size g)."""
        for k in groups:
            self.examples.append(other.examples[k])
            rows = slice(k * g, (k + 1) * g)
            self.completions += other.completions[rows]
            self.results += other.results[rows]
            self.rewards += other.rewards[rows]


class GRPOTrainer(TrainLoop):
    """Holds the run's pieces; `train()` (in TrainLoop) is the loop, `train_step()` one rollout batch."""

    desc = "grpo"

    def __init__(
        self,
        config: GRPOConfig,
        model: Any,
        tokenizer: Any,
        train_examples: Sequence[Example],
        reward_fn: GroupReward,
        *,
        engine: Any = None,
        eval_examples: Sequence[Example] = (),
        reference: Any = None,
        progress: bool = True,
    ) -> None:
        """`reference`: the KL anchor for beta > 0 (`load_reference` of the start model, which a resumed
        run must pass: `model` is then the checkpoint's policy); None copies `model` (a fresh start)."""
        super().__init__(config, tokenizer, progress)
        self.examples = list(train_examples)
        self.eval_examples = list(eval_examples)
        self.reward_fn = reward_fn
        self.pad_id = pad_id(tokenizer, model)
        # The reference is the frozen *initial* policy; beta = 0 (the default) needs none. A LoRA run's is
        # the policy with its adapters off; otherwise a model held like the policy (its own DeepSpeed
        # engine, sharded under ZeRO-3; the same dtype and autocast).
        needs_copy = config.beta > 0 and reference is None and not config.use_peft
        reference = copy_model(model) if needs_copy else reference
        self.learner = Learner(model, config, config.max_steps * config.num_iterations, self.dist)
        self.ref_model: FrozenModel | AdaptersOff | None = None
        if config.beta > 0:
            self.ref_model = (
                AdaptersOff(self.learner) if config.use_peft else FrozenModel(reference, self.learner)
            )
        self.engine = (
            engine if engine is not None else build_engine(config, self.learner.module, tokenizer, self.dist)
        )
        self.sampler = EpochSampler(len(self.examples), config.seed)
        self.num_tokens = 0

    # ------------------------------------------------------------------------------------------ step
    def train_step(self) -> dict[str, float]:
        cfg, dist = self.config, self.dist
        t0 = time.perf_counter()

        # 1-2. Rollout and reward (more rounds under dynamic sampling).
        roll = self.rollout()
        first = roll.first or roll
        completions = roll.completions
        prompts = [e.prompt_ids for e in roll.examples for _ in range(cfg.num_generations)]
        t_reward = time.perf_counter()

        # 3. Advantages from the global rewards; this rank keeps the slice of its own groups.
        local_rewards = roll.rewards
        counts = all_gather_floats([float(len(local_rewards))])
        global_rewards = torch.tensor(all_gather_floats(local_rewards))
        # An infrastructure failure says nothing about its answer: it stays out of the update.
        keep = [i for i, r in enumerate(roll.results) if getattr(r, "outcome", None) != "infra_error"]
        batch = None
        if global_rewards.numel():
            advantages = group_advantages(global_rewards, cfg.num_generations, scale=cfg.scale_rewards)
            lo = int(sum(counts[: dist.rank]))
            advantages = advantages[lo : lo + len(local_rewards)]
            if cfg.drop_zero_std_groups and keep:
                flat = zero_std_groups(torch.tensor(local_rewards), cfg.num_generations)
                keep = [i for i in keep if not flat[i // cfg.num_generations]]
            if keep:
                kept = [completions[i] for i in keep]
                batch = pack_sequences(
                    [prompts[i] for i in keep],
                    [c.token_ids for c in kept],
                    self.pad_id,
                    dist.device,
                    advantages=advantages[keep],
                    sampler_logp=[c.logprobs for c in kept],
                )
                if cfg.mask_truncated_completions:
                    cut = [row for row, c in enumerate(kept) if getattr(c, "finish_reason", "") == "length"]
                    batch.completion_mask[cut] = 0

        # 4. Update: mu passes over the batch, each one optimizer step, while a colocated vLLM sleeps;
        #    the sampler then gets the new weights.
        self.rest_engine()
        train_stats = self.update(batch)
        self.sync_engine()
        t_train = time.perf_counter()

        # 5. Metrics over the global batch of the first round (TRL's names).
        first_prompts = [e.prompt_ids for e in first.examples for _ in range(cfg.num_generations)]
        metrics = self.rollout_metrics(
            torch.tensor(all_gather_floats(first.rewards)), first.completions, first_prompts, first.results
        )
        metrics.update(train_stats)
        if cfg.dynamic_sampling:
            metrics["dynamic_sampling/rounds"] = float(roll.rounds)
            metrics["dynamic_sampling/filled"] = len(global_rewards) / (
                cfg.prompts_per_step * cfg.num_generations
            )
        step_tokens = all_reduce(
            torch.tensor(float(sum(map(len, prompts)) + sum(len(c.token_ids) for c in completions)))
        )
        self.num_tokens += int(step_tokens.item())
        metrics.update(
            {
                "num_tokens": float(self.num_tokens),
                "step_time": t_train - t0,
                "time/generate": roll.generate_seconds,
                "time/reward": roll.reward_seconds,
                "time/reward_wait": roll.reward_wait_seconds,
                "time/train": t_train - t_reward,
                "tokens_per_second": float(step_tokens) / (t_train - t0),
            }
        )
        return metrics

    # ------------------------------------------------------------------------------------- the pieces
    def rollout(self) -> Rollout:
        """This rank's groups for one step: one round of prompts_per_step prompts, or under dynamic
        sampling (DAPO) as many rounds as it takes every rank to hold its share of groups whose rewards
        differ, at most max_sampling_rounds. Every rank runs the same number of rounds (the sampler and
        the gathered weights for generation are collective); a rank already full samples nothing."""
        cfg, dist = self.config, self.dist
        g = cfg.num_generations
        share = cfg.prompts_per_step // dist.world_size
        out = Rollout()
        while True:
            indices = rank_slice(self.sampler.next_batch(cfg.prompts_per_step), dist.rank, dist.world_size)
            wanted = share - len(out.examples) if cfg.dynamic_sampling else share
            this = self.sample_round([self.examples[i] for i in indices[:wanted]])
            out.rounds += 1
            out.generate_seconds += this.generate_seconds
            out.reward_seconds += this.reward_seconds
            out.reward_wait_seconds += this.reward_wait_seconds
            if out.first is None:
                out.first = this
            if not cfg.dynamic_sampling:
                this.first, this.rounds = None, 1
                return this
            flat = zero_std_groups(torch.tensor(this.rewards), g) if this.rewards else torch.zeros(0)
            out.extend(this, [k for k in range(len(this.examples)) if not flat[k]], g)
            missing = all_reduce(torch.tensor(float(share - len(out.examples))))
            if float(missing) <= 0 or out.rounds >= cfg.max_sampling_rounds:
                return out

    def sample_round(self, examples: list[Example]) -> Rollout:
        """G answers per example, scored; rewards carry the soft overlong penalty when it is on.

        With `overlap_rewards` each group is scored on a background thread as soon as the engine has it,
        while the rest are sampled; the results are the sequential path's, in the same group order.
        """
        cfg = self.config
        prompts = [e.prompt_ids for e in examples]
        t0 = time.perf_counter()
        if cfg.overlap_rewards:
            with BackgroundRewards(self.reward_fn) as scorer:
                groups: list[list[Any]] = [[] for _ in examples]
                with self.sampling():
                    for k, group in generate_groups(self.engine, prompts, self.sampling_params()):
                        groups[k] = group
                        scorer.submit(k, examples[k], group)
                t1 = time.perf_counter()
                # A failed reward is raised here, after generation: every rank has then ended the round's
                # collective sampling, as in the sequential path.
                scored = scorer.results()
                t2 = time.perf_counter()
            reward_seconds = scorer.busy_seconds
        else:
            groups = self.generate(prompts)
            t1 = time.perf_counter()
            scored = [self.reward_fn(e, group) for e, group in zip(examples, groups, strict=True)]
            t2 = time.perf_counter()
            # One interval for both, so the sequential path's wait is exactly its reward time.
            reward_seconds = t2 - t1
        results = [r for group in scored for r in group]
        completions = [c for group in groups for c in group]
        rewards = torch.tensor([r.reward for r in results], dtype=torch.float32)
        if cfg.overlong_buffer_length and completions:
            lengths = torch.tensor([len(c.token_ids) for c in completions])
            rewards = rewards + soft_overlong_penalty(
                lengths, cfg.max_completion_length, cfg.overlong_buffer_length, cfg.overlong_penalty_factor
            )
        return Rollout(
            examples,
            completions,
            results,
            _without_infra_errors(rewards.tolist(), results, cfg.num_generations),
            generate_seconds=t1 - t0,
            reward_seconds=reward_seconds,
            reward_wait_seconds=t2 - t1,
        )

    def sampling_params(self) -> SamplingParams:
        """The config's sampling settings, G answers per prompt."""
        cfg = self.config
        return SamplingParams.from_known(
            n=cfg.num_generations,
            max_new_tokens=cfg.max_completion_length,
            temperature=cfg.temperature,
            top_p=cfg.top_p,
            top_k=cfg.top_k or 0,
        )

    def generate(self, prompts: list[list[int]]) -> list[list[Any]]:
        """G completions per prompt from the current weights (gathered first under ZeRO-3)."""
        # Called even with nothing to sample: gathering weights (ZeRO-3, transformers engine) and a
        # tensor-parallel vLLM group's prompt gather are collective.
        with self.sampling():
            return self.engine.generate(prompts, self.sampling_params())

    def update(self, batch: PackedBatch | None) -> dict[str, float]:
        """mu optimizer steps on one rollout batch; returns loss, kl, entropy, clip ratios, grad norm."""
        cfg, dist = self.config, self.dist
        n_local = 0 if batch is None else len(batch)
        plan = self.micro_batches(n_local)
        tokens = 0.0 if batch is None else float(batch.completion_mask.sum())
        seqs = 0.0 if batch is None else float((batch.completion_mask.sum(-1) > 0).sum())
        global_count = all_reduce(torch.tensor([tokens, seqs], dtype=torch.float64))
        denom = float(global_count[0] if cfg.loss_aggregation == "token-mean" else global_count[1])
        if denom == 0:
            return {"loss": 0.0}
        # Gradients are averaged over ranks, so each rank's share is scaled back up by world_size.
        normalizer = denom / dist.world_size

        if cfg.num_iterations > 1 or self.ref_model is not None:
            self.precompute_logprobs(batch, plan)

        sums: defaultdict[str, float] = defaultdict(float)
        step_stats: dict[str, float] = {}
        for iteration in range(cfg.num_iterations):
            for rows, last in plan:
                if rows is None:
                    self.learner.backward(self.dummy_loss(), last=last)
                    continue
                mb = batch.micro_batch(rows)
                logp, entropy = self.logprobs(self.learner.forward, mb, with_entropy=iteration == 0)
                old_logp = mb["old_logp"] if mb["old_logp"] is not None else logp.detach()
                is_weights = self.is_weights(old_logp, mb["sampler_logp"])
                loss, stats = clipped_policy_loss(
                    logp,
                    old_logp,
                    mb["advantages"],
                    mb["completion_mask"],
                    eps_low=cfg.epsilon,
                    eps_high=cfg.epsilon_high,
                    aggregation=cfg.loss_aggregation,
                    normalizer=normalizer,
                    ref_logp=mb["ref_logp"],
                    beta=cfg.beta,
                    importance_sampling_level=cfg.importance_sampling_level,
                    is_weights=is_weights,
                    max_length=cfg.max_completion_length,
                )
                self.learner.backward(loss, last=last)
                if iteration == 0:
                    mask = mb["completion_mask"]
                    n_tok = float(mask.sum())
                    sums["loss"] += float(loss.detach()) / dist.world_size
                    sums["entropy"] += float(masked_mean(entropy, mask)) * n_tok
                    sums["tokens"] += n_tok
                    if is_weights is not None:
                        stats["sampling/is_weight/mean"] = masked_mean(is_weights, mask)
                        capped = is_weights >= cfg.importance_sampling_cap
                        stats["sampling/is_weight/capped_frac"] = masked_mean(capped.float(), mask)
                    for name, value in stats.items():
                        sums[name] += float(value) * n_tok
                    if mb["sampler_logp"] is not None:
                        for name, value in logprob_mismatch(mb["sampler_logp"], logp.detach(), mask).items():
                            sums[name] += float(value) * n_tok
            step_stats = self.learner.step()
        return self.reduce_update_stats(sums, step_stats)

    def is_weights(self, old_logp: Tensor, sampler_logp: Tensor | None) -> Tensor | None:
        """Truncated importance weights against the sampler's log-probs, when the correction is on."""
        cfg = self.config
        if not cfg.corrects_sampler():
            return None
        if sampler_logp is None:
            raise UserError(
                f"importance_sampling_correction needs the sampler's log-probs, and rollout engine "
                f"{cfg.rollout_engine!r} returned none: set importance_sampling_correction: false"
            )
        return truncated_is_weights(old_logp, sampler_logp, cfg.importance_sampling_cap)

    def precompute_logprobs(
        self, batch: PackedBatch | None, plan: list[tuple[list[int] | None, bool]]
    ) -> None:
        """Old log-probs (policy before this batch's updates) for mu > 1, reference log-probs for beta > 0.

        As many policy forwards as the update (`plan`), since ZeRO-3 gathers parameters inside forward.
        """
        cfg = self.config
        with torch.no_grad():
            if batch is not None:
                n, c = batch.completion_ids.shape
                if cfg.num_iterations > 1:
                    batch.old_logp = torch.zeros(n, c, device=self.dist.device)
                if self.ref_model is not None:
                    batch.ref_logp = torch.zeros(n, c, device=self.dist.device)
            for rows, _ in plan:
                if rows is None:  # ZeRO-3 gathers inside forward: as many forwards as the busiest rank
                    if cfg.num_iterations > 1:
                        self.dummy_loss()
                    if self.ref_model is not None:
                        self.dummy_loss(self.ref_model)
                    continue
                mb = batch.micro_batch(rows)
                idx = torch.tensor(rows, device=self.dist.device)
                width = mb["completion_ids"].shape[1]
                if batch.old_logp is not None:
                    batch.old_logp[idx, :width] = self.logprobs(self.learner.forward, mb)[0]
                if batch.ref_logp is not None:
                    batch.ref_logp[idx, :width] = self.logprobs(self.ref_model, mb)[0]

    def reduce_update_stats(self, sums: dict[str, float], step_stats: dict[str, float]) -> dict[str, float]:
        """Token-weighted means over every rank's micro-batches of the first pass."""
        names = sorted(k for k in sums if k not in {"loss", "tokens"})
        values = all_reduce(
            torch.tensor([sums["loss"], sums["tokens"], *(sums[k] for k in names)], dtype=torch.float64)
        )
        tokens = max(1.0, float(values[1]))
        out = {"loss": float(values[0])}
        out.update({name: float(v) / tokens for name, v in zip(names, values[2:].tolist(), strict=True)})
        out.update(step_stats)
        return out

    def rollout_metrics(
        self, global_rewards: Tensor, completions: list[Any], prompts: list[list[int]], results: list[Any]
    ) -> dict[str, float]:
        """reward, reward_std, frac_reward_zero_std, completion lengths and malformed rates (global)."""
        g = self.config.num_generations
        metrics = {k: float(v) for k, v in group_reward_metrics(global_rewards, g).items()}
        lengths = all_gather_floats([float(len(c.token_ids)) for c in completions])
        clipped = all_gather_floats([float(getattr(c, "finish_reason", "") == "length") for c in completions])
        terminated = [n for n, cut in zip(lengths, clipped, strict=True) if not cut]
        metrics.update(
            {
                "completions/mean_length": sum(lengths) / len(lengths),
                "completions/min_length": min(lengths),
                "completions/max_length": max(lengths),
                "completions/clipped_ratio": sum(clipped) / len(clipped),
                "completions/mean_terminated_length": sum(terminated) / len(terminated)
                if terminated
                else 0.0,
            }
        )
        kinds = Counter(r.error for r in results if r.error)
        names = sorted(set(_ERROR_KINDS) | set(kinds))
        counts = all_reduce(torch.tensor([float(kinds.get(k, 0)) for k in names], dtype=torch.float64))
        total = len(global_rewards)
        metrics["malformed_rate"] = float(counts.sum()) / total
        for name, count in zip(names, counts.tolist(), strict=True):
            metrics[f"malformed/{name}"] = count / total
        if self.config.reward in ("execution", "hybrid"):
            metrics.update(kind_metrics(results))
        return metrics

    # ------------------------------------------------------------------------------------ state
    def trainer_state(self) -> dict[str, Any]:
        return {**super().trainer_state(), "num_tokens": self.num_tokens}

    def load(self, ckpt: Path) -> dict[str, Any]:
        state = super().load(ckpt)
        self.num_tokens = state["num_tokens"]
        return state

    def evaluate(self, examples: Sequence[Example] | None = None) -> Any:
        """Held-out mean reward and malformed rate with the current weights (one answer per prompt)."""
        cfg = self.config
        with self.sampling():
            return evaluate(
                self.engine,
                list(examples if examples is not None else self.eval_examples),
                self.reward_fn,
                max_new_tokens=cfg.max_completion_length,
                temperature=cfg.eval_temperature,
            )


def _without_infra_errors(rewards: list[float], results: Sequence[Any], g: int) -> list[float]:
    """Rewards with each infrastructure failure set to the mean of its group's other answers, so that
    the group's baseline is theirs alone (the failed answer itself is left out of the update)."""
    out = list(rewards)
    for lo in range(0, len(out), g):
        failed = [i for i in range(lo, lo + g) if getattr(results[i], "outcome", None) == "infra_error"]
        if failed:
            judged = [out[i] for i in range(lo, lo + g) if i not in failed]
            mean = sum(judged) / len(judged) if judged else 0.0
            for i in failed:
                out[i] = mean
    return out


def kind_metrics(results: Sequence[Any]) -> dict[str, float]:
    """Per-reward metrics over every rank: `reward/execution` and `reward/similarity` (means over the
    answers each judged), `execution/pass_rate` (resolved share of the executed answers) and
    `reward/infra_errors` (answers whose run failed, not trained on)."""
    executed = [r for r in results if r.kind == "execution" and r.outcome != "infra_error"]
    similar = [r for r in results if r.kind != "execution"]
    local = [
        sum(r.reward for r in executed),
        len(executed),
        sum(r.reward for r in similar),
        len(similar),
        sum(r.outcome == "resolved" for r in executed),
        sum(r.outcome == "infra_error" for r in results),
    ]
    exec_sum, n_exec, sim_sum, n_sim, resolved, infra = all_reduce(
        torch.tensor([float(v) for v in local], dtype=torch.float64)
    ).tolist()
    metrics = {"reward/infra_errors": infra}
    if n_exec:
        metrics.update({"reward/execution": exec_sum / n_exec, "execution/pass_rate": resolved / n_exec})
    if n_sim:
        metrics["reward/similarity"] = sim_sum / n_sim
    return metrics


_ERROR_KINDS = ("tag_count", "empty_thought", "no_blocks", "search_not_found", "search_equals_replace")


def run(config: GRPOConfig, progress: bool = True) -> dict[str, Any]:
    """Everything `swerl train grpo` does: load model and data, evaluate, train, evaluate, save the config.

    Resuming loads the model from the checkpoint's HF copy, so weights, optimizer and RNG all come from
    the same step. Returns the held-out reports (before/after) and the training history.
    """
    from swerl.trainers.data import train_and_eval_examples
    from swerl.trainers.rewards import ExecutionGroupReward, build_reward

    examples, skipped, eval_examples = train_and_eval_examples(
        config, load_run_tokenizer(config), config.max_prompt_length
    )
    reward = build_reward(config)
    if isinstance(reward, ExecutionGroupReward):
        refused = reward.unexecutable([*examples, *eval_examples])
        if refused and config.reward == "execution":
            iid, why = refused[0]
            raise UserError(
                f"reward: execution, but {len(refused)} of {len(examples) + len(eval_examples)} rows cannot "
                f"be executed (e.g. {iid}: {why}); use reward: hybrid to score them by similarity, or "
                "leave them out"
            )
        if int(os.environ.get("RANK", "0")) == 0:
            judged = len(examples) + len(eval_examples) - len(refused)
            print(
                f"swerl: reward {config.reward}: {judged} of {len(examples) + len(eval_examples)} rows "
                "are judged by their tests",
                file=sys.stderr,
            )
    ckpt, model, tokenizer = load_run(config)
    # The KL anchor is the start model, loaded afresh (on resume the model is the checkpoint's, and under
    # ZeRO-3 a partitioned policy cannot be copied).
    needs_reference = config.beta > 0 and not config.use_peft  # LoRA: the policy with adapters off
    reference = load_reference(config.model_name_or_path, config) if needs_reference else None
    trainer = GRPOTrainer(
        config,
        model,
        tokenizer,
        examples,
        reward,
        eval_examples=eval_examples,
        reference=reference,
        progress=progress,
    )
    out: dict[str, Any] = {"skipped_long_prompts": skipped, "train_examples": len(examples)}
    if trainer.dist.is_main:
        write_config(config)
    if eval_examples and ckpt is None:
        out["eval_before"] = trainer.evaluate()
    out["history"] = trainer.train()
    if eval_examples:
        out["eval_after"] = trainer.evaluate()
    return out
