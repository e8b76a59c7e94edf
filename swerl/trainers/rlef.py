"""RLEF: PPO over multi-turn dialogs with execution feedback (Gehring et al., 2025).

One step, top to bottom (`RLEFTrainer.train_step`):

1. rollout — this rank's problems, `episodes_per_problem` episodes each (`swerl.environments.dialog`):
             answer, public-test feedback, answer again, up to 3 answers; private tests on the last one;
             the problems are contest problems or repository rows (`task_source`), one loop for both;
2. score   — one teacher-forced pass per dialog under the policy (old log-probs), the frozen start model
             (reference log-probs) and the critic (one value per answer, read at the last context token);
3. reward  — R_t = r_t - beta * log(pi(a_t|c_t) / rho(a_t|c_t)), the log-ratio summed over a_t's tokens;
4. advantage — GAE over the turns of each episode (gamma, lambda), whitened over the global batch;
               each answer's advantage is spread over its tokens;
5. update  — `num_iterations` passes; each is micro-batches of the token-level clipped policy loss
             (feedback and prompt tokens masked out) and the clipped value loss, then one optimizer
             step for the policy and one for the critic;
6. log and checkpoint.

Value function: a separate critic (`TurnCritic`, the start model's transformer plus a scalar head), not a
head on the policy. The policy then stays a plain causal LM, so rollout engines (vLLM weight sync),
`save_pretrained` and the reference copy work on it unchanged; value gradients cannot disturb the
policy's representation (no value-loss coefficient to tune); and the critic gets its own learning rate.
The price is a second model in memory (at 8B with ZeRO-3 sharding that is affordable). Values are read
once per answer, at the last token of its context, because the reward and the advantages are per turn.

Like GRPO, the trainer holds no algorithm: GAE, whitening and the losses come from `swerl.algorithms`;
the loop, learner, checkpoints and logging are the GRPO trainer's (`swerl.trainers.loop.TrainLoop`).
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from swerl.algorithms import (
    clipped_policy_loss,
    clipped_value_loss,
    kl_penalized_rewards,
    masked_mean,
    turn_level_gae,
    whiten,
)
from swerl.environments.codecontests import ContestTask
from swerl.environments.dialog import ChatRenderer, Episode, Judge, Task, run_episodes

if TYPE_CHECKING:
    from swerl.environments.repository import RepositoryTask
from swerl.learner import Learner, MetricsLogger, init_distributed
from swerl.learner.dist import all_gather_floats, all_reduce, barrier
from swerl.learner.learner import AdaptersOff, FrozenModel
from swerl.trainers.common import (
    PackedBatch,
    completion_logprobs,
    copy_model,
    load_reference,
    pack_sequences,
)
from swerl.trainers.config import RLEFConfig
from swerl.trainers.data import EpochSampler, rank_slice
from swerl.trainers.loop import TrainLoop, build_engine, load_run, pad_id, write_config


class TurnCritic(nn.Module):
    """V(context): a causal LM's transformer (no LM head) and a linear head, read at chosen positions.

    The head starts at zero, so the first advantages are plain returns instead of noise from a random
    head. `save_pretrained` writes the backbone in HF form and the head next to it.
    """

    def __init__(self, causal_lm: nn.Module) -> None:
        super().__init__()
        self.backbone = getattr(causal_lm, causal_lm.base_model_prefix)
        self.config = causal_lm.config
        self.head = nn.Linear(causal_lm.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor, **_: Any) -> Tensor:
        hidden = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        return self.head(hidden.to(self.head.weight.dtype)).squeeze(-1)

    def gradient_checkpointing_enable(self, **kwargs: Any) -> None:
        self.backbone.gradient_checkpointing_enable(**kwargs)

    def save_pretrained(self, out_dir: Path, **kwargs: Any) -> None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(out_dir, **kwargs)
        torch.save(self.head.state_dict(), Path(out_dir) / "value_head.pt")

    def load_pretrained(self, out_dir: Path) -> None:
        """Weights written by `save_pretrained` (resume without DeepSpeed, whose checkpoint has its own)."""
        saved = type(self.backbone).from_pretrained(str(out_dir))
        self.backbone.load_state_dict(saved.state_dict())
        self.head.load_state_dict(torch.load(Path(out_dir) / "value_head.pt", weights_only=True))


@dataclass
class DialogBatch:
    """Episodes packed for the learner: [left-padded first prompt | dialog after it], answer tokens masked in.

    `packed.completion_mask` is the answer mask (0 on feedback); `turn_ids` says which answer each
    completion token belongs to (-1 elsewhere); `state_cols[e][t]` is the completion-relative column of
    the last context token of answer t (-1: the last prompt token), where the critic is read.
    """

    packed: PackedBatch
    turn_ids: Tensor  # [E, C]
    state_cols: list[list[int]]
    num_turns: list[int]

    def __len__(self) -> int:
        return len(self.num_turns)


def pack_episodes(episodes: Sequence[Episode], pad_id: int, device: str) -> DialogBatch:
    completions = [ep.tokens[len(ep.prompt_ids) :] for ep in episodes]
    packed = pack_sequences([ep.prompt_ids for ep in episodes], completions, pad_id, device)
    width = packed.completion_ids.shape[1]
    mask = torch.zeros_like(packed.completion_mask)
    turn_ids = torch.full_like(packed.completion_mask, -1)
    for e, ep in enumerate(episodes):
        p = len(ep.prompt_ids)
        # An episode whose tests could not run is no verdict on its answers: none of them is trained on.
        answer = torch.tensor(ep.answer_mask[p:], dtype=mask.dtype) * int(ep.judged)
        turns = torch.tensor(ep.turn_of_token[p:], dtype=turn_ids.dtype)
        mask[e, : len(answer)] = answer[:width]
        turn_ids[e, : len(turns)] = turns[:width]
    packed.completion_mask = mask
    return DialogBatch(
        packed=packed,
        turn_ids=turn_ids,
        state_cols=[[turn.context_len - len(ep.prompt_ids) - 1 for turn in ep.turns] for ep in episodes],
        num_turns=[len(ep.turns) for ep in episodes],
    )


def turn_tensor(values: Sequence[Sequence[float]], width: int) -> Tensor:
    """Ragged per-episode turn values as [E, width], zero-padded."""
    out = torch.zeros(len(values), width)
    for e, row in enumerate(values):
        out[e, : len(row)] = torch.tensor(list(row), dtype=torch.float32)
    return out


# ------------------------------------------------------------------------------------------ trainer
class RLEFTrainer(TrainLoop):
    """Holds the run's pieces; `train()` (in TrainLoop) is the loop, `train_step()` one rollout batch."""

    desc = "rlef"

    def __init__(
        self,
        config: RLEFConfig,
        model: Any,
        tokenizer: Any,
        train_tasks: Sequence[Task],
        *,
        judge: Judge,
        engine: Any = None,
        reference: Any = None,
        critic_start: Any = None,
        progress: bool = True,
    ) -> None:
        """`model` is the policy to train (on resume: the checkpoint's); `reference` is rho, the start
        model (`load_reference`), None for a fresh start where `model` is the start model itself;
        `critic_start` is the critic's transformer before training (another load of the start model),
        None for a copy of `reference`."""
        super().__init__(config, tokenizer, progress)
        self.tasks = list(train_tasks)
        self.judge = judge
        self.renderer = ChatRenderer(tokenizer)
        self.pad_id = pad_id(tokenizer)
        # rho: the frozen start model; the critic starts from the same weights (its own copy, or its own
        # load under ZeRO-3, where nothing partitioned can be copied), and on resume gets its trained
        # weights from the checkpoint (`load`).
        # A LoRA run's rho is the policy with its adapters off (no copy); its critic still trains in full.
        if reference is None and not config.use_peft:
            reference = copy_model(model)
        if critic_start is None:
            if config.use_peft:
                raise ValueError("a LoRA run needs critic_start: another load of the start model")
            critic_start = copy_model(reference)
        critic = TurnCritic(critic_start.requires_grad_(True).train())
        optimizer_steps = config.max_steps * config.num_iterations
        self.learner = Learner(model, config, optimizer_steps, self.dist)
        critic_config = dataclasses.replace(config, learning_rate=config.critic_learning_rate)
        self.critic = Learner(critic, critic_config, optimizer_steps, self.dist)
        # Held like the policy: its own DeepSpeed engine (sharded under ZeRO-3), the same dtype and autocast.
        self.ref_model = (
            AdaptersOff(self.learner) if config.use_peft else FrozenModel(reference, self.learner)
        )
        self.engine = (
            engine if engine is not None else build_engine(config, self.learner.module, tokenizer, self.dist)
        )
        self.sampler = EpochSampler(len(self.tasks), config.seed)

    # ------------------------------------------------------------------------------------------ step
    def train_step(self) -> dict[str, float]:
        cfg, dist = self.config, self.dist
        t0 = time.perf_counter()

        # 1. Rollout: this rank's problems, several episodes each, from the current policy.
        indices = rank_slice(self.sampler.next_batch(cfg.prompts_per_step), dist.rank, dist.world_size)
        tasks = [self.tasks[i] for i in indices for _ in range(cfg.episodes_per_problem)]
        # The random-feedback draws come from a generator seeded by (seed, rank, step): nothing to save
        # in a checkpoint, and a resumed run draws what the uninterrupted one would have.
        rng = random.Random(f"{cfg.seed}-{dist.rank}-{self.step}")
        with self.sampling():
            episodes = run_episodes(
                self.engine, self.renderer, tasks, cfg.episode_config(), self.judge, rng=rng
            )
        batch = pack_episodes(episodes, self.pad_id, dist.device)
        t_rollout = time.perf_counter()

        # 2. Score every dialog once: old and reference log-probs per token, old values per answer.
        self.rest_engine()  # a colocated vLLM sleeps from here to the weight sync
        old_logp, ref_logp, old_values = self.score(batch)
        max_turns = max(batch.num_turns)
        judged = [[float(ep.judged)] * len(ep.turns) for ep in episodes]
        turn_mask = turn_tensor(judged, max_turns).bool()

        # 3. Per-answer rewards with the KL penalty: log-ratios summed over each answer's tokens.
        pi_sums = self.per_turn_sums(old_logp, batch, max_turns)
        ref_sums = self.per_turn_sums(ref_logp, batch, max_turns)
        task = turn_tensor([ep.rewards for ep in episodes], max_turns)
        rewards = torch.where(turn_mask, kl_penalized_rewards(task, pi_sums, ref_sums, cfg.beta), 0.0)

        # 4. GAE over turns; the last real turn of every episode is terminal. Whitened over all ranks.
        dones = turn_tensor([[0.0] * (n - 1) + [1.0] for n in batch.num_turns], max_turns)
        dones = torch.where(turn_mask, dones, torch.ones_like(dones))
        advantages, returns = turn_level_gae(rewards, old_values, dones, gamma=cfg.gamma, lam=cfg.lam)
        if cfg.whiten_advantages:
            advantages = self.global_whiten(advantages, turn_mask)

        # 5. Update policy and critic.
        train_stats = self.update(batch, advantages, returns, old_values, old_logp, turn_mask)
        self.sync_engine()
        t_train = time.perf_counter()

        # 6. Metrics over the global batch.
        metrics = self.rollout_metrics(episodes, task, pi_sums - ref_sums, turn_mask)
        metrics.update(train_stats)
        metrics.update(
            {"step_time": t_train - t0, "time/rollout": t_rollout - t0, "time/train": t_train - t_rollout}
        )
        return metrics

    # ------------------------------------------------------------------------------------- the pieces
    def values_of(self, forward: Any, mb: dict[str, Any], rows: list[int], batch: DialogBatch) -> Tensor:
        """The critic's value of each answer's context, [rows, max_turns] (0 past an episode's end)."""
        ids, attention = mb["input_ids"], mb["attention_mask"]
        position_ids = (attention.long().cumsum(-1) - 1).clamp(min=0)
        per_token = forward(input_ids=ids, attention_mask=attention, position_ids=position_ids)
        start = ids.shape[1] - mb["completion_ids"].shape[1]
        width = max(batch.num_turns)
        out = torch.zeros(len(rows), width, device=per_token.device, dtype=per_token.dtype)
        for r, e in enumerate(rows):
            cols = torch.tensor([start + c for c in batch.state_cols[e]], device=per_token.device)
            out[r, : len(cols)] = per_token[r, cols]
        return out

    def score(self, batch: DialogBatch) -> tuple[Tensor, Tensor, Tensor]:
        """Policy and reference log-probs [E, C] and critic values [E, max_turns], before any update."""
        n, c = batch.packed.completion_ids.shape
        old_logp = torch.zeros(n, c)
        ref_logp = torch.zeros(n, c)
        values = torch.zeros(n, max(batch.num_turns))
        # As many forwards on every rank as on the busiest one: ZeRO-3 gathers parameters inside forward.
        with torch.no_grad():
            for rows, _ in self.micro_batches(n):
                if rows is None:
                    self.dummy_loss(self.learner)
                    self.dummy_loss(self.ref_model)
                    self.dummy_loss(self.critic)
                    continue
                mb = batch.packed.micro_batch(rows)
                width = mb["completion_ids"].shape[1]
                old_logp[rows, :width] = self.logprobs(self.learner.forward, mb)[0].float().cpu()
                ref_logp[rows, :width] = self.logprobs(self.ref_model, mb)[0].float().cpu()
                values[rows] = self.values_of(self.critic.forward, mb, rows, batch).float().cpu()
        return old_logp, ref_logp, values

    def per_turn_sums(self, token_values: Tensor, batch: DialogBatch, max_turns: int) -> Tensor:
        """Sum of a per-token quantity over each answer's tokens: [E, C] -> [E, max_turns]."""
        out = torch.zeros(len(batch), max_turns)
        ids = batch.turn_ids.cpu()
        for t in range(max_turns):
            out[:, t] = torch.where(ids == t, token_values, 0.0).sum(-1)
        return out

    def global_whiten(self, advantages: Tensor, turn_mask: Tensor) -> Tensor:
        """Whiten the real turns' advantages with the mean and variance of every rank's turns."""
        local = advantages[turn_mask].tolist()
        counts = all_gather_floats([float(len(local))])
        white = whiten(torch.tensor(all_gather_floats(local)))
        lo = int(sum(counts[: self.dist.rank]))
        out = torch.zeros_like(advantages)
        out[turn_mask] = white[lo : lo + len(local)]
        return out

    def update(
        self,
        batch: DialogBatch,
        advantages: Tensor,
        returns: Tensor,
        old_values: Tensor,
        old_logp: Tensor,
        turn_mask: Tensor,
    ) -> dict[str, float]:
        """`num_iterations` passes of clipped policy + clipped value loss; one step per model per pass."""
        cfg, dist, device = self.config, self.dist, self.dist.device
        plan = self.micro_batches(len(batch))
        counts = all_reduce(
            torch.tensor(
                [float(batch.packed.completion_mask.sum()), float(turn_mask.sum())], dtype=torch.float64
            )
        )
        # Losses are shares of global means; gradients are averaged over ranks, hence / world_size.
        # At least one: a batch of unjudged episodes only has nothing to learn, and must not divide by 0.
        token_norm = max(1.0, float(counts[0])) / dist.world_size
        turn_norm = max(1.0, float(counts[1])) / dist.world_size
        # Each answer's advantage on each of its tokens (0 on prompt/feedback, masked out anyway).
        turn_ids = batch.turn_ids.cpu()
        token_adv = torch.gather(advantages, 1, turn_ids.clamp(min=0)) * (turn_ids >= 0)

        sums: defaultdict[str, float] = defaultdict(float)
        stats: dict[str, float] = {}
        for iteration in range(cfg.num_iterations):
            for idx, last in plan:
                if idx is None:
                    self.learner.backward(self.dummy_loss(self.learner), last=last)
                    self.critic.backward(self.dummy_loss(self.critic), last=last)
                    continue
                mb = batch.packed.micro_batch(idx)
                width = mb["completion_ids"].shape[1]
                logp, entropy = self.logprobs(self.learner.forward, mb, with_entropy=iteration == 0)
                mask = mb["completion_mask"]
                policy_loss, policy_stats = clipped_policy_loss(
                    logp,
                    old_logp[idx, :width].to(device),
                    token_adv[idx, :width].to(device),
                    mask,
                    eps_low=cfg.epsilon,
                    aggregation="token-mean",
                    normalizer=token_norm,
                )
                self.learner.backward(policy_loss, last=last)

                values = self.values_of(self.critic.forward, mb, idx, batch)
                tmask = turn_mask[idx].to(device)
                value_loss, value_stats = clipped_value_loss(
                    values, old_values[idx].to(device), returns[idx].to(device), cfg.value_clip, tmask
                )
                # clipped_value_loss is a mean over this micro-batch's turns; rescale to a global share.
                value_loss = value_loss * float(tmask.sum()) / turn_norm
                self.critic.backward(value_loss, last=last)
                if iteration == 0:
                    n_tok, n_turn = float(mask.sum()), float(tmask.sum())
                    sums["loss"] += float(policy_loss.detach()) / dist.world_size
                    sums["value_loss"] += float(value_loss.detach()) / dist.world_size
                    sums["entropy"] += float(masked_mean(entropy, mask)) * n_tok
                    sums["tokens"] += n_tok
                    for name, value in policy_stats.items():
                        sums[name] += float(value) * n_tok
                    sums["turn_weighted/vf_clipfrac"] += float(value_stats["vf_clipfrac"]) * n_turn
            policy_step = self.learner.step()
            critic_step = self.critic.step()
            stats = {**policy_step, "critic/grad_norm": critic_step["grad_norm"]}
        totals = all_reduce(torch.tensor([sums[k] for k in sorted(sums)], dtype=torch.float64)).tolist()
        reduced = dict(zip(sorted(sums), totals, strict=True))
        tokens = max(1.0, reduced.pop("tokens", 0.0))
        out = {"loss": reduced.pop("loss", 0.0), "value_loss": reduced.pop("value_loss", 0.0)}
        out["vf_clipfrac"] = reduced.pop("turn_weighted/vf_clipfrac", 0.0) / max(1.0, float(counts[1]))
        out.update({name: value / tokens for name, value in reduced.items()})
        out.update(stats)
        return out

    def rollout_metrics(
        self, episodes: Sequence[Episode], task: Tensor, log_ratio: Tensor, turn_mask: Tensor
    ) -> dict[str, float]:
        """Return, solve rate, turns, fixes by feedback, KL: sums over every rank's judged episodes (an
        episode whose tests could not run is counted apart, in `unjudged`)."""
        unjudged = sum(not ep.judged for ep in episodes)
        episodes = [ep for ep in episodes if ep.judged]
        first_failed = [ep for ep in episodes if not ep.turns[0].public_passed]
        local = [
            float(len(episodes)),
            float(torch.where(turn_mask, task, 0.0).sum()),
            float(sum(ep.solved for ep in episodes)),
            float(sum(len(ep.turns) for ep in episodes)),
            float(sum(turn.code is None for ep in episodes for turn in ep.turns)),
            float(len(first_failed)),
            float(sum(ep.solved for ep in first_failed)),
            float(torch.where(turn_mask, log_ratio, 0.0).sum()),
            float(sum(len(turn.answer_ids) for ep in episodes for turn in ep.turns)),
            float(unjudged),
        ]
        g = all_reduce(torch.tensor(local, dtype=torch.float64)).tolist()
        n, answers = max(1.0, g[0]), max(1.0, g[3])
        return {
            "reward": g[1] / n,
            "solve_rate": g[2] / n,
            "turns_per_episode": g[3] / n,
            "no_code_rate": g[4] / answers,
            "fixed_after_feedback": g[6] / max(1.0, g[5]),
            "kl": g[7] / answers,
            "completions/mean_length": g[8] / answers,
            "unjudged": g[9],
        }

    # ------------------------------------------------------------------------------------ state
    def load(self, ckpt: Path) -> dict[str, Any]:
        """The policy's state as in GRPO, then the critic's (its weights too when not under DeepSpeed)."""
        state = super().load(ckpt)
        if self.critic.engine is None:
            self.critic.module.load_pretrained(ckpt / "critic")
        self.critic.load_state(ckpt / "critic")
        return state

    def save(self, path: Path) -> Path:
        ckpt = super().save(path)
        self.critic.save_pretrained(ckpt / "critic")
        self.critic.save_state(ckpt / "critic")
        return ckpt


# ---------------------------------------------------------------------------------------- the run
def load_tasks(spec: str, generated_tests: bool = True, option: str = "train_file") -> list[ContestTask]:
    """Problems from code_contests JSONL/Parquet files, globs, comma-separated lists, or "bundled:SPLIT".
    A file that yields no usable problem (rows of another kind, say the data pipeline's) is a UserError
    naming `option` and the drop counts, before any model loads, not an internal error at the warm-up."""
    from swerl.codecontests.problems import load_problems
    from swerl.data.rlef_problems import bundled_path
    from swerl.errors import UserError

    paths = [
        bundled_path(p.removeprefix("bundled:")) if p.startswith("bundled:") else p for p in spec.split(",")
    ]
    report = load_problems(*paths, generated_tests=generated_tests)
    if not report.problems:
        raise UserError(
            f"{option} {spec}: {report.summary()}; RLEF reads code_contests problems (description, "
            f"public_tests, private_tests, solutions), e.g. bundled:train or the deepmind/code_contests "
            f"Parquet shards"
        )
    return [ContestTask(problem) for problem in report.problems]


def load_repository_tasks(
    path: str, reward: Any, config: RLEFConfig, option: str = "train_file"
) -> list[RepositoryTask]:
    """Repository tasks from validated rows (`swerl data validate` output, or SWE-bench-schema rows whose
    repositories `execution_clones` holds); the rows left out are counted on stderr. None usable is a
    UserError naming `option`, before any model loads."""
    import os
    import sys

    from swerl.environments.repository import repository_tasks
    from swerl.errors import UserError
    from swerl.trainers.data import read_rows, row_messages

    found = repository_tasks(
        read_rows(path),
        reward,
        row_messages,
        public_share=config.public_share,
        feedback_chars=config.feedback_chars,
        public_pass_to_pass=config.public_pass_to_pass,
    )
    if not found.tasks:
        raise UserError(
            f"{option} {path}: {found.summary()}; repository RLEF needs executable rows (swerl data "
            f"validate) with two or more FAIL_TO_PASS tests, some shown and some held out"
        )
    if found.skipped and int(os.environ.get("RANK", "0")) == 0:
        print(f"swerl: {option} {path}: {found.summary()}", file=sys.stderr)
    return found.tasks


def task_sets(config: RLEFConfig) -> tuple[list[Task], list[Task], Judge]:
    """The run's training and held-out tasks (each file capped by its `max_*_samples`) and their judge:
    contest problems and the sandbox, or repository rows and the execution reward (`task_source`)."""
    eval_tasks: list[Task] = []
    if config.task_source == "repository":
        from swerl.environments.repository import repository_judge
        from swerl.trainers.rewards import execution_reward

        reward = execution_reward(config)
        train = load_repository_tasks(config.train_file, reward, config)[: config.max_train_samples]
        if config.eval_file:
            eval_tasks = load_repository_tasks(config.eval_file, reward, config, "eval_file")
        return train, eval_tasks[: config.max_eval_samples], repository_judge(reward)
    from swerl.environments.codecontests import sandbox_judge

    tasks = load_tasks(config.train_file, config.generated_tests)[: config.max_train_samples]
    if config.eval_file:
        eval_tasks = load_tasks(config.eval_file, config.generated_tests, "eval_file")
    judge = sandbox_judge(workers=config.sandbox_workers)
    return list(tasks), eval_tasks[: config.max_eval_samples], judge


def start_model_path(config: RLEFConfig) -> str:
    """Where the model RLEF starts from lives: the run's `model_name_or_path`, or, after an SFT warm-up in
    this run, the warmed-up copy `sft_warmup` saves under output_dir/sft/model. rho is loaded from here,
    never from a checkpoint (`load_reference`)."""
    if config.sft_warmup_steps:
        return str(Path(config.output_dir) / "sft" / "model")
    return config.model_name_or_path


def answer_text_ids(tokenizer: Any, task: Task, answer: str) -> list[int]:
    """A warm-up target: the answer's text and the template's end of turn, as ids."""
    from swerl.trainers.sft import answer_suffix

    return list(
        tokenizer(answer_suffix(tokenizer, task.messages(), answer), add_special_tokens=False)["input_ids"]
    )


def repository_warmup_pairs(
    tokenizer: Any, tasks: Sequence[RepositoryTask], config: RLEFConfig, judge: Judge | None
) -> list[tuple[list[int], list[int]]]:
    """The warm-up of repository tasks: first turns with each row's gold answer (`repository_reference`),
    and with `sft_fix_dialogs` (and a judge) later turns after wrong constants: the gold answer with
    `sft_fix_guessed_constants` other rows' constants in place of its own, each followed by its real
    feedback from the row's public tests, then the fix in a share `sft_fix_feedback_rate` and in the
    rest `sft_fix_retry` (the guess again, or a fresh one), in dialogs of up to `sft_fix_turns` answers
    (`swerl.environments.warmup.guess_cases`, `fix_dialogs`). The hidden-constant rows' analog of the
    contest warm-up; rows whose gold answer has no integer constant get first turns only."""
    from functools import partial

    from swerl.environments.warmup import fix_dialogs, guess_cases, last_integer, repository_reference

    answer_ids = partial(answer_text_ids, tokenizer)
    renderer = ChatRenderer(tokenizer)
    references = [repository_reference(task) for task in tasks]
    pairs = [(renderer.prompt_ids(t), answer_ids(t, r)) for t, r in zip(tasks, references, strict=True)]
    if not config.sft_fix_dialogs or judge is None:
        return pairs
    rng = random.Random(config.seed)
    pool = list(dict.fromkeys(c for r in references if (c := last_integer(r)) is not None))
    turns, retry = config.sft_fix_turns, config.sft_fix_retry
    cases = []
    for task, reference in zip(tasks, references, strict=True):
        own = last_integer(reference)
        if own is None:
            continue
        others = [c for c in pool if c != own]
        drawn = rng.sample(others, min(config.sft_fix_guessed_constants, len(others)))
        cases += guess_cases(task, reference, drawn, pool, turns, retry, rng)
    fixes = fix_dialogs(renderer, cases, judge, answer_ids, config.sft_fix_feedback_rate, rng)
    return pairs + [(c, t) for c, t in fixes if len(c) + len(t) <= config.max_seq_length]


def contest_warmup_pairs(
    tokenizer: Any, tasks: Sequence[ContestTask], config: RLEFConfig, judge: Judge | None
) -> list[tuple[list[int], list[int]]]:
    """The warm-up of contest problems: first turns with each problem's first Python solution, and with
    `sft_fix_dialogs` (and a judge) second turns after a corrupted solution (`feedback_fix_dialogs`)."""
    from functools import partial

    from swerl.environments.warmup import feedback_fix_dialogs, program_answer

    answer_ids = partial(answer_text_ids, tokenizer)
    renderer = ChatRenderer(tokenizer)
    pairs = [
        (renderer.prompt_ids(task), answer_ids(task, program_answer(solution)))
        for task in tasks
        for solution in task.problem.python_solutions[:1]
    ]
    if config.sft_fix_dialogs and judge is not None:
        fixes = feedback_fix_dialogs(
            renderer,
            tasks,
            judge,
            answer_ids,
            config.sft_fix_constant,
            guesses=config.sft_fix_guessed_constants,
            feedback_rate=config.sft_fix_feedback_rate,
            rng=random.Random(config.seed),
        )
        pairs += [(c, t) for c, t in fixes if len(c) + len(t) <= config.max_seq_length]
    return pairs


def sft_warmup(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Task],
    config: RLEFConfig,
    progress: bool = True,
    judge: Judge | None = None,
) -> list[dict[str, float]]:
    """Supervised steps on the reference solutions, so RL starts from a policy that sometimes succeeds.

    The target is what a good answer looks like: the solution in one ```python block (a repository row's
    gold patch as SEARCH/REPLACE edits), then the template's end of turn. First turns, and with
    `sft_fix_dialogs` (and a judge) second turns after a wrong answer and its real feedback
    (`contest_warmup_pairs`, `repository_warmup_pairs`), so a feedback turn is not a context the policy
    has never seen. Uses its own short-lived Learner (own learning rate, no checkpoints); the warmed-up model
    is saved to `start_model_path(config)`, where RLEF's reference is loaded from, now and on resume.
    A contest problem set needs a Python solution somewhere: `run` checks that before the model loads.
    """
    if config.task_source == "repository":
        pairs = repository_warmup_pairs(tokenizer, tasks, config, judge)
    else:
        pairs = contest_warmup_pairs(tokenizer, tasks, config, judge)
    dist = init_distributed()
    sft_config = dataclasses.replace(config, learning_rate=config.sft_learning_rate, warmup_steps=0)
    learner = Learner(model, sft_config, config.sft_warmup_steps, dist)
    sampler = EpochSampler(len(pairs), config.seed)
    log = MetricsLogger(
        Path(config.output_dir) / "sft",
        enabled=dist.is_main,
        total_steps=config.sft_warmup_steps,
        tensorboard=False,
        progress=progress,
        desc="sft warm-up",
    )
    history = []
    pad = pad_id(tokenizer)
    for step in range(1, config.sft_warmup_steps + 1):
        chosen = [pairs[i] for i in sampler.next_batch(config.sft_batch_size)]
        packed = pack_sequences([p for p, _ in chosen], [t for _, t in chosen], pad, dist.device)
        logp, _ = completion_logprobs(
            learner.forward, packed.input_ids, packed.attention_mask, packed.completion_ids
        )
        loss = -masked_mean(logp, packed.completion_mask)
        learner.backward(loss, last=True)
        stats = learner.step()
        row = {"loss": float(loss.detach()), **stats}
        history.append(row)
        log.log(step, row)
    log.close()
    learner.save_pretrained(Path(start_model_path(config)), tokenizer)
    barrier()
    return history


def evaluate_policy(trainer: RLEFTrainer, tasks: Sequence[Task], **episode_changes: Any) -> Any:
    """1@3 (and whatever n@k fits the samples) on held-out problems with the trainer's current weights."""
    from swerl.environments.dialog import evaluate_dialogs

    cfg = trainer.config
    episode = cfg.episode_config(temperature=cfg.eval_temperature, **episode_changes)
    with trainer.sampling():
        return evaluate_dialogs(
            trainer.engine,
            trainer.renderer,
            tasks,
            episode,
            trainer.judge,
            samples=cfg.eval_samples,
            nk=((1, 3),),
            seed=cfg.seed,
        )


def run(
    config: RLEFConfig,
    progress: bool = True,
    judge: Judge | None = None,
    stop: Any = None,
) -> dict[str, Any]:
    """Everything `swerl train rlef` does: load, SFT warm-up, evaluate, RLEF, evaluate, save the report.

    On resume the policy, the critic and both optimizers come from the checkpoint and rho from the start
    model (`start_model_path`), so the resumed steps are the steps an uninterrupted run takes. `stop` is
    `TrainLoop.train`'s (end the run early, e.g. to test a resume).
    """
    from swerl.errors import UserError

    tasks, eval_tasks, default_judge = task_sets(config)
    contests = [task for task in tasks if isinstance(task, ContestTask)]
    # A repository row's reference is its gold patch, which every executable row has.
    references = config.task_source == "repository" or any(t.problem.python_solutions for t in contests)
    if config.sft_warmup_steps and not references:
        raise UserError(
            f"train_file {config.train_file}: no problem has a Python reference solution to warm up on "
            f"(sft_warmup_steps {config.sft_warmup_steps}); give problems with solutions or set "
            f"sft_warmup_steps 0"
        )
    ckpt, model, tokenizer = load_run(config)
    judge = judge or default_judge
    out: dict[str, Any] = {"train_problems": len(tasks), "eval_problems": len(eval_tasks)}
    run_dir = write_config(config)
    if config.sft_warmup_steps and ckpt is None:
        out["sft"] = sft_warmup(model, tokenizer, tasks, config, progress=progress, judge=judge)
    start = start_model_path(config)
    if ckpt is not None and config.sft_warmup_steps and not (Path(start) / "config.json").exists():
        raise UserError(f"resume_from_checkpoint: {start} (the SFT warm-up's model, RLEF's rho) is missing")
    trainer = RLEFTrainer(
        config,
        model,
        tokenizer,
        tasks,
        judge=judge,
        reference=None if config.use_peft else load_reference(start, config),
        critic_start=load_reference(start, config),
        progress=progress,
    )
    feedbacks = (
        {"": "execution", "_random_feedback": "random"} if config.eval_random_feedback else {"": "execution"}
    )
    if eval_tasks and ckpt is None:
        for suffix, feedback in feedbacks.items():
            out[f"eval_before{suffix}"] = evaluate_policy(trainer, eval_tasks, feedback=feedback)
        if trainer.dist.is_main:
            write_eval_report(run_dir, out, resumed=False)  # an interrupted run keeps its "before"
    out["history"] = trainer.train(stop=stop)
    if eval_tasks:
        for suffix, feedback in feedbacks.items():
            out[f"eval_after{suffix}"] = evaluate_policy(trainer, eval_tasks, feedback=feedback)
    if trainer.dist.is_main:
        write_eval_report(run_dir, out, resumed=ckpt is not None)
        report_test_runs(judge)
    return out


def report_test_runs(judge: Judge) -> None:
    """Repository tasks: how many of the run's test jobs the execution reward's memo answered, on
    stderr (answers repeat across steps and evaluations; each repeat saves a test run of seconds)."""
    import sys

    from swerl.environments.repository import RepositoryJudge

    if isinstance(judge, RepositoryJudge):
        print(f"swerl: {judge.reward.memo.summary()}", file=sys.stderr)


def write_eval_report(run_dir: Path, results: dict[str, Any], *, resumed: bool) -> None:
    """run_dir/eval.json: the evaluations in `results`. A resumed run evaluates only after training,
    so it keeps the evaluations before training that the run's first start wrote there."""
    import json

    path = run_dir / "eval.json"
    report = json.loads(path.read_text(encoding="utf-8")) if resumed and path.is_file() else {}
    report.update({k: v.as_dict() for k, v in results.items() if k.startswith(("eval_before", "eval_after"))})
    path.write_text(json.dumps(report, indent=2), encoding="utf-8")
