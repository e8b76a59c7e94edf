"""`swerl plot RUN`: PNG learning curves from a run's metrics.jsonl (no TensorBoard needed)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swerl.cli.args import existing_path, output_dir, positive_int
from swerl.errors import UserError

# The curves worth a glance, in reading order; metrics a run did not log are skipped.
DEFAULT_METRICS = (
    "reward",
    "malformed_rate",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "completions/clipped_ratio",
    "entropy",
    "kl",
    "loss",
    "grad_norm",
    "clip_ratio/region_mean",
    "eval/reward",
    "eval/malformed_rate",
    "step_time",
    "tokens_per_second",
)


def register(groups: argparse._SubParsersAction) -> None:
    parser = groups.add_parser(
        "plot",
        help="write PNG learning curves of a training run",
        description="Read RUN/metrics.jsonl and write one PNG per metric plus an overview grid "
        "(RUN/plots/overview.png). Works on a run that is still writing (its last, half-written line is "
        "left out).",
    )
    parser.add_argument(
        "run_dir", metavar="RUN", type=existing_path, help="run directory (or its metrics.jsonl)"
    )
    parser.add_argument("--out", type=output_dir, default=None, help="where to write (default RUN/plots)")
    parser.add_argument(
        "--metrics", default=None, help="comma-separated metric names (default: the usual GRPO/SFT curves)"
    )
    parser.add_argument(
        "--smooth", type=positive_int, default=1, metavar="N", help="moving average over N steps"
    )
    parser.set_defaults(run=_run)


def _series(rows: Sequence[dict[str, Any]], name: str, smooth: int) -> tuple[list[int], list[float]]:
    points = [
        (r["step"], r[name]) for r in rows if isinstance(r.get(name), int | float) and math.isfinite(r[name])
    ]
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    if smooth > 1:
        values = [
            sum(values[max(0, i - smooth + 1) : i + 1]) / len(values[max(0, i - smooth + 1) : i + 1])
            for i in range(len(values))
        ]
    return steps, values


def _draw(ax: Any, rows: Sequence[dict[str, Any]], name: str, smooth: int) -> None:
    """One metric's curve: with smoothing, the per-step values stay visible (faint) under the moving
    average, because RL metrics are noisy step to step and the average alone hides how noisy."""
    steps, values = _series(rows, name, 1)
    if smooth > 1 and len(steps) > smooth:
        ax.plot(steps, values, color="tab:blue", alpha=0.25, linewidth=0.8)
        ax.plot(steps, _series(rows, name, smooth)[1], color="tab:blue", label=f"mean of {smooth} steps")
        ax.legend(fontsize=7, loc="best")
    else:
        ax.plot(steps, values, marker="." if len(steps) < 50 else None)
    ax.grid(alpha=0.3)


def plot_run(
    run: Path, out: Path | None = None, metrics: Sequence[str] | None = None, smooth: int = 1
) -> list[Path]:
    """Write the PNGs and return their paths; the overview comes first."""
    from swerl.learner.metrics import read_metrics

    rows = read_metrics(run)
    run_dir = run if run.is_dir() else run.parent
    names = [m for m in (metrics or DEFAULT_METRICS) if _series(rows, m, 1)[0]]
    if not names:
        logged = sorted({k for r in rows for k in r} - {"step"})
        raise UserError(
            f"{run}: none of the requested metrics were logged"
            + (f" (it has: {', '.join(logged[:12])})" if logged else " (no rows yet)")
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = out or run_dir / "plots"
    out.mkdir(parents=True, exist_ok=True)
    cols = min(3, len(names))
    nrows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 2.8 * nrows), squeeze=False)
    written = []
    for ax, name in zip(axes.flat, names, strict=False):
        _draw(ax, rows, name, smooth)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.suptitle(str(run_dir.name))
    fig.tight_layout()
    overview = out / "overview.png"
    fig.savefig(overview, dpi=100)
    plt.close(fig)
    written.append(overview)
    for name in names:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        _draw(ax, rows, name, smooth)
        ax.set_title(name)
        ax.set_xlabel("step")
        fig.tight_layout()
        path = out / (name.replace("/", "_") + ".png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def _run(args: argparse.Namespace) -> int:
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    paths = plot_run(args.run_dir, args.out, metrics, args.smooth)
    print(f"wrote {len(paths)} plots to {paths[0].parent} (overview: {paths[0]})")
    return 0
