"""A hub model or a GitHub API that cannot be reached is refused at once, not after minutes of retries."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swerl.hub import model_problem, unavailable_model
from swerl.net import free_port

_NO_PROXY = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@pytest.fixture
def hub_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache and no proxy or offline switch; returns the cache folder."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    for name in _NO_PROXY:
        monkeypatch.delenv(name, raising=False)
    return cache


def _cache_model(cache: Path, repo_id: str) -> None:
    """The layout `huggingface_hub` writes for one downloaded file of `repo_id`'s main branch."""
    root = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = root / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text("0" * 40)


def test_unreachable_hub_is_refused_quickly(hub_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    problem = unavailable_model("someone/some-model")
    assert problem is not None and "someone/some-model" in problem and "cannot be reached" in problem
    assert time.monotonic() - started < 2


def test_reachable_hub_and_cached_model_and_local_dir_pass(
    hub_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert unavailable_model("someone/some-model") is None
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    _cache_model(hub_env, "someone/cached-model")
    assert unavailable_model("someone/cached-model") is None
    assert unavailable_model(str(tmp_path)) is None


def test_offline_switch_refuses_uncached_and_proxy_skips_probe(
    hub_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "HF_HUB_OFFLINE" in (unavailable_model("someone/some-model") or "")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert unavailable_model("someone/some-model") is None


def test_eval_refuses_unreachable_model_in_one_line(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "HF_HOME": str(tmp_path / "hf"),
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",
    }
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "swerl", "eval", "humaneval", "--model", "someone/some-model"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 2, run.stderr
    assert "someone/some-model" in run.stderr and "cannot be reached" in run.stderr
    assert time.monotonic() - started < 30


def test_train_refuses_unreachable_model_before_creating_the_run(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"prompt": "p", "oracle_new_content": {}}\n')
    config = tmp_path / "grpo.yaml"
    config.write_text(
        f"model_name_or_path: someone/some-model\ntrain_file: {rows}\noutput_dir: {tmp_path / 'run'}\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf")}
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    run = subprocess.run(
        [sys.executable, "-m", "swerl", "train", "grpo", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 1, run.stderr
    assert f"{config}: model_name_or_path: model someone/some-model" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_github_mining_refuses_unreachable_api_before_writing(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    api = f"http://127.0.0.1:{free_port()}"
    command = ["data", "mine", "--github", "psf/requests", "--api-url", api, "--out", str(tmp_path / "out")]
    run = subprocess.run(
        [sys.executable, "-m", "swerl", *command],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert f"--api-url {api} cannot be reached" in run.stderr
    assert not (tmp_path / "out").exists()


def test_agentless_refuses_unreachable_model_before_any_instance(tmp_path: Path) -> None:
    dataset = tmp_path / "instances.jsonl"
    row = {"instance_id": "o__r-1", "repo": "o/r", "base_commit": "0" * 40, "problem_statement": "bug"}
    dataset.write_text(json.dumps(row) + "\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HOME": str(tmp_path / "hf")}
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    command = ["agentless", "run", "--dataset", str(dataset), "--model", "someone/some-model"]
    run = subprocess.run(
        [sys.executable, "-m", "swerl", *command, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stderr
    assert "--model: model someone/some-model is neither a local directory" in run.stderr


def test_a_folder_that_is_not_a_model_is_named_as_such(tmp_path: Path) -> None:
    """A data folder given as the model: one line saying so, not transformers' tokenizer-backend error."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("{}\n")
    tokenizer = tmp_path / "tok"
    tokenizer.mkdir()
    (tokenizer / "tokenizer_config.json").write_text("{}")
    assert "not a model directory (no config.json" in (model_problem(str(tmp_path / "data")) or "")
    assert model_problem(str(tokenizer), tokenizer=True) is None
    assert "not a tokenizer directory" in (model_problem(str(tmp_path / "data"), tokenizer=True) or "")


def test_hub_datasets_that_cannot_be_reached_are_refused_at_once(
    hub_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dataset lite` and `--decontaminate-with hf:...` waited ~25 s on the datasets library's retries
    without a network; now one line at once, saying what to give instead."""
    from data_pipeline.filter.decontam import load_benchmark
    from swerl.cli.main import main
    from swerl.errors import UserError

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    started = time.monotonic()
    assert main(["agentless", "localize", "--dataset", "lite", "--out", str(hub_env.parent / "loc")]) == 1
    err = capsys.readouterr().err
    assert "--dataset lite: hub dataset princeton-nlp/SWE-bench_Lite needs" in err and "local .parquet" in err
    with pytest.raises(UserError, match=r"--decontaminate-with hf:acme/bench: hub dataset acme/bench needs"):
        load_benchmark("hf:acme/bench")
    assert time.monotonic() - started < 10
    assert not (hub_env.parent / "loc").exists()
