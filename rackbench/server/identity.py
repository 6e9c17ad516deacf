"""Whose server answers? Every process of a deployment starts with its deployment's own token in its environment
(``RACKBENCH_DEPLOYMENT``); where the nodes are this machine, the process that listens on the deployment's API
port must carry that token, or the point would measure another session's server (two sessions that picked one
port: the second binds, the first's server never listens, and the first's load generator replays against the
second's). A cluster's nodes cannot be read from here: there the check after each point is the server's own
counters, which must account for the client's tokens (rackbench.results.verdict, ``own_server``).
"""

from __future__ import annotations

import os
import uuid
from urllib.parse import urlsplit

from rackbench.core.listeners import environment_of, sockets

TOKEN_ENV = "RACKBENCH_DEPLOYMENT"
CLIENT_ENV = "RACKBENCH_CLIENT"       # the same token on the load generator: its host sampler finds it by this


def new_token(profile_id: str) -> str:
    """A deployment's token: its session's pid, the profile and a random part (never the same twice)."""
    return f"{os.getpid()}-{profile_id}-{uuid.uuid4().hex[:12]}"


def answering(api_url: str, token: str) -> str | None:
    """None when a process that listens on ``api_url``'s port here carries ``token``; else what answers instead,
    in one line."""
    parts = urlsplit(api_url)
    port = parts.port
    heard = [s for s in sockets(port) if s.listening]
    if not heard:
        return f"nothing listens on port {port} here"
    ours = [s for s in heard if s.pid is not None and environment_of(s.pid).get(TOKEN_ENV) == token]
    if ours:
        return None
    other = heard[0]
    theirs = environment_of(other.pid).get(TOKEN_ENV) if other.pid else None
    whose = f"deployment {theirs}" if theirs else "no rackbench deployment"
    return f"port {port} is answered by {other.describe()}, of {whose}: not this deployment's server ({token})"
