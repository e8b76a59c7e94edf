"""Server mode over loopback: `swerl vllm-serve` (on the stand-in for vLLM 0.33.0) in one process, a GRPO
trainer in this one; prompts and answers over HTTP, new weights over a gloo broadcast group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_grpo import tiny_grpo, tiny_grpo_config

from swerl.errors import UserError
from swerl.models.loading import load_model_and_tokenizer
from swerl.models.tiny import build_tiny_model
from swerl.net import free_port
from swerl.rollout import HFEngine, SamplingParams
from swerl.rollout.vllm_server import VLLMServerEngine, wait_for_server
from swerl.rollout.weight_sync import GlooChannel

ROOT = Path(__file__).resolve().parents[1]
FAKE_VLLM = Path(__file__).resolve().parent / "fake_vllm"


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="module")
def server(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`swerl vllm-serve` on a free loopback port, shared by the tests here; yields its base URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_VLLM), str(ROOT)])}
    command = [sys.executable, "-m", "swerl", "vllm-serve", "--model", str(tiny_dir), "--host", "127.0.0.1"]
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    process = subprocess.Popen([*command, "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(url, timeout=120)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def greedy(engine: Any, prompt: list[int]) -> Any:
    return engine.generate([prompt], SamplingParams(n=1, temperature=0, max_new_tokens=6))[0][0]


def test_grpo_trains_through_the_server_and_pushes_its_weights(
    server: str, tiny_dir: Path, tmp_path: Path
) -> None:
    """After each step the server samples from the trainer's weights: its greedy answer and log-probs
    equal those of the trainer's model, and differ from the start model's."""
    model, tokenizer = load_model_and_tokenizer(tiny_dir)
    engine = VLLMServerEngine(server, group_port=free_port(), weight_backend="gloo")
    prompt = tokenizer("def f(x):\n    return x + 1\n")["input_ids"]
    before = greedy(engine, prompt[:6])
    start = greedy(HFEngine(model, tokenizer), prompt[:6])
    assert before.token_ids == start.token_ids and before.logprobs == pytest.approx(start.logprobs, abs=1e-5)

    trainer, _ = tiny_grpo(tiny_grpo_config(tmp_path / "run", "vllm_server"), model, tokenizer, engine)
    history = trainer.train()
    assert len(history) == 2 and history[-1]["sampling/is_weight/mean"] > 0

    after = greedy(engine, prompt[:6])
    trained = greedy(HFEngine(model, tokenizer), prompt[:6])
    assert after.token_ids == trained.token_ids
    assert after.logprobs == pytest.approx(trained.logprobs, abs=1e-5)
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3)
    engine.close()


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_server_reports_bad_requests_and_failed_transfers(server: str) -> None:
    """A wrong route is 404, a malformed body 400; a weight the model lacks fails on the job thread after
    its broadcast, and the next waited request (the sync's prefix-cache reset) reports it."""
    assert post(server + "/nowhere", {})[0] == 404
    status, answer = post(server + "/generate", {"prompts": [[1, 2]], "params": {"n": 0}})
    assert status == 400 and "n must be >= 1" in answer["error"]

    port = free_port()
    assert post(server + "/init_communicator", {"backend": "gloo", "port": port, "world_size": 2})[0] == 200
    channel = GlooChannel("127.0.0.1", port, 1, 2)
    assert post(server + "/update_named_params", {"params": [["no.such.weight", "float32", [2]]]})[0] == 200
    channel.broadcast(torch.ones(2), 1)
    status, answer = post(server + "/reset_prefix_cache", {})
    assert status == 500 and "earlier weight transfer failed" in answer["error"]
    assert "no.such.weight" in answer["error"]
    assert post(server + "/reset_prefix_cache", {}) == (200, {"reset": True})  # reported once
    assert post(server + "/close_communicator", {})[0] == 200
    channel.close()


def test_a_trainer_without_a_server_is_told_how_to_start_one(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match="swerl vllm-serve"):
        VLLMServerEngine(url, connect_timeout=0)
    assert f"waiting for the vLLM server at {url}" in capsys.readouterr().err  # said before the wait


def test_two_training_ranks_share_the_server(server: str, tiny_dir: Path, tmp_path: Path) -> None:
    """torchrun with 2 ranks (gloo): both sample through the server, rank 0 alone pushes the weights, and
    afterwards the server holds the weights both ranks trained to."""
    out = tmp_path / "ranks.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKE_VLLM), str(ROOT)])}
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
    ]
    launch += [
        __file__,
        "--trainer-rank",
        server,
        str(tiny_dir),
        str(tmp_path / "run"),
        str(free_port()),
        str(out),
    ]
    done = subprocess.run(launch, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = sorted((json.loads(line) for line in out.read_text().splitlines()), key=lambda r: r["rank"])
    assert [r["steps"] for r in ranks] == [2, 2] and ranks[0]["sender"] and not ranks[1]["sender"]
    assert ranks[0]["policy"] == pytest.approx(ranks[1]["policy"], abs=1e-6)  # the ranks trained as one
    assert ranks[0]["served"] == pytest.approx(ranks[0]["policy"], abs=1e-5)  # and the server has it


def trainer_rank(url: str, model_dir: str, run_dir: str, group_port: str, out: str) -> None:
    """One rank of the two-rank test: GRPO through the server; writes greedy log-probs of the policy (its
    own model) and of the server, for one prompt, after training."""
    from swerl.learner.dist import init_distributed, shutdown_distributed

    dist = init_distributed()
    model, tokenizer = load_model_and_tokenizer(model_dir)
    engine = VLLMServerEngine(url, sender=dist.rank == 0, group_port=int(group_port), weight_backend="gloo")
    trainer, prompt = tiny_grpo(tiny_grpo_config(run_dir, "vllm_server"), model, tokenizer, engine)
    steps = len(trainer.train())
    record = {
        "rank": dist.rank,
        "sender": engine.channel is not None,
        "steps": steps,
        "policy": greedy(HFEngine(model, tokenizer), prompt[:6]).logprobs,
        "served": greedy(engine, prompt[:6]).logprobs,
    }
    engine.close()
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    shutdown_distributed()


if __name__ == "__main__" and sys.argv[1:2] == ["--trainer-rank"]:
    trainer_rank(*sys.argv[2:7])
