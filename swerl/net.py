"""Is a remote service reachable at all? Asked before a long job starts, so that a machine without a route
to it fails in seconds with one clear line rather than after minutes of a client library's retries.

The probe is a TCP connect to the URL's host and port, not a request: it cannot tell whether a repository
exists or a token is valid (the real calls still report that). Behind a proxy the proxy reaches the
service, not this machine, so callers skip the probe there rather than refuse what would have worked.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 3.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")


def behind_proxy() -> bool:
    """Whether HTTPS traffic goes through a proxy set in the environment."""
    return any(os.environ.get(name) for name in _PROXY_VARIABLES)


def reachable(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a TCP connection to `url`'s host and port opens within `timeout_s`."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now: the kernel's pick for a socket bound to port 0, closed again.
    For a rendezvous or a server about to be started here (another process may take it in between, so a
    caller that can should bind port 0 itself and report the port it got)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
