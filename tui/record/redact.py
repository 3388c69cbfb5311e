"""Masks secrets in environments and log text, and walks whole reports so nothing slips through."""
from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from distdoctor.knowledge.lazyre import lazy
from distdoctor.knowledge.printable import plain_text

MASK = "[redacted]"

# One rule for secret variable names, shared with the repro's own records (probes cannot import
# tui): is_secret_name is re-exported from here.
from ...probes.secret_names import is_secret_name  # noqa: E402


def redact_env(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an environment with the values of secret-looking names masked (empty stays empty)."""
    out: dict[str, Any] = {}
    for name, value in mapping.items():
        if is_secret_name(str(name)) and value not in (None, ""):
            out[name] = MASK
        elif isinstance(value, str) and _UUID.fullmatch(value) and uuid_is_secret(str(name)):
            out[name] = MASK
        elif isinstance(value, str):
            out[name] = redact_text(value)
        else:
            out[name] = value
    return out


def _keep_prefix(prefix_group: int = 1) -> Callable[[re.Match[str]], str]:
    return lambda m: m.group(prefix_group) + MASK


# Each rule: substrings of which one must occur (lowercased) for the rule to be worth running,
# the pattern, and what to put in its place. Order matters: specific shapes first.
# (The trigger scan finds non-overlapping words, so a longer trigger that contains a keyword,
# like "authorization", is listed too.)
_KW = ("pass", "pwd", "token", "secret", "key", "credential", "auth", "authorization", "private key")
_TOKEN_RULES: list[tuple[tuple[str, ...], re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    # Authorization headers: keep the scheme, mask the credential.
    (("authorization",),
     lazy(r"(?i)(\bauthorization\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|negotiate)\s+)?)"
                r"[^\s\"',;]+"), _keep_prefix()),
    (("bearer",), lazy(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}"), _keep_prefix()),
    # Cookie headers: every cookie in them is a session credential.
    (("cookie",), lazy(r"(?i)(\bcookie\s*:\s*)(?!\s*\[redacted)[^\r\n]+"), _keep_prefix()),
    # Credentials inside URLs: scheme://user:password@host (redis://:password@host too); the
    # password may hold a "/" (a port followed by a path is not a password).
    (("@",), lazy(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)(?!\d+(?:/|$))"
                        r"(?!\[redacted)[^\s@]+(@)"),
     lambda m: m.group(1) + MASK + m.group(2)),
    # A key as the whole user part: Sentry DSNs (https://KEY@o1.ingest.sentry.io/2) and
    # token-shaped users of any URL.
    (("@",), lazy(r"(?i)(\b[a-z][a-z0-9+.-]*://)(?:[^\s:/@]+(?=@[\w.-]*sentry)|"
                        r"[0-9a-f]{16,}|(?=[^\s:/@]*\d)[A-Za-z0-9_-]{24,})(@)"),
     lambda m: m.group(1) + MASK + m.group(2)),
    # curl -u user:password, --user user:password (the user name stays)
    (("curl", "--user", "wget", "http"),
     lazy(r"((?:^|\s)(?:-u|--user|--proxy-user)(?:\s+|=)[\"']?[^\s:\"']+:)"
                r"(?!\[redacted)[^\s\"']+"), _keep_prefix()),
    # sshpass -p PASS, docker/podman/helm login -p PASS
    (("sshpass", "login"),
     lazy(r"(?i)(\b(?:sshpass|(?:docker|podman|nerdctl|helm|buildah|skopeo)\s+"
                r"(?:registry\s+)?login)\b[^\n|;&]*?\s-p\s*)(?!\[redacted)(?:'[^']*'|\"[^\"]*\"|\S+)"),
     _keep_prefix()),
    # mysql -pPASS (attached: "-p NAME" is a prompt and a database name)
    (("mysql", "mariadb"),
     lazy(r"(\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb)\b[^\n|;&]*?\s-p)"
                r"(?!\[redacted)(?:'[^']*'|\"[^\"]*\"|[^\s'\"]+)"), _keep_prefix()),
    # Prose and .netrc: "the password is X", "password was X", "login bot password X"
    (_KW, lazy(r"(?i)(\b(?:password|passwd|passphrase|passcode|pwd|secret|token)\s+"
                     r"(?:is|was|=)\s+|\blogin\s+\S+\s+password\s+)(?!\[redacted)[\"']?"
                     r"[^\s\"']+[\"']?"), _keep_prefix()),
    # Webhook URLs carry their secret in the path.
    (("hooks.slack.com",), lazy(r"(?i)(\bhooks\.slack\.com/(?:services|workflows|triggers)/)"
                                      r"[^\s\"'<>]+"), _keep_prefix()),
    # Provider tokens with well-known shapes: keep the prefix so a reader knows what it was.
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), lazy(r"\b(gh[pousr]_)[A-Za-z0-9]{20,}\b"),
     _keep_prefix()),
    (("github_pat_",), lazy(r"\b(github_pat_)[A-Za-z0-9_]{20,}\b"), _keep_prefix()),
    (("hf_",), lazy(r"\b(hf_)[A-Za-z0-9]{20,}\b"), _keep_prefix()),
    (("glpat-",), lazy(r"\b(glpat-)[A-Za-z0-9_-]{16,}"), _keep_prefix()),
    (("npm_",), lazy(r"\b(npm_)[A-Za-z0-9]{36}\b"), _keep_prefix()),
    (("xox",), lazy(r"\b(xox[abposr]-)[A-Za-z0-9-]{8,}"), _keep_prefix()),
    (("sk-",), lazy(r"\b(sk-)(?:proj-)?[A-Za-z0-9_-]{20,}"), _keep_prefix()),
    (("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
     lazy(r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA))[A-Z0-9]{16}\b"), _keep_prefix()),
    # Shapes that once slipped through (issue 25): each provider's prefix is kept.
    (("xapp-", "xoxe"), lazy(r"\b(xapp-|xoxe(?:\.xox[bp])?-)[A-Za-z0-9-]{10,}"), _keep_prefix()),
    (("sk",), lazy(r"\b(SK)[0-9a-fA-F]{32}\b"), _keep_prefix()),  # Twilio API key
    (("dapi",), lazy(r"\b(dapi)[0-9a-fA-F]{32}(?:-\d+)?\b"), _keep_prefix()),  # Databricks
    (("key-",), lazy(r"\b(key-)[0-9A-Za-z]{32}\b"), _keep_prefix()),  # Mailgun
    (("shpat_", "shpss_", "shpca_", "shppa_"), lazy(r"\b(shp(?:at|ss|ca|pa)_)[0-9a-fA-F]{32}\b"),
     _keep_prefix()),  # Shopify
    (("dop_v1_", "doo_v1_", "dor_v1_"), lazy(r"\b(do[opr]_v1_)[0-9a-fA-F]{64}\b"),
     _keep_prefix()),  # DigitalOcean
    (("key-",), lazy(r"(AGE-SECRET-KEY-1)[0-9A-Z]{20,}"), _keep_prefix()),
    (("atatt",), lazy(r"\b(ATATT3)[A-Za-z0-9_=-]{20,}"), _keep_prefix()),  # Atlassian
    # SendGrid: both parts go (the first names the key, the second is its secret)
    (("sg.",), lazy(r"\b(SG\.)[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}"), _keep_prefix()),
    # signed URLs: AWS (Signature=, X-Amz-Signature=), Google (X-Goog-Signature=), CloudFront
    (("signature",), lazy(r"(?i)((?<![A-Za-z0-9_])(?:x-(?:amz|goog)-)?signature=)(?!\[redacted)"
                                r"[^&\s\"'<>]+"), _keep_prefix()),
    (("eyj",), lazy(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.?[A-Za-z0-9_-]*"),
     lambda m: "eyJ" + MASK),
    (("private key",),
     lazy(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S),
     lambda m: "-----BEGIN PRIVATE KEY-----" + MASK),
    # Command-line options: --password xyz, --token=xyz, --api-key xyz
    (_KW, lazy(r"(?i)(--?(?:password|passwd|pass|token|secret|api[-_]?key|access[-_]?key|"
                     r"auth[-_]?token|hf[-_]token)(?:=|\s+))(?!-)[^\s\"']+"), _keep_prefix()),
    # key=value / key: value pairs (query strings, config dumps, JSON) whose key looks secret.
    (_KW, lazy(r"(?i)([\"']?(?<![A-Za-z0-9_.-])(?!authorization\b)[A-Za-z0-9_.-]*(?:password|"
                     r"passwd|token(?!s|iz)|secret|api[_-]?key|"
                     r"apikey|access[_-]?key|private[_-]?key|credential|auth)[A-Za-z0-9_.-]*[\"']?"
                     r"\s*(?:=|:(?!//))\s*[\"']?)(?![^\s&,;\"'<>]*\[redacted)([^\s&,;\"'<>)\]}]+)"),
     lambda m: m.group(1) + MASK),
]
# NAME=value where NAME is a secret-looking variable (is_secret_name decides).
_ASSIGN_TRIGGERS = _KW + ("aws_", "pat", "dsn", "sas", "sig", "cookie", "private", "pw", "cred", "otp",
                           "hmac", "licen", "pin")
_TRIGGERS = {t for rule in _TOKEN_RULES for t in rule[0]} | set(_ASSIGN_TRIGGERS)
_TRIGGER_RE = lazy("|".join(sorted({re.escape(t) for t in _TRIGGERS}, key=len, reverse=True)))
# a trigger found also stands for the shorter ones inside it ("signature" holds "sig"), which
# the scan for non-overlapping words cannot see at the same place
_IMPLIED = {t: frozenset(u for u in _TRIGGERS if u != t and u in t) for t in _TRIGGERS}
_LONG_RUN = lazy(r"[A-Za-z0-9+_-]{32}")
_ASSIGN_RE = lazy(r"\b([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s,;&]+)")
_HEX_RE = lazy(r"(?<![0-9A-Za-z_.:-])([0-9a-fA-F]{32,})(?![0-9A-Za-z_])")
_B64_RE = lazy(r"(?<![A-Za-z0-9+_-])([A-Za-z0-9+_-]{32,}={0,2})(?![A-Za-z0-9+_=-])")
# Words just before a long hex run that say it is a version, commit or digest, not a key.
# The same words as a whole key (or a part of it) of a structure holding a bare hex string.
_HEX_KEY = lazy(r"(?i)(?:^|[_.\s-])(?:sha\d*|commit|git|rev(?:ision)?|digest|hash|checksum|"
                      r"md5|uuid|build)(?:$|[_.\s-])")
_BARE_HEX = lazy(r"[0-9a-fA-F]{32,64}")
_HEX_CONTEXT = lazy(r"(?i)(sha\d*|commit|git|rev(ision)?|version|digest|hash|build|"
                          r"checksum|md5|uuid|id|\+g)[\s:=@'\"(]*$")


# A UUID has no shape of its own that says "secret" (Heroku, New Relic and many license keys are
# UUIDs; so are GPU, run and request ids): the name it is given to decides. Under a name that says
# it identifies hardware, a run or a request it stays; under any other name it is masked.
_UUID = lazy(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_UUID_ASSIGN = lazy(r"(?<![A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]{0,80})([\"']?\s*(?:=|:)\s*[\"']?)"
                          r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
                          r"(?![0-9A-Za-z-])")
_ID_NAME = lazy(r"(?i)uuid|gpu|device|mig|run|job|trace|request|correlation|boot|machine|host|node|"
                      r"span|build|commit|session|uid|instance|container|pod|disk|volume|partition|fs|cuda|nccl")


def uuid_is_secret(name: str) -> bool:
    """Whether a UUID given to `name` is masked: unless the name says what it identifies."""
    return is_secret_name(name) or not _ID_NAME.search(name)


def _mask_uuid(m: re.Match[str]) -> str:
    return m.group(1) + m.group(2) + MASK if uuid_is_secret(m.group(1)) else m.group(0)


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _mask_assign(m: re.Match[str]) -> str:
    if is_secret_name(m.group(1)) and m.group(2) not in ("", '""', "''") and "[redacted" not in m.group(2):
        return f"{m.group(1)}={MASK}"
    return m.group(0)


def _mask_hex(m: re.Match[str]) -> str:
    before = m.string[max(0, m.start() - 24):m.start()]
    return m.group(0) if _HEX_CONTEXT.search(before) else MASK


def _mask_b64(m: re.Match[str]) -> str:
    run = m.group(1).rstrip("=")
    # A key is random: all three character classes and high entropy. Identifiers, model names and
    # underscore_joined words fail one of the two.
    has_all = (any(c.isupper() for c in run) and any(c.islower() for c in run)
               and any(c.isdigit() for c in run))
    if has_all and _entropy(run) >= 4.3 and run.count("_") + run.count("-") <= len(run) // 8:
        return MASK
    return m.group(0)


def redact_text(text: str) -> str:
    """Mask token-shaped strings in free text; bus ids, versions, SeqNums and addresses survive."""
    if not text:
        return text
    return _redact_cached(text) if len(text) <= 256 else _redact(text)


def _redact(text: str) -> str:
    found = set(_TRIGGER_RE.findall(text.lower()))
    if found:  # most log lines hold none of the trigger words: skip every keyed rule at once
        found.update(*(_IMPLIED[t] for t in list(found)))
        for triggers, pattern, repl in _TOKEN_RULES:
            if found.intersection(triggers):
                text = pattern.sub(repl, text)
        if "=" in text and found.intersection(_ASSIGN_TRIGGERS):
            text = _ASSIGN_RE.sub(_mask_assign, text)
    if "-" in text and _UUID.search(text):
        text = _UUID_ASSIGN.sub(_mask_uuid, text)
    if _LONG_RUN.search(text):
        text = _HEX_RE.sub(_mask_hex, text)
        text = _B64_RE.sub(_mask_b64, text)
    return text


# Reports repeat the same short strings (keys, file names, statuses) thousands of times.
_redact_cached = functools.lru_cache(maxsize=8192)(_redact)


MAX_DEPTH = 64  # deeper structure is shown as its (bounded, redacted) text: no RecursionError


def walk(obj: Any, text: Callable[[str], str], *, mask_keys: bool = True, _key: str = "",
         _depth: int = 0) -> Any:
    """A deep copy of `obj` with `text` applied to every string (keys too); with `mask_keys`, the
    value under a secret-looking key is masked whole. Past MAX_DEPTH levels a structure becomes
    one string (its text, cut to 4096 characters), so any depth is safe."""
    if isinstance(obj, str):
        if _key and _BARE_HEX.fullmatch(obj) and _HEX_KEY.search(_key) and not is_secret_name(_key):
            return obj  # {"git": "cf30153c..."}: a commit or digest named by its key, not a secret
        if mask_keys and _key and len(obj) == 36 and _UUID.fullmatch(obj) and uuid_is_secret(_key):
            return MASK
        return text(obj)
    if _depth >= MAX_DEPTH and isinstance(obj, (dict, Mapping, list, tuple)):
        return text(plain_text(obj, 4096))
    if isinstance(obj, (dict, Mapping)):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            name = text(key) if isinstance(key, str) else key
            if mask_keys and isinstance(key, str) and is_secret_name(key):
                out[name] = _mask_all(value)
            else:
                # a table row {"name": "torch.git", "value": ...}: the name says what the value is
                context = obj["name"] if key == "value" and isinstance(obj.get("name"), str) \
                    else str(key)
                out[name] = walk(value, text, mask_keys=mask_keys, _key=context, _depth=_depth + 1)
        return out
    if isinstance(obj, (list, tuple)):
        return [walk(item, text, mask_keys=mask_keys, _key=_key, _depth=_depth + 1) for item in obj]
    return obj


def _mask_all(value: Any, _depth: int = 0) -> Any:
    """Everything under a secret-named key: scalars masked (empty stays empty, booleans stay),
    except where the value came from ({"value": ..., "source": "env"})."""
    if _depth >= MAX_DEPTH:
        return MASK
    if isinstance(value, dict):
        return {k: v if k == "source" else _mask_all(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mask_all(v, _depth + 1) for v in value]
    if value is None or isinstance(value, bool) or value == "":
        return value
    return MASK


def redact(obj: Any) -> Any:
    """Redact a whole JSON-like structure: secret-named values masked, every string scrubbed."""
    return walk(obj, redact_text)
