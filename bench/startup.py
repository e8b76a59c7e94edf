"""Benchmark: how long `swerl` commands take to start, against a bare interpreter start.

Every command imports only what it needs (torch, pyarrow, transformers and pydantic load inside the
commands that use them), so asking for help or scoring one row should cost little more than starting
Python. Each command below runs `--repeats` times, interleaved with the floor (`python -c pass` with
the same interpreter), and the medians are printed with their ratio to the floor. The goal: `swerl
--help` and `swerl reward score` on one row under 0.5 s on a 2-core machine.

    python bench/startup.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

GOAL_S = 0.5


def _wall(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=15, help="runs of each command (medians reported)")
    args = parser.parse_args()
    swerl = [sys.executable, "-m", "swerl"]
    with tempfile.TemporaryDirectory() as tmp:
        sample = resources.files("swerl.data") / "reward_sample.jsonl"
        one_row = Path(tmp) / "one.jsonl"
        one_row.write_text(sample.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "swerl --help": [*swerl, "--help"],
            "swerl reward score (1 row)": [
                *swerl,
                "reward",
                "score",
                "--quiet",
                "--input",
                str(one_row),
                "--output",
                str(Path(tmp) / "out.jsonl"),
            ],
            "swerl train grpo --fields": [*swerl, "train", "grpo", "--fields"],
            "swerl data mine --help": [*swerl, "data", "mine", "--help"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for command in commands.values():  # warm the file cache once
            _wall(command)
        for _ in range(args.repeats):
            for name, command in commands.items():
                times[name].append(_wall(command))
    floor = statistics.median(times["python -c pass (floor)"])
    print(f"{'command':<30} {'median':>8} {'vs floor':>9}")
    status = 0
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<30} {median:>7.3f}s {median / floor:>8.1f}x")
        if name in ("swerl --help", "swerl reward score (1 row)") and median > GOAL_S:
            status = 1
    verdict = "met" if not status else "MISSED"
    print(f"goal: swerl --help and reward score on one row under {GOAL_S} s: {verdict}")
    return status


if __name__ == "__main__":
    sys.exit(main())
