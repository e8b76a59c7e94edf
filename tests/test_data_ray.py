"""`--engine ray`: the same build stage on a local Ray instance gives exactly the rows of the local engine.

Skipped when Ray (the optional extra `swerl[ray]`) is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_pipeline.config import FilterConfig, MineConfig
from data_pipeline.run.runner import mine
from data_pipeline.sources.local import LocalSource
from data_pipeline.synthetic import edge_case_history

ray = pytest.importorskip("ray")

CONFIG = MineConfig(shard_size=3, filters=FilterConfig(max_file_bytes=100_000))


def read_dir(folder: Path) -> list[dict]:
    shards = sorted(folder.glob("shard-*.parquet"))
    return [row for shard in shards for row in pq.read_table(shard).to_pylist()]


def test_ray_engine_gives_the_local_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)  # a local instance, never someone's cluster
    edge_case_history(tmp_path / "repo")
    rows = {}
    for engine in ("local", "ray"):
        source = LocalSource(tmp_path / "repo", tmp_path / "cache", repo="acme/widgets")
        summary = mine(tmp_path / engine, source, CONFIG, workers=2, progress=False, engine=engine)
        rows[engine] = read_dir(tmp_path / engine / "data")
        assert summary.rows == len(rows[engine]) > 0
    assert rows["ray"] == rows["local"]
    assert not ray.is_initialized()  # the instance the run started is shut down again
