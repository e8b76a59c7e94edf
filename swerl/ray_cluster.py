"""Ray, joined the same way by every engine that offers it (the mining and validation shard pools, the
execution reward's CPU workers).

Ray is an optional extra, imported only when a user picks a Ray engine, so its absence is the user's to
fix and is said in one line. `RAY_ADDRESS` names a cluster to join; without it a local instance of the
requested CPUs starts, with no dashboard and no worker logs streamed to the driver (they would interleave
with the progress bars).
"""

from __future__ import annotations

import os
from typing import Any

from swerl.errors import UserError


def require_ray(what: str) -> Any:
    """The `ray` module; `what` names the engine asking for it, for the one-line error."""
    try:
        import ray
    except ImportError:
        raise UserError(f"{what} needs Ray: pip install 'swerl[ray]'") from None
    return ray


def connect(workers: int, what: str) -> tuple[Any, bool]:
    """(`ray`, whether this call started it): connected to `RAY_ADDRESS`'s cluster, else to a new local
    instance of `workers` CPUs. An instance the process already runs is used as it is (not started here,
    so not the caller's to shut down)."""
    ray = require_ray(what)
    if ray.is_initialized():
        return ray, False
    address = os.environ.get("RAY_ADDRESS") or None
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address is None:
        options["num_cpus"] = max(1, workers)
    ray.init(address=address, **options)
    return ray, True
