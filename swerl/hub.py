"""Fail fast when a Hugging Face hub model cannot be had.

Loading a hub id that is neither cached nor reachable makes `huggingface_hub` retry for about a minute
before it gives up, after the command has already read its data. A command that takes a model checks
it first with `unavailable_model`: a hub id is fine when its `config.json` is in the local cache or the
hub's host accepts a connection (`swerl.net`), and refused at once otherwise, with what to do about it.
"""

from __future__ import annotations

import os
from pathlib import Path

from swerl.net import behind_proxy, reachable

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


def unavailable_model(name: str) -> str | None:
    """Why hub model `name` cannot be loaded now, or None when it can (or when `name` is a local path,
    which `swerl.configs.missing_model` checks)."""
    if Path(name).expanduser().exists() or _cached(name):
        return None
    if _offline():
        return f"model {name} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
    endpoint = _endpoint()
    if behind_proxy() or reachable(endpoint):
        return None
    return (
        f"model {name} is neither a local directory nor in the Hugging Face cache, and {endpoint} "
        "cannot be reached from this machine; pass a save_pretrained directory, or download it where "
        "there is network (huggingface-cli download) and copy the cache"
    )


def unreachable_hub_dataset(name: str, instead: str = "give local files (--data)") -> str | None:
    """Why hub dataset `name` cannot be downloaded now (None when it can, or when an offline setting
    tells `datasets` to read its own cache): `datasets` retries an unreachable hub for minutes. `instead`
    says what the command takes in its place."""
    if _offline() or os.environ.get("HF_DATASETS_OFFLINE", "").strip().lower() in _OFFLINE_VALUES:
        return None
    endpoint = _endpoint()
    if behind_proxy() or reachable(endpoint):
        return None
    return (
        f"hub dataset {name} needs {endpoint}, which cannot be reached from this machine; {instead}, or "
        "set HF_DATASETS_OFFLINE=1 to read a copy already in the datasets cache"
    )


def model_problem(name: str, tokenizer: bool = False) -> str | None:
    """Why model (or with `tokenizer`, tokenizer) `name` cannot be loaded, as far as can be told before
    loading it: a local path that is not such a folder, or a hub id that is neither cached nor reachable."""
    from swerl.configs import missing_model

    return missing_model(name, tokenizer) or unavailable_model(name)
