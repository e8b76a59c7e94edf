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
    "reward/execution",
    "reward/similarity",
    "execution/pass_rate",
    "reward/infra_errors",
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
        epilog="example: swerl plot runs/grpo-tiny-cpu --metrics reward,kl",
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
    logged = sorted({k for r in rows for k in r} - {"step"})
    # Asked for by name, every metric must exist (a typo among several would drop its plot unsaid); the
    # default list plots what the run's trainer logged of it.
    absent = [m for m in metrics or () if m not in names]
    if absent or not names:
        import difflib

        close = {m: difflib.get_close_matches(m, logged, n=1) for m in absent}
        hints = "".join(f"; {m}: did you mean {close[m][0]}?" for m in absent if close[m])
        verb = "was" if len(absent) == 1 else "were"
        what = f"{', '.join(absent)} {verb} not logged" if absent else "no metric to plot was logged"
        raise UserError(
            f"{run}: {what}{hints}" + (f" (it has: {', '.join(logged)})" if logged else " (no rows yet)")
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


def plot_eval(report: Path, out: Path) -> Path:
    """Bars of the first n@k of each entry of an RLEF run's eval.json (before / after, with real and with
    random feedback), with their 95 % bootstrap intervals as error bars: the figure that says whether
    RLEF's gain is more than noise, and whether it needs the real feedback."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = json.loads(report.read_text(encoding="utf-8"))
    names = list(entries)
    rates = [entries[name]["rates"][0] for name in names]
    values = [100 * r["rate"] for r in rates]
    errors = [
        [v - 100 * r["low"] for v, r in zip(values, rates, strict=True)],
        [100 * r["high"] - v for v, r in zip(values, rates, strict=True)],
    ]
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(names), 3.6))
    colors = ["tab:orange" if "random" in name else "tab:blue" for name in names]
    ax.bar(range(len(names)), values, yerr=errors, capsize=5, color=colors)
    for i, value in enumerate(values):
        ax.text(i, value / 2, f"{value:.1f}%", ha="center", color="white", fontsize=9)
    ax.set_xticks(range(len(names)), [n.replace("eval_", "").replace("_", "\n") for n in names], fontsize=8)
    ax.set_ylabel(f"{rates[0]['n']}@{rates[0]['k']} (%), 95% CI")
    ax.set_title(f"{rates[0]['problems']} held-out problems", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "eval.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _run(args: argparse.Namespace) -> int:
    metrics = [m.strip() for m in args.metrics.split(",")] if args.metrics else None
    paths = plot_run(args.run_dir, args.out, metrics, args.smooth)
    report = (args.run_dir if args.run_dir.is_dir() else args.run_dir.parent) / "eval.json"
    if report.is_file():  # an RLEF run's before/after n@k
        paths.append(plot_eval(report, paths[0].parent))
    print(f"wrote {len(paths)} plots to {paths[0].parent} (overview: {paths[0]})")
    return 0
