#!/usr/bin/env bash
# System packages the test suite needs: bubblewrap, which isolates untrusted programs (swerl/sandbox).
# Installed with apt-get when missing and we are root; otherwise we say how, and the sandbox tests skip
# (outside CI) or fail (CI=true) with the same instruction.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[system_deps] installing bubblewrap"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
else
    echo "[system_deps] bubblewrap (bwrap) is missing: install it, e.g. 'sudo apt-get install bubblewrap'." >&2
    echo "[system_deps] without it the sandbox tests are skipped and untrusted code cannot be run." >&2
fi
