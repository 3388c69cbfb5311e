"""Stable pseudonyms for host names, IP addresses and user names in reports, with a local mapping."""
from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distdoctor.knowledge.atomicfile import write_atomic
from distdoctor.knowledge.printable import plain_text

from .redact import MAX_DEPTH, walk

_IPV4_RE = re.compile(r"(?<![\w.])((?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}"
                      r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))(?!\.?\d)(?![\w])")
# Candidates only; ipaddress decides. Needs "::" or all eight groups, so bus ids (0000:07:00.0),
# MACs, times and C++ scopes (c10d::ProcessGroup) never qualify. A ":" may precede it: NCCL
# prints "ib0:fe80::1%ib0".
_IPV6_RE = re.compile(r"(?<![\w.])((?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|"
                      r"(?:\d{1,3}\.){3}\d{1,3})?(?:%[\w.-]+)?)(?![\w:])")
_HOST_KEYS = frozenset({"host", "hostname", "hosts", "node", "nodes", "nodename", "master_addr",
                        "slurmd_nodename", "slurm_nodelist", "slurm_job_nodelist",
                        "slurm_submit_host", "slurm_launch_node_ipaddr", "remote_host", "peer",
                        "nccl_hostid", "slurm_step_nodelist", "slurm_nodename", "slurm_topology_addr",
                        "pmix_hostname", "ompi_mca_orte_hnp_uri", "hydra_host", "kubernetes_node_name",
                        "node_name", "nodelist"})
_USER_KEYS = frozenset({"user", "username", "logname", "sudo_user", "owner", "slurm_job_user"})
_HOST_TEXT = [
    # NCCL's prefix: host:pid:tid [dev] (optionally behind an srun -l "12: " rank label)
    re.compile(r"(?m)^[ \t]*(?:\d+:[ \t]*)?(?:\[[\w-]+\]:?[ \t]*)?([A-Za-z][\w.-]*):\d+:\d+ \[\d+\]"),
    # torchelastic's Root Cause block and key: value dumps
    re.compile(r"(?im)\b(?:host(?:name)?|nodename|master_addr)['\"]?\s*[:=]\s*['\"]?([A-Za-z][\w.-]*)"),
    # rendezvous endpoints: tcp://node-17:29500, --rdzv_endpoint=node-17:29500
    re.compile(r"(?i)(?:\b(?:tcp|c10d|etcd|etcd-v2|ssh)://|rdzv[_-]endpoint[= ]+)"
               r"(?:[^\s:/@]+(?::[^\s@/]*)?@)?([A-Za-z][\w.-]*)"),
    # any URL with credentials points at private infrastructure
    re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+(?::[^\s@/]*)?@([A-Za-z][\w.-]*)"),
]
# Host names in prose, with words that say they are hosts: "connect to trainer-3",
# "Could not resolve hostname gpu-a12", "ssh login-2", and name:port endpoints.
_HOST_PROSE = [
    re.compile(r"(?i)\b(?:connect(?:ing|ed|ion)?\s+(?:to|from)|resolve(?:\s+host(?:name)?)?|"
               r"unknown\s+host|unreachable\s+host|no\s+route\s+to\s+host|ssh(?:ing)?(?:\s+to)?|"
               r"host(?:name)?|node|server|peer|on|from)\s+['\"]?([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*)"),
    re.compile(r"(?<![\w.:/-])([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)*):\d{2,5}(?![\d.:])"),
]
# A host name from prose must look like a machine: a digit, or a dot between words, and not a
# file ("rank0.log:12"), a device ("cuda:0") or a rank.
_FILE_EXT = re.compile(r"(?i)\.(?:log|txt|py|pyc|json|ya?ml|toml|cpp|cc|cu|h|hpp|c|so|sh|out|err|"
                       r"gz|md|html|csv|pt|pth|bin|ckpt|safetensors)$")
_NOT_HOST_PREFIX = re.compile(r"(?i)^(?:rank|local_?rank|cuda|gpu_?id|device|eth|ib|mlx|lo|step|"
                              r"epoch|port|pid|tid|seq|layer|block|sm|sd|nvme|tty|v|version|"
                              r"python|torch|nccl|cu|sha|md)\d*$")
_TLDS = frozenset({"com", "net", "org", "io", "ai", "local", "internal", "lan", "corp", "example",
                   "edu", "gov", "cluster", "cloud", "localdomain", "intra", "priv", "home"})
# Network interfaces are diagnostic content (nic-selection evidence), never hosts.
_IFACE = re.compile(r"(?i)^(?:en[ospx]\d\w*|en\d+|eth\w*|bond\d+|docker\d+|virbr\d+|br-?\w+|"
                    r"veth\w*|wl\w*|vlan\d+|tun\d+|tap\d+|ib\w*|mlx\w*|hfi\w*|lo)$")
# Learnt host names that give their scheme away: letters, then a number (node-17, gpu-b-07).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z_-]*?[A-Za-z_-])(\d{1,6})([A-Za-z-]*)$")
_NAME = r"['\"]?([A-Za-z_][\w.-]{0,31})"
_USER_TEXT = [
    re.compile(r"(?<![\w.~-])/(?:home|Users)/([A-Za-z_][\w.-]{0,31})"),
    # `id` output, key: value dumps, "wandb: Currently logged in as: alice", "for user alice"
    re.compile(r"\buid=\d+\(([A-Za-z_][\w.-]{0,31})\)"),
    re.compile(r"(?i)\b(?:user(?:name)?|owner)['\"]?\s*[:=]\s*" + _NAME),
    re.compile(r"(?i)\blogged in as:?\s+" + _NAME),
    re.compile(r"(?i)\b(?:for|by|of) user\s+" + _NAME),
    re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://([^\s:/@\[]+)(?::[^\s@/]*)?@"),
    re.compile(r"(?<![\w.@/-])([a-z_][a-z0-9_.-]{1,31})@([A-Za-z][\w-]*(?:\.[\w-]+)*)"),
]
_USER_GATE = re.compile(r"(?i)@|/home/|/Users/|uid=|user|owner|logged in")
# Not identifying, and replacing them would garble ordinary words.
_COMMON_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "unknown",
                           "none", "null", "n/a", "root", "nobody", "daemon", "user", "admin",
                           "ubuntu", "ec2-user", "centos", "jovyan", "host", "node", "true",
                           "false"})


def _keep_ip(text: str) -> bool:
    """Loopback, unspecified and netmask addresses say something about the fault and nobody's
    network: 127.0.0.1 in a NET/Socket line is the nic-selection evidence."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return True  # not an address at all
    if addr.is_loopback or addr.is_unspecified:
        return True
    if addr.version == 4:
        bits = int(addr)
        inverted = ~bits & 0xFFFFFFFF
        return bits != 0 and (inverted & (inverted + 1)) == 0  # contiguous ones: a netmask
    return False


def _expand_nodelist(value: str) -> list[str]:
    """Slurm's compact node lists: node[01-03,7],gpu-a -> node01 node02 node03 node7 gpu-a."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([\w.-]+)\[([\d,-]+)\]|([\w.-]+)", value):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            if not lo.isdigit():
                continue
            stop = int(hi) if hi.isdigit() else int(lo)
            for n in range(int(lo), min(stop, int(lo) + 4096) + 1):
                names.append(f"{prefix}{n:0{len(lo)}d}")
    return names


class Pseudonymizer:
    """Replaces host names, IP addresses and user names with stable tokens (host-1, ip-1, user-1).
    The mapping lives in a local 0600 file so later reports of the same session reuse the tokens;
    it is never written into a report."""

    KINDS = ("host", "ip", "user")

    def __init__(self, mapping: Mapping[str, Mapping[str, str]] | None = None,
                 path: Path | None = None) -> None:
        self.path = path
        self.mapping: dict[str, dict[str, str]] = {kind: {} for kind in self.KINDS}
        for kind in self.KINDS:
            for real, token in (mapping or {}).get(kind, {}).items():
                if isinstance(real, str) and isinstance(token, str):
                    self.mapping[kind][real] = token
        self._pattern: re.Pattern[str] | None = None
        self.not_kept = ""

    @classmethod
    def load(cls, path: Path) -> Pseudonymizer:
        """The mapping kept at `path`, or an empty one when there is none yet."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {}
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"pseudonym mapping {path} is unreadable: {exc}") from None
        return cls(data if isinstance(data, dict) else {}, path)

    def save(self) -> bool:
        """Write the mapping atomically, readable by its owner only. False when it cannot be
        written (a read-only state folder): the report is still made, its tokens just are not
        kept for the next one (`not_kept` says why)."""
        if self.path is None:
            return False
        try:
            self._save(self.path)
        except OSError as exc:
            self.not_kept = str(exc.strerror or exc)
            return False
        return True

    def _save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(self.mapping, indent=1, sort_keys=True), mode=0o600, durable=True)

    def token(self, kind: str, real: str, same_as: str | None = None) -> str:
        """The token for `real`, made on first sight; `same_as` names another spelling of the
        same thing (an FQDN and its short name) that must share its token."""
        table = self.mapping[kind]
        key = real.lower() if kind == "host" else real
        if key not in table:
            if same_as is not None and same_as in table:
                table[key] = table[same_as]
            else:
                table[key] = f"{kind}-{len(set(table.values())) + 1}"
            if kind != "ip":
                self._pattern = None  # addresses are found by shape, names by this pattern
        return table[key]

    def learn_host(self, name: str, *, structured: bool = False) -> None:
        """A host name; `structured` when a field says it is one (short names like "vm" are then
        trusted; from free text they are too likely to be something else)."""
        if name.lower() in self.mapping["host"]:
            return  # NCCL prints the same host on every line
        name = name.strip().strip(".").strip("'\"")
        if (len(name) < (2 if structured else 3) or name.lower() in _COMMON_NAMES or name.isdigit()
                or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name) or _is_address(name)
                or re.fullmatch(r"(?:host|ip|user)-\d+", name)):
            return
        short = name.split(".", 1)[0].lower()
        # Only a machine-like short name (node-17, gpu01) is safe to replace on its own: the
        # "git" of git.corp.example is an ordinary word.
        if (short == name.lower() or len(short) < 3 or short in _COMMON_NAMES
                or not re.search(r"[\d-]", short)):
            self.token("host", name)
            return
        # An FQDN and its short name (NCCL lines print the short one) are one host, one token.
        self.token("host", name, same_as=short)
        self.token("host", short, same_as=name.lower())

    def learn_user(self, name: str) -> None:
        name = name.strip()
        if (len(name) < 2 or name.lower() in _COMMON_NAMES or name.isdigit()
                or not re.fullmatch(r"[A-Za-z_][\w.-]*", name)
                or re.fullmatch(r"(?:host|ip|user)-\d+", name)):
            return
        self.token("user", name)

    def learn(self, obj: Any, _key: str = "") -> None:
        """Collect names from a record: fields that name hosts or users, and text patterns;
        then, from the hosts learnt, their naming scheme and domain, so a sibling host that
        turns up only in free text ("no route to node-42") is replaced too."""
        self._learn(obj, _key)
        strings: list[str] = []
        _strings(obj, strings)
        self.learn_siblings(strings)

    def learn_siblings(self, texts: list[str]) -> None:
        """Hosts named in `texts` that share a learnt host's scheme (node-17 -> node-42) or
        domain (a.corp.example -> b.corp.example), or that prose calls a host."""
        for text in texts:
            if len(text) >= 4:
                for pattern in _HOST_PROSE:
                    for m in pattern.finditer(text):
                        if _machine_like(m.group(1)):
                            self.learn_host(m.group(1))
        shapes = self._sibling_pattern()
        if shapes is None:
            return
        for text in texts:
            for m in shapes.finditer(text):
                self.learn_host(m.group(0), structured=True)

    def _sibling_pattern(self) -> re.Pattern[str] | None:
        schemes: set[str] = set()
        domains: set[str] = set()
        for name in list(self.mapping["host"]):
            short, dot, domain = name.partition(".")
            if dot and "." in domain and not _is_address(name):
                domains.add(re.escape(domain))
            m = _SCHEME.match(short)
            if m and len(m.group(1).strip("-_")) >= 2 and not _NOT_HOST_PREFIX.match(m.group(1) + "0"):
                digits = m.group(2)
                width = f"{{{len(digits)}}}" if digits.startswith("0") else f"{{1,{len(digits) + 1}}}"
                schemes.add(re.escape(m.group(1)) + r"\d" + width + re.escape(m.group(3)))
        if not schemes and not domains:
            return None
        alternatives = [f"(?:{'|'.join(sorted(schemes))})(?:\\.[A-Za-z][\\w-]*)*"] if schemes else []
        if domains:
            alternatives.append(rf"[A-Za-z0-9][\w-]*\.(?:{'|'.join(sorted(domains))})")
        return re.compile(rf"(?i)(?<![\w.-])(?:{'|'.join(alternatives)})(?![\w-])")

    def _learn(self, obj: Any, _key: str = "", _depth: int = 0) -> None:
        if _depth >= MAX_DEPTH and isinstance(obj, (dict, Mapping, list, tuple)):
            self.learn_text(plain_text(obj, 4096))  # as redaction shows it: its bounded text
            return
        if isinstance(obj, (dict, Mapping)):
            for key, value in obj.items():
                if isinstance(key, str):
                    self.learn_text(key)
                # a table row {"name": "NCCL_HOSTID", "value": ...}: the name says what it is
                context = obj["name"] if key == "value" and isinstance(obj.get("name"), str) else str(key)
                self._learn(value, context, _depth + 1)
            return
        if isinstance(obj, (list, tuple)):
            for item in obj:
                self._learn(item, _key, _depth + 1)
            return
        if not isinstance(obj, str):
            return
        key = _key.lower()
        if key in _HOST_KEYS:
            for name in _expand_nodelist(obj):
                self.learn_host(name, structured=True)
            # the compact form itself (trn[001-004]) names hosts too
            for compact in re.findall(r"[\w.-]+\[[\d,-]+\]", obj):
                self.token("host", compact)
        elif key in _USER_KEYS:
            self.learn_user(obj)
        self.learn_text(obj)

    def learn_text(self, text: str) -> None:
        # Cheap gates first: a report holds thousands of short strings and most match nothing.
        if len(text) < 3:
            return
        if ":" in text or "=" in text or "@" in text:
            for pattern in _HOST_TEXT:
                for m in pattern.finditer(text):
                    self.learn_host(m.group(1))
        if _USER_GATE.search(text):
            for pattern in _USER_TEXT:
                for m in pattern.finditer(text):
                    self.learn_user(m.group(1))
                    if m.lastindex and m.lastindex >= 2:
                        self.learn_host(m.group(2))
        # Number addresses in order of appearance, before replacing anything.
        if "." in text:
            for m in _IPV4_RE.finditer(text):
                if not _keep_ip(m.group(1)):
                    self.token("ip", m.group(1))
        if "::" in text or text.count(":") >= 7:
            for m in _IPV6_RE.finditer(text):
                if _is_v6(m.group(1)) and not _keep_ip(m.group(1)):
                    self.token("ip", m.group(1).partition("%")[0])

    def _names_pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            hosts = sorted(self.mapping["host"], key=len, reverse=True)
            users = sorted(self.mapping["user"], key=len, reverse=True)
            # Host names are case-insensitive, but one made of letters only ("dgx") is matched
            # as spelled so the word in ordinary text ("DGX A100") is left alone.
            wordy = [h for h in hosts if h.isalpha()]
            machine = [h for h in hosts if not h.isalpha()]
            alternatives = [f"(?P<host>(?i:{'|'.join(map(re.escape, machine))}))" if machine else "",
                            f"(?P<hostw>{'|'.join(map(re.escape, wordy))})" if wordy else "",
                            f"(?P<user>{'|'.join(map(re.escape, users))})" if users else ""]
            body = "|".join(a for a in alternatives if a) or r"(?!x)x"
            self._pattern = re.compile(rf"(?<![\w.-])(?:{body})(?![\w-])")
        return self._pattern

    def apply(self, text: str) -> str:
        """Replace every known name and every address, so tokens are never re-replaced."""
        if len(text) < 2:
            return text

        def addr(m: re.Match[str]) -> str:
            real = m.group(0)
            if m.re is _IPV6_RE and not _is_v6(real):
                return real
            if _keep_ip(real):
                return real
            address, pct, zone = real.partition("%")  # the zone is an interface name: keep it
            return self.token("ip", address) + pct + zone

        if "." in text:
            text = _IPV4_RE.sub(addr, text)
        if ":" in text:
            text = _IPV6_RE.sub(addr, text)

        def name(m: re.Match[str]) -> str:
            if m.lastgroup in ("host", "hostw"):
                return self.mapping["host"][m.group(0).lower()]
            return self.mapping["user"][m.group(0)]

        return self._names_pattern().sub(name, text)

    def apply_all(self, obj: Any) -> Any:
        """A copy of a JSON-like structure with every string (keys too) pseudonymized."""
        return walk(obj, self.apply, mask_keys=False)


def _strings(obj: Any, out: list[str], _depth: int = 0) -> None:
    """Every string of a JSON-like structure (keys too), in order; past MAX_DEPTH levels, the
    structure's bounded text."""
    if isinstance(obj, str):
        out.append(obj)
    elif _depth >= MAX_DEPTH and isinstance(obj, (dict, Mapping, list, tuple)):
        out.append(plain_text(obj, 4096))
    elif isinstance(obj, (dict, Mapping)):
        for key, value in obj.items():
            if isinstance(key, str):
                out.append(key)
            _strings(value, out, _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _strings(item, out, _depth + 1)


def _machine_like(name: str) -> bool:
    """A word from prose that can only be a machine's name: it holds a digit or is dotted, and
    is neither a file, an address, a version nor a device or rank."""
    name = name.rstrip(".")
    if len(name) < 3 or _FILE_EXT.search(name) or _is_address(name) or _IFACE.match(name):
        return False
    if _NOT_HOST_PREFIX.match(name.split(".", 1)[0]) or re.fullmatch(r"[\d.]+|v?\d+(?:\.\d+)*\w*", name):
        return False
    if "." in name:
        # a dotted word is a host when its first label is machine-like (login-3.corp) or its
        # last is a domain's: "torch.distributed" and "transformers.models" are modules
        first, _, _ = name.partition(".")
        last = name.rsplit(".", 1)[1].lower()
        return bool(re.fullmatch(r"[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)+", name)) and (
            bool(re.search(r"[\d-]", first)) or last in _TLDS)
    return bool(re.search(r"\d", name)) and bool(re.search(r"[A-Za-z]{2}", name))


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _is_v6(text: str) -> bool:
    if "::" not in text and text.count(":") != 7:
        return False
    try:
        ipaddress.IPv6Address(text.split("%", 1)[0])
    except ValueError:
        return False
    return True
