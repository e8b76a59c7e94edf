"""Server mode: vLLM on GPUs of its own (`swerl vllm-serve`), the trainer on others, as TRL's `vllm-serve`.

Colocated vLLM shares the trainer's GPUs and memory; a server has its GPUs to itself (no sleep, a larger
KV cache) and the trainer pushes new weights to it after every step. Two planes:

- control, JSON over HTTP (`VLLMServer`): `GET /health`, `GET /world_size`, `POST /generate`,
  `/init_communicator`, `/update_named_params`, `/reset_prefix_cache`, `/close_communicator`;
- tensors, a broadcast group between the trainer and the server's vLLM workers (NCCL between GPUs, gloo
  between CPU processes; `swerl.rollout.weight_sync`), so weights never pass through JSON.

One thread runs every vLLM call in the order the requests arrived. `/init_communicator` and
`/update_named_params` answer as soon as their job is queued, because their job waits for the trainer's
side of the broadcast, which the trainer starts only after the answer; a later waited request
(`/reset_prefix_cache`, which ends every sync) reports a failure of those jobs. Every training rank
samples through the server itself (`VLLMServerEngine.generate`); only rank 0 sends weights, but every
rank walks the parameters with it (`full_parameters`: gathering a ZeRO-3 parameter is collective).
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from swerl.errors import UserError
from swerl.rollout.base import Completion, SamplingParams
from swerl.rollout.openai_client import post_json
from swerl.rollout.weight_sync import (
    CHANNEL_BACKENDS,
    TensorChannel,
    dtype_name,
    full_parameters,
    open_channel,
)

RECEIVER = "swerl.rollout.weight_sync.WeightReceiver"


def completion_to_json(completion: Completion) -> dict[str, Any]:
    return {
        "token_ids": completion.token_ids,
        "logprobs": completion.logprobs,
        "finish_reason": completion.finish_reason,
        "text": completion.text,
    }


def completions_from_json(
    groups: list[list[dict[str, Any]]], prompts: list[list[int]]
) -> list[list[Completion]]:
    if len(groups) != len(prompts):
        raise RuntimeError(f"the server answered {len(groups)} groups for {len(prompts)} prompts")
    return [
        [
            Completion(
                prompt_ids=prompt,
                token_ids=[int(t) for t in c["token_ids"]],
                logprobs=[float(x) for x in c["logprobs"]],
                finish_reason=c["finish_reason"],
                text=c["text"],
            )
            for c in group
        ]
        for prompt, group in zip(prompts, groups, strict=True)
    ]


class VLLMServer:
    """The server side: an in-process `VLLMEngine` (workers extended with `WeightReceiver`) behind HTTP."""

    def __init__(self, engine: Any, host: str = "0.0.0.0", port: int = 8000) -> None:
        self.engine = engine
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any] | None] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._worker = threading.Thread(target=self._run_jobs, name="vllm-jobs", daemon=True)
        self._worker.start()
        self.httpd = ThreadingHTTPServer((host, port), self._handler())
        self.port = self.httpd.server_address[1]

    # -- the job thread ---------------------------------------------------------------------------------
    def _run_jobs(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future = job
            try:
                result = fn()
            except BaseException as exc:  # reported to the waiting request, or to the next one
                if future is not None:
                    future.set_exception(exc)
                elif self._failure is None:
                    self._failure = exc
            else:
                if future is not None:
                    future.set_result(result)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the job thread after everything queued before it; raise an earlier async failure."""
        future: Future[Any] = Future()
        self._jobs.put((fn, future))
        result = future.result()
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise RuntimeError(f"an earlier weight transfer failed: {failure}") from failure
        return result

    def post(self, fn: Callable[[], Any]) -> None:
        """Queue `fn` without waiting (its failure is reported by the next `call`)."""
        self._jobs.put((fn, None))

    # -- the API ----------------------------------------------------------------------------------------
    def world_size(self) -> int:
        return int(self.engine.llm.get_world_size(include_dp=False))

    def generate(self, body: dict[str, Any]) -> dict[str, Any]:
        prompts = [[int(t) for t in p] for p in body["prompts"]]
        params = SamplingParams(**body.get("params", {}))
        groups = self.call(lambda: self.engine.generate(prompts, params))
        return {"completions": [[completion_to_json(c) for c in group] for group in groups]}

    def init_communicator(self, body: dict[str, Any]) -> dict[str, Any]:
        args = (body["backend"], "0.0.0.0", int(body["port"]), int(body["world_size"]))
        self.post(lambda: self.engine.llm.collective_rpc("swerl_open_channel", args=args))
        return {"status": "opening"}

    def update_named_params(self, body: dict[str, Any]) -> dict[str, Any]:
        params = [(str(name), str(dtype), [int(s) for s in shape]) for name, dtype, shape in body["params"]]
        self.post(lambda: self.engine.llm.collective_rpc("swerl_receive", args=(params,)))
        return {"status": "receiving"}

    def reset_prefix_cache(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"reset": bool(self.call(self.engine.llm.reset_prefix_cache))}

    def close_communicator(self, body: dict[str, Any]) -> dict[str, Any]:
        self.call(lambda: self.engine.llm.collective_rpc("swerl_close_channel"))
        return {"status": "closed"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self
        routes: dict[tuple[str, str], Callable[[dict[str, Any]], dict[str, Any]]] = {
            ("GET", "/health"): lambda body: {"status": "ok"},
            ("GET", "/world_size"): lambda body: {"world_size": server.world_size()},
            ("POST", "/generate"): server.generate,
            ("POST", "/init_communicator"): server.init_communicator,
            ("POST", "/update_named_params"): server.update_named_params,
            ("POST", "/reset_prefix_cache"): server.reset_prefix_cache,
            ("POST", "/close_communicator"): server.close_communicator,
        }

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                route = routes.get((method, self.path.rstrip("/") or "/"))
                if route is None:
                    return self._send(HTTPStatus.NOT_FOUND, {"error": f"no route {method} {self.path}"})
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length) or b"{}")
                    answer = route(body)
                except (KeyError, TypeError, ValueError) as exc:
                    return self._send(HTTPStatus.BAD_REQUEST, {"error": f"{type(exc).__name__}: {exc}"})
                except Exception as exc:
                    return self._send(
                        HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"{type(exc).__name__}: {exc}"}
                    )
                return self._send(HTTPStatus.OK, answer)

            def _send(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

            def log_message(self, format: str, *args: Any) -> None:  # one line per request is noise
                pass

        return Handler

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._jobs.put(None)
        self._worker.join()


def wait_for_server(base_url: str, timeout: float) -> None:
    """Poll `GET /health` until it answers 200; a server still loading its model refuses connections."""
    deadline = time.monotonic() + timeout
    said = False
    while True:
        try:
            with urllib.request.urlopen(base_url.rstrip("/") + "/health", timeout=10) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if not said:  # a server loading a large model takes minutes: say what the run is waiting for
            print(f"waiting for the vLLM server at {base_url} (up to {timeout:.0f} s)", file=sys.stderr)
            said = True
        if time.monotonic() > deadline:
            raise UserError(
                f"no vLLM server answers at {base_url} after {timeout:.0f} s; start one with "
                "`swerl vllm-serve --model PATH` and set rollout_kwargs.base_url"
            )
        time.sleep(1.0)


class VLLMServerEngine:
    """`RolloutEngine` over a `swerl vllm-serve` server; `sender` (rank 0) pushes the weights.

    `weight_backend` None picks NCCL when `device` is a GPU and gloo otherwise. The trainer's GPU must not
    be one of the server's (NCCL cannot put two ranks of one group on one device).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        sender: bool = True,
        device: Any = "cpu",
        group_port: int = 51216,
        weight_backend: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 240.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        backend = weight_backend or ("nccl" if str(device).startswith("cuda") else "gloo")
        if backend not in CHANNEL_BACKENDS:
            raise UserError(
                f"rollout_kwargs.weight_backend must be one of {CHANNEL_BACKENDS}, got {backend!r}"
            )
        wait_for_server(self.base_url, connect_timeout)
        self.channel: TensorChannel | None = None
        self.rank = -1
        if sender:
            with urllib.request.urlopen(self.base_url + "/world_size", timeout=30) as response:
                world = int(json.loads(response.read())["world_size"]) + 1
            self._post("/init_communicator", {"backend": backend, "port": group_port, "world_size": world})
            host = urlparse(self.base_url).hostname or "127.0.0.1"
            self.rank = world - 1
            self.channel = open_channel(backend, host, group_port, self.rank, world, device)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return post_json(self.base_url + path, body, timeout=self.timeout)

    def generate(self, prompts: list[list[int]] | Any, params: SamplingParams) -> list[list[Completion]]:
        """`params.n` completions per prompt from the server's current weights."""
        own = [[int(t) for t in p] for p in prompts]
        if not own:
            return []
        answer = self._post("/generate", {"prompts": own, "params": asdict(params)})
        return completions_from_json(answer["completions"], own)

    def sync_weights(self, model: Any) -> None:
        """Push `model`'s parameters one at a time (every rank walks them; rank 0 sends), then reset the
        server's prefix cache, which also waits for the last parameter to be loaded. The closing barrier
        keeps the other ranks from asking for answers before the server holds every new weight."""
        from swerl.learner.dist import barrier

        source = getattr(model, "module", model)
        for name, tensor in full_parameters(source):
            if self.channel is None:
                continue
            self._post(
                "/update_named_params", {"params": [[name, dtype_name(tensor.dtype), list(tensor.shape)]]}
            )
            self.channel.broadcast(tensor.to(self.channel.device).contiguous(), self.rank)
        if self.channel is not None:
            self._post("/reset_prefix_cache", {})
        barrier()

    def close(self) -> None:
        """Leave the weight channel (the server keeps running for the next trainer)."""
        if self.channel is not None:
            self._post("/close_communicator", {})
            self.channel.close()
            self.channel = None


def serve(
    model: str,
    *,
    host: str,
    port: int,
    ready: Callable[[VLLMServer], None] | None = None,
    **engine_kwargs: Any,
) -> None:
    """Load `model` into vLLM with the weight receiver in its workers and serve until interrupted."""
    from swerl.rollout.vllm_engine import VLLMEngine

    engine = VLLMEngine(model, enable_sleep_mode=False, worker_extension_cls=RECEIVER, **engine_kwargs)
    server = VLLMServer(engine, host, port)
    if ready is not None:
        ready(server)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        engine.close()
