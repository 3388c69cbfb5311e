"""Which variable names hold secrets, and their values masked: the repro's stored records and
echoed commands never carry a token given with --env (the report's redaction uses the same rule)."""
from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

MASK = "[redacted]"

# Words that mark a variable as secret wherever they appear in its name; TOKENS and TOKENIZER
# are sizes and libraries (MAX_TOKENS, TOKENIZERS_PARALLELISM), not credentials.
_SECRET_WORDS = re.compile(r"TOKEN(?!S\b|S_|IZ)|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|"
                           r"AUTH|COOKIE|PRIVATE|WEBHOOK")
# Parts that must match whole: "KEY" inside "MONKEY" or "KEYBOARD" is not a key.
_SECRET_PARTS = frozenset({"KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY",
                           "SSHKEY", "AUTHKEY", "SIGNINGKEY", "ENCRYPTIONKEY", "PAT", "PWD",
                           "PASS", "DSN", "SAS", "SIG", "PW", "PASSWD", "CRED", "CREDS", "OTP",
                           "HMAC", "LICENSE", "LICENCE", "SIGNATURE", "PASSCODE", "PASSPHRASE"})
_SECRET_PREFIXES = ("AWS_",)
# Names that look secret to the rules above but hold diagnostic, non-secret values.
_SAFE_NAMES = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "KEYTIMEOUT", "XAUTHORITY",
                         "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE",
                         "TOKENIZERS_PARALLELISM"})


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True when an environment variable (or config key) named `name` probably holds a secret."""
    upper = name.strip().upper()
    if not upper or upper in _SAFE_NAMES:
        return False
    if upper.startswith(_SECRET_PREFIXES):
        return True
    if _SECRET_WORDS.search(upper):
        return True
    parts = re.split(r"[_.\-\s]+", upper)
    return any(part in _SECRET_PARTS for part in parts)


def mask_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with the values of secret-named variables masked (an empty value stays empty)."""
    return {k: MASK if is_secret_name(str(k)) and v not in (None, "") else v
            for k, v in env.items()}


def env_assignment(name: str, value: str) -> str:
    """`NAME=value` for a shell line: quoted, and a secret as "$NAME" (taken from the pasting
    shell's environment, never printed)."""
    import shlex

    if is_secret_name(name) and value:
        return f'{name}="${name}"'
    return f"{name}={shlex.quote(value)}"
