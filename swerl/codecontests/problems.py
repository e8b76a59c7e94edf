"""Load CodeContests problems from Parquet / JSONL files in the Hugging Face `deepmind/code_contests` schema.

Fields used (as on the Hub): `name`, `description`, `public_tests`, `private_tests`, `generated_tests`
(each `{input: [...], output: [...]}`), `time_limit` (`{seconds, nanos}` in the Hub's Parquet; a number of
seconds or null is accepted too), `memory_limit_bytes`, and `solutions` (`{language: [...], solution: [...]}`,
language 3 = PYTHON3). Problems without public tests (nothing to give feedback on) or without private /
generated tests (nothing to score on) are dropped and counted by reason; the RLEF paper drops 669 of the
13,328 training problems this way.

At scale: the Hub ships each split as shards (`train-00000-of-00039.parquet`, ...), so `load_problems`
takes globs and lists; Parquet is streamed through `pyarrow.dataset` one record batch at a time, reading
only the columns used (`incorrect_solutions`, the largest, never), and the generated tests, most of the
test data, can be left out (`generated_tests=False`).
"""

from __future__ import annotations

import glob
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swerl.jsonl import stream_records
from swerl.sandbox.limits import Limits
from swerl.sandbox.pool import TestCase

PYTHON3 = 3
"""CodeContests' language code for Python 3 (0 unknown, 1 Python 2, 2 C++, 3 Python 3, 4 Java)."""
NO_PUBLIC_TESTS = "no public tests"
NO_PRIVATE_TESTS = "no private or generated tests"


@dataclass(frozen=True)
class Problem:
    """One contest problem, reduced to what RLEF needs."""

    name: str
    description: str
    public_tests: tuple[TestCase, ...]
    private_tests: tuple[TestCase, ...]
    generated_tests: tuple[TestCase, ...] = ()
    time_limit_s: float | None = None
    memory_limit_bytes: int | None = None
    python_solutions: tuple[str, ...] = ()

    @property
    def held_out_tests(self) -> tuple[TestCase, ...]:
        """Tests the model never sees: private plus generated (the RLEF reward and the solve rates)."""
        return self.private_tests + self.generated_tests

    def limits(self, base: Limits | None = None) -> Limits:
        """`base` with this problem's time and memory limits, where it states them."""
        return (base or Limits()).scaled(time_s=self.time_limit_s, memory_bytes=self.memory_limit_bytes)


@dataclass
class LoadReport:
    """The kept problems and how many were dropped for which reason (for the run's log)."""

    problems: list[Problem] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.dropped.items()))
        dropped = sum(self.dropped.values())
        return f"{len(self.problems)} problems kept, {dropped} dropped ({reasons or 'none'})"


def _tests(value: Mapping[str, Any] | None) -> tuple[TestCase, ...]:
    if not value:
        return ()
    inputs, outputs = value.get("input") or [], value.get("output") or []
    if isinstance(inputs, str) or isinstance(outputs, str):  # a string would become one test a character
        raise ValueError('tests are {"input": [...], "output": [...]}: lists of strings, not strings')
    if len(inputs) != len(outputs):
        raise ValueError(f"tests have {len(inputs)} inputs but {len(outputs)} outputs")
    return tuple(TestCase(str(i), str(o)) for i, o in zip(inputs, outputs, strict=True))


MAX_TIME_LIMIT_S = 86_400.0
"""A day: past it a limit is a mistake (and the timers that enforce it overflow)."""


def _seconds(value: Any) -> float | None:
    """`{seconds, nanos}` (the Hub), a plain number, or null; 0 means unknown in the dataset."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        seconds = (value.get("seconds") or 0) + (value.get("nanos") or 0) / 1e9
    else:
        seconds = float(value)
    if seconds < 0 or seconds > MAX_TIME_LIMIT_S or seconds != seconds:
        raise ValueError(f"time limit of {seconds} s: expected 0 (unknown) up to {MAX_TIME_LIMIT_S:.0f} s")
    return seconds if seconds > 0 else None


def _python_solutions(value: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not value:
        return ()
    languages, solutions = value.get("language") or [], value.get("solution") or []
    return tuple(s for lang, s in zip(languages, solutions, strict=False) if lang == PYTHON3)


COLUMNS = (
    "name",
    "description",
    "public_tests",
    "private_tests",
    "generated_tests",
    "time_limit",
    "memory_limit_bytes",
    "solutions",
)
"""The dataset columns a Problem is built from (the Hub has more: incorrect_solutions, cf_*, ...)."""


def parse_problem(row: Mapping[str, Any], generated_tests: bool = True) -> Problem:
    """One dataset row as a Problem (raises ValueError on a malformed row)."""
    memory = row.get("memory_limit_bytes")
    if memory is not None and int(memory) < 0:
        raise ValueError(f"memory_limit_bytes {memory}: expected 0 (unknown) or a size in bytes")
    return Problem(
        name=str(row.get("name") or ""),
        description=str(row.get("description") or ""),
        public_tests=_tests(row.get("public_tests")),
        private_tests=_tests(row.get("private_tests")),
        generated_tests=_tests(row.get("generated_tests")) if generated_tests else (),
        time_limit_s=_seconds(row.get("time_limit")),
        memory_limit_bytes=int(memory) if memory else None,
        python_solutions=_python_solutions(row.get("solutions")),
    )


def drop_reason(problem: Problem) -> str | None:
    """Why a problem cannot be used for RLEF, or None when it can."""
    if not problem.public_tests:
        return NO_PUBLIC_TESTS
    if not problem.held_out_tests:
        return NO_PRIVATE_TESTS
    return None


def collect(rows: Iterable[Mapping[str, Any]], generated_tests: bool = True) -> LoadReport:
    """Parse rows, keeping usable problems and counting the rest by reason."""
    report = LoadReport()
    for row in rows:
        problem = parse_problem(row, generated_tests)
        reason = drop_reason(problem)
        if reason:
            report.dropped[reason] += 1
        else:
            report.problems.append(problem)
    return report


def expand_paths(specs: Iterable[Path | str]) -> list[Path]:
    """Files from paths, globs ("data/train-*.parquet") and comma-separated lists of either, in order;
    each glob's matches sorted (shard order). A pattern that matches nothing, or a missing file, is an
    error: a run silently trained on fewer shards than meant is worse than one that does not start."""
    from swerl.errors import UserError

    out: list[Path] = []
    for spec in specs:
        for part in str(spec).split(","):
            part = part.strip()
            if not part:
                continue
            if glob.has_magic(part):
                matches = sorted(glob.glob(part))
                if not matches:
                    raise UserError(f"{part}: no file matches this pattern")
                out += [Path(m) for m in matches]
            elif Path(part).is_file():
                out.append(Path(part))
            elif Path(part).is_dir():
                raise UserError(f"{part} is a folder; give its files (e.g. '{part}/*.parquet')")
            else:
                raise UserError(f"{part}: no such file (expected code_contests Parquet or JSONL)")
    return out


def _parquet_rows(paths: list[Path], generated_tests: bool, batch_rows: int) -> Iterable[Mapping[str, Any]]:
    """Rows of Parquet files as one dataset, a record batch at a time, only the columns a Problem uses."""
    import pyarrow.dataset as ds

    dataset = ds.dataset([str(p) for p in paths], format="parquet")
    wanted = [c for c in COLUMNS if c in dataset.schema.names and (generated_tests or c != "generated_tests")]
    for batch in dataset.to_batches(columns=wanted, batch_size=batch_rows):
        yield from batch.to_pylist()


def iter_rows(
    *specs: Path | str, generated_tests: bool = True, batch_rows: int = 64
) -> Iterable[Mapping[str, Any]]:
    """Dataset rows from files, globs and lists (`expand_paths`), streamed: Parquet runs of consecutive
    files are read as one pyarrow dataset, `batch_rows` rows at a time; JSONL line by line."""
    from swerl.errors import UserError

    paths = expand_paths(specs)
    for path in paths:
        if path.suffix not in {".parquet", ".jsonl", ".json"}:
            raise UserError(f"{path}: expected a .parquet or .jsonl file")
    run: list[Path] = []
    for path in [*paths, None]:
        if path is not None and path.suffix == ".parquet":
            run.append(path)
            continue
        if run:
            yield from _parquet_rows(run, generated_tests, batch_rows)
            run = []
        if path is not None:
            yield from stream_records(path)


def load_problems(*paths: Path | str, generated_tests: bool = True) -> LoadReport:
    """Problems from Parquet / JSONL files, globs or comma-separated lists (the Hub's shards downloaded
    once, or test fixtures); `generated_tests=False` leaves the generated tests unread."""
    return collect(iter_rows(*paths, generated_tests=generated_tests), generated_tests)


def load_hub(split: str = "train") -> LoadReport:  # pragma: no cover - needs the network
    """Problems straight from the Hub: `datasets.load_dataset("deepmind/code_contests", split=split)`.

    Downloads ~3 GB on first use (cached by `datasets`); splits are train, valid and test. Tests use
    `load_problems` on files they write instead.
    """
    from datasets import load_dataset

    return collect(load_dataset("deepmind/code_contests", split=split))
