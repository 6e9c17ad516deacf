"""Credentials never leave the machine in what servebench prints or writes: values of environment keys that look
like one are shown as ``***`` (``servebench render``, ``servebench recipe``; results and junit never hold the
environment at all)."""

from __future__ import annotations

import re

# Parts of a name that mark a credential: HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, DB_PASSWD, NGC_AUTH,
# GOOGLE_APPLICATION_CREDENTIALS, ...
SECRET = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|PASS(?:PHRASE)?\b|PASS_|PWD|AUTH|CREDENTIAL|COOKIE|SESSION_ID",
                    re.IGNORECASE)
MASK = "***"


def is_secret(name: object) -> bool:
    """An environment key that looks like a credential."""
    return bool(SECRET.search(str(name)))


def masked(data):
    """``data`` (an environment, or a whole recipe) with the values of credential-like keys replaced by ***."""
    if isinstance(data, dict):
        return {k: (MASK if is_secret(k) and isinstance(v, str) else masked(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [masked(v) for v in data]
    return data
