"""Credentials never leave the machine in what servebench prints or writes: values of environment keys that look
like one are shown as ``***`` (``servebench render``, ``servebench recipe``; results and junit never hold the
environment at all), and so are the values of command-line flags named like one (``--api-key sk_x`` in a recipe's
engine flags, as ``servebench render`` prints a process's command)."""

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


# A flag names a credential when its last word is one of these (whole words: --tokenizer, --max-num-batched-tokens
# and --use-server-token-count are not credentials; --api-key, --hf-token, --auth-secret are)
FLAG_WORDS = frozenset({"key", "token", "secret", "password", "passwd", "auth", "credential", "credentials", "cookie"})


def is_secret_flag(arg: str) -> bool:
    """A ``--flag`` (or ``--flag=value``) whose name says it carries a credential."""
    if not arg.startswith("--"):
        return False
    return arg[2:].split("=", 1)[0].lower().replace("_", "-").split("-")[-1] in FLAG_WORDS


def masked_argv(argv) -> list[str]:
    """``argv`` with the value of every credential-like flag replaced by *** (``--api-key X``, ``--api-key=X``)."""
    out: list[str] = []
    hide = False
    for arg in map(str, argv):
        if hide and not arg.startswith("-"):
            out.append(MASK)
            hide = False
            continue
        if is_secret_flag(arg) and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=" + MASK)
            hide = False
        else:
            out.append(arg)
            hide = is_secret_flag(arg)
    return out
