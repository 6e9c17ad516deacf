"""Credentials never leave the machine in what rackbench prints or writes: values of environment keys that look
like one are shown as ``***`` (``rackbench render``, ``rackbench recipe``; results and junit never hold the
environment at all), and so are the values of command-line flags named like one (``--api-key sk_x`` in a recipe's
engine flags, as ``rackbench render`` prints a process's command). Wherever else a credential sits inside a value,
:func:`redact` finds it: by key inside a structured (JSON) value (``--model-loader-extra-config
'{"api_key": "..."}'``), as a URL's user information in any value (``PIP_INDEX_URL=https://user:pw@host``,
``s3://KEY:SECRET@bucket``), as ``key=value`` / ``"key": "value"`` in text (a server log's tail quoted in a result),
and by the shapes credentials of the common providers take (``AKIA...``, ``sk-...``, ``hf_...``, ``ghp_...``, JWTs,
private-key blocks)."""

from __future__ import annotations

import json
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
    """``data`` (an environment, or a whole recipe) with the values of credential-like keys replaced by ***, and
    every other string value :func:`redact`-ed."""
    if isinstance(data, dict):
        return {k: (MASK if is_secret(k) and isinstance(v, str) else masked(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [masked(v) for v in data]
    return redact(data) if isinstance(data, str) else data


# A flag names a credential when its last word is one of these (whole words: --tokenizer, --max-num-batched-tokens
# and --use-server-token-count are not credentials; --api-key, --hf-token, --auth-secret are)
FLAG_WORDS = frozenset({"key", "token", "secret", "password", "passwd", "auth", "credential", "credentials", "cookie"})


def is_secret_word(name: str) -> bool:
    """A key inside a value (JSON, ``key=value``) whose last word names a credential: api_key, hf-token, password;
    not max_num_batched_tokens."""
    return re.split(r"[-_.]", name.lower())[-1] in FLAG_WORDS


def is_secret_flag(arg: str) -> bool:
    """A ``--flag`` (or ``--flag=value``) whose name says it carries a credential."""
    if not arg.startswith("--"):
        return False
    return is_secret_word(arg[2:].split("=", 1)[0])


USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^\s/@\"']+@", re.IGNORECASE)
WORDS = "|".join(sorted(FLAG_WORDS, key=len, reverse=True))
PAIR = re.compile(r"""(?<![\w.-])(?P<key>["']?(?:[\w.-]*[-_.])?(?:%s)["']?)(?P<sep>\s*[:=]\s*)(?P<q>["']?)"""
                  r"""(?P<value>[^\s"',;&}\[\]()]+)""" % WORDS, re.IGNORECASE)
SHAPES = re.compile(r"\bAKIA[0-9A-Z]{16}\b|\bsk[-_][A-Za-z0-9_-]{16,}|\bhf_[A-Za-z0-9]{20,}|"
                    r"\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abpr]-[A-Za-z0-9-]{10,}|"
                    r"\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}|"
                    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL)


def _masked_json(data):
    if isinstance(data, dict):
        return {k: (MASK if is_secret_word(str(k)) and isinstance(v, (str, int, float)) and not isinstance(v, bool)
                    else _masked_json(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [_masked_json(v) for v in data]
    return redact(data) if isinstance(data, str) else data


def redact(text: str) -> str:
    """``text`` with every credential found in it replaced by ***: a JSON value by its keys (re-written only when
    something was masked), else URL user information, ``key=value`` and ``"key": "value"`` pairs whose key names a
    credential, and the shapes of common providers' keys."""
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped:
        try:
            data = json.loads(stripped)
        except ValueError:
            data = None
        if isinstance(data, (dict, list)):
            clean = _masked_json(data)
            return text if clean == data else json.dumps(clean)
    out = USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    out = PAIR.sub(lambda m: f"{m['key']}{m['sep']}{m['q']}{MASK}", out)
    return SHAPES.sub(MASK, out)


def masked_argv(argv) -> list[str]:
    """``argv`` with the value of every credential-like flag replaced by *** (``--api-key X``, ``--api-key=X``), and
    every other argument :func:`redact`-ed (a JSON flag value, a URL with a password)."""
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
            flag, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
            out.append(flag + eq + redact(value))
            hide = is_secret_flag(arg)
    return out
