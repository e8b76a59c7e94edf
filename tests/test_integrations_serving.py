"""`swerl agentless run` through OpenAI-compatible servers: a real `transformers serve` and a vLLM-shaped one.

The real server is transformers' own (`transformers serve`, from `transformers[serving]`), serving a tiny
model built here, on loopback, on CPU. It speaks the plain OpenAI API: it refuses vLLM's fields (HTTP 422),
takes text prompts only and returns text only. The vLLM-shaped server is a loopback fake that answers
token ids, as vLLM does: through it the sampled ids must come back as the ids the server sent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_http import JsonPostServer

from swerl.cli.main import main
from swerl.rollout import SamplingParams
from swerl.rollout.openai_client import CompletionServerError, OpenAIEngine

pytest.importorskip("fastapi")  # transformers[serving]
pytest.importorskip("uvicorn")

RUN = ["--num-samples", "2", "--max-new-tokens", "12", "--localize-max-new-tokens", "12", "--offline"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from swerl.models.tiny import build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("served") / "tiny", hidden_size=32, intermediate_size=64, num_layers=1
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def transformers_serve(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`transformers serve MODEL --host 127.0.0.1 --port N --device cpu` as a child process, in its own
    process group; ready when GET /health answers (12-17 s here). Stopped with SIGTERM to the group when
    the module's tests end, passed or failed (SIGKILL if it has not exited 10 s later)."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve-log") / "serve.log"
    cli = Path(sys.executable).with_name("transformers")
    command = [
        str(cli),
        "serve",
        str(tiny_model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    with log.open("wb") as out:
        server = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture
def demo(tmp_path: Path) -> list[str]:
    """`swerl agentless demo`'s instance and clone, as the options of a run into tmp_path/run."""
    assert main(["agentless", "demo", "--dir", str(tmp_path / "demo")]) == 0
    data = [
        "--dataset",
        str(tmp_path / "demo" / "instances.jsonl"),
        "--clones",
        str(tmp_path / "demo" / "clones"),
    ]
    return [*data, "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")]


def test_agentless_runs_end_to_end_through_transformers_serve(
    transformers_serve: str, tiny_model: Path, demo: list[str], tmp_path: Path
) -> None:
    served = ["--openai-base-url", transformers_serve, "--model", str(tiny_model)]
    assert main(["agentless", "run", *demo, *served, *RUN]) == 0
    [prediction] = [
        json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()
    ]
    assert prediction["instance_id"] == "demo-org__calc-1" and prediction["model_name_or_path"] == str(
        tiny_model
    )
    [repair] = [json.loads(line) for line in (tmp_path / "run" / "repair.jsonl").read_text().splitlines()]
    assert "stage_error" not in repair and len(repair["samples"]) == 2  # n=2 though the server ignores n

    engine = OpenAIEngine(transformers_serve, str(tiny_model), tokenizer=_tokenizer(tiny_model))
    [[text_only]] = engine.generate([[1, 2, 3]], SamplingParams(temperature=0, max_new_tokens=4))
    assert (
        engine.protocol == "transformers"
        and text_only.token_ids == []
        and text_only.finish_reason in ("stop", "length")
    )
    # That server decodes greedily at any temperature unless told to sample: samples must differ.
    [sampled] = engine.generate([[1, 2, 3]], SamplingParams(n=2, temperature=1.0, max_new_tokens=8, seed=0))
    [greedy] = engine.generate([[1, 2, 3]], SamplingParams(n=2, temperature=0, max_new_tokens=8, seed=0))
    assert sampled[0].text != sampled[1].text and greedy[0].text == greedy[1].text
    with pytest.raises(CompletionServerError, match="not a vLLM server"):  # what training would need
        OpenAIEngine(transformers_serve, str(tiny_model), require_token_ids=True).generate(
            [[1]], SamplingParams()
        )


def test_a_server_that_refuses_every_request_stops_the_run_with_its_reason(
    transformers_serve: str,
    tiny_model: Path,
    demo: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served = [
        "--openai-base-url",
        transformers_serve,
        "--model",
        str(tiny_model),
        "--openai-protocol",
        "vllm",
    ]
    assert main(["agentless", "run", *demo, *served, *RUN]) == 1  # a UserError: one line, status 1
    [error] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("swerl: error:")]
    assert "localize_files: the model server failed every instance (1)" in error and "HTTP 422" in error
    assert "use protocol 'openai'" in error
    assert not (tmp_path / "run" / "predictions.jsonl").exists()


def _tokenizer(model: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model)


class VLLMShaped(JsonPostServer):
    """Answers as vLLM does: `owned_by: "vllm"`, token-id prompts, `choices[].token_ids` with log-probs.
    Every answer is the same ids (`answer_ids`), `n` choices per prompt."""

    def __init__(self, answer_ids: list[int], text: str) -> None:
        super().__init__(self.answer)
        self.answer_ids, self.text = answer_ids, text
        self.gets["/v1/models"] = {"object": "list", "data": [{"id": "tiny", "owned_by": "vllm"}]}

    def answer(self, body: dict) -> dict:
        assert body["return_token_ids"] and all(isinstance(t, int) for p in body["prompt"] for t in p)
        logprobs = {"token_logprobs": [-0.5] * len(self.answer_ids), "tokens": ["?"] * len(self.answer_ids)}
        choices = [
            {
                "index": i,
                "text": self.text,
                "token_ids": self.answer_ids,
                "logprobs": logprobs,
                "finish_reason": "stop",
            }
            for i in range(len(body["prompt"]) * body["n"])
        ]
        return {"object": "text_completion", "choices": choices}


def test_the_vllm_shaped_path_keeps_token_ids(tiny_model: Path, demo: list[str], tmp_path: Path) -> None:
    tokenizer = _tokenizer(tiny_model)
    text = "calc/ops.py\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    server = VLLMShaped(ids, text)
    try:
        assert (
            main(
                [
                    "agentless",
                    "run",
                    *demo,
                    "--openai-base-url",
                    server.base_url,
                    "--model",
                    "tiny",
                    "--tokenizer",
                    str(tiny_model),
                    *RUN,
                ]
            )
            == 0
        )
        assert (tmp_path / "run" / "predictions.jsonl").is_file()
        assert server.requests and all(r["body"]["return_token_ids"] for r in server.requests)
        engine = OpenAIEngine(server.base_url, "tiny")
        [[completion]] = engine.generate([[5, 6]], SamplingParams(max_new_tokens=8))
        assert (
            engine.protocol == "vllm"
            and completion.token_ids == ids
            and completion.logprobs == [-0.5] * len(ids)
        )
    finally:
        server.close()
