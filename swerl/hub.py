"""Fail fast when a Hugging Face hub model cannot be had.

Loading a hub id that is neither cached nor reachable makes `huggingface_hub` retry for about a minute
before it gives up, after the command has already read its data. A command that takes a model checks
it first with `unavailable_model`: a hub id is fine when its `config.json` is in the local cache or the
hub's host accepts a connection, and refused at once otherwise, with what to do about it.

The probe is a TCP connect to the endpoint's host (a few seconds at most), not a request: it says
nothing about whether the repository exists or is gated, which the real download still reports. It is
skipped behind a proxy (the proxy, not this machine, reaches the hub) so it never refuses what would
have worked.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_OFFLINE_VALUES = {"1", "true", "yes", "on"}


def _offline() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in _OFFLINE_VALUES
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _cached(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or "https://huggingface.co"


def hub_reachable(endpoint: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to `endpoint`'s host and port opens within `timeout_s`."""
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def unavailable_model(name: str) -> str | None:
    """Why hub model `name` cannot be loaded now, or None when it can (or when `name` is a local path,
    which `swerl.configs.missing_model` checks)."""
    if Path(name).expanduser().exists() or _cached(name):
        return None
    if _offline():
        return f"model {name} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None
    endpoint = _endpoint()
    if hub_reachable(endpoint):
        return None
    return (
        f"model {name} is neither a local directory nor in the Hugging Face cache, and {endpoint} "
        "cannot be reached from this machine; pass a save_pretrained directory, or download it where "
        "there is network (huggingface-cli download) and copy the cache"
    )
