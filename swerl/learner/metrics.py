"""Run logs: one JSON object per step in `metrics.jsonl`, the same scalars in TensorBoard, a progress bar.

Metric names follow TRL's GRPOTrainer (`reward`, `reward_std`, `frac_reward_zero_std`,
`completions/mean_length`, `clip_ratio/region_mean`, ...) so dashboards built for TRL runs read ours.
JSONL is the source of truth (`swerl plot` reads it); TensorBoard is optional and skipped when the
package is missing. Weights & Biases is opt-in (`report_to_wandb`) and then required: a user who asked for
a dashboard must not find out at the end that nothing was sent.
"""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from swerl.errors import UserError
from swerl.jsonl import parse_lines


class MetricsLogger:
    """Rank 0 writes; other ranks get a logger that does nothing, so callers need no rank checks."""

    def __init__(
        self,
        run_dir: Path,
        *,
        enabled: bool = True,
        total_steps: int | None = None,
        initial_step: int = 0,
        tensorboard: bool = True,
        progress: bool = True,
        desc: str = "train",
        wandb: dict[str, Any] | None = None,
    ) -> None:
        """`wandb`: None, or `wandb.init` arguments (project, config, ...) to also log to W&B."""
        self.enabled = enabled
        self.path = run_dir / "metrics.jsonl"
        self._tb: Any = None
        self._bar: Any = None
        self._wandb: Any = None
        if not enabled:
            return
        run_dir.mkdir(parents=True, exist_ok=True)
        if initial_step == 0:
            self.path.unlink(missing_ok=True)
        else:
            _truncate_after(self.path, initial_step)
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=initial_step + 1)
            except ImportError:
                self._tb = None
        if wandb is not None:
            self._wandb = _wandb_run(run_dir, initial_step, wandb)
        if progress:
            self._bar = tqdm(total=total_steps, initial=initial_step, desc=desc, dynamic_ncols=True)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Append one step's scalars; NaN/inf become null in JSON (strict JSON has no NaN)."""
        if not self.enabled:
            return
        row: dict[str, Any] = {"step": step}
        for name, value in metrics.items():
            value = float(value)
            row[name] = value if math.isfinite(value) else None
            if self._tb is not None and math.isfinite(value):
                self._tb.add_scalar(name, value, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in row.items() if k != "step" and v is not None}, step=step)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        if self._bar is not None:
            shown = {k: f"{metrics[k]:.3g}" for k in ("reward", "loss", "malformed_rate") if k in metrics}
            self._bar.set_postfix(shown, refresh=False)
            self._bar.update(step - self._bar.n)

    def write(self, message: str) -> None:
        """Print above the progress bar instead of breaking it."""
        if self.enabled:
            (self._bar.write if self._bar is not None else print)(message)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._bar is not None:
            self._bar.close()


def _wandb_run(run_dir: Path, initial_step: int, init_args: dict[str, Any]) -> Any:
    """A W&B run whose files live in `run_dir/wandb`. Its id is kept there too, so a resumed run
    continues the same W&B run (resume="allow") instead of starting a second chart at step N."""
    try:
        import wandb
    except ImportError:
        raise UserError("report_to_wandb needs the wandb package: pip install wandb") from None
    folder = run_dir / "wandb"
    folder.mkdir(parents=True, exist_ok=True)
    id_file = folder / "swerl-run-id"
    if initial_step == 0 or not id_file.exists():
        id_file.write_text(uuid.uuid4().hex[:16], encoding="utf-8")
    run_id = id_file.read_text(encoding="utf-8").strip()
    return wandb.init(dir=str(run_dir), id=run_id, resume="allow", name=run_dir.name, **init_args)


def _truncate_after(path: Path, step: int) -> None:
    """On resume, drop rows logged after the checkpoint: they will be logged again, identically."""
    if not path.exists():
        return
    kept = [row for row in _rows(path.read_text(encoding="utf-8"), path) if row["step"] <= step]
    path.write_text("".join(json.dumps(row) + "\n" for row in kept), encoding="utf-8")


def _rows(text: str, path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl's text. A last line without its newline is being written by a live
    run (or was cut by a crash) and is left out; a bad line anywhere else is a broken file."""
    lines = text.split("\n")
    complete, last = lines[:-1], lines[-1]
    rows = parse_lines(complete, path)
    if last.strip():
        with contextlib.suppress(json.JSONDecodeError):  # half-written: left out
            rows.append(json.loads(last))
    return rows


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All rows of a metrics.jsonl (or the one inside a run directory), also while a run writes it."""
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise UserError(f"{path}: no such file (is it a training run directory?)")
    rows = _rows(path.read_text(encoding="utf-8"), path)
    if any(not isinstance(row, dict) or "step" not in row for row in rows):
        raise UserError(f"{path}: not a training run's metrics (every row needs a 'step')")
    return rows
