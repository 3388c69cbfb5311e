"""Seeded mutations for the fuzz tests: byte-level and token-level damage plus the hostile pieces
an adversarial pass found (bus ids `0x`, `0x03:`, a `dev` prefix, odd indices, deep nesting)."""
from __future__ import annotations

import random

# Tokens that broke parsers before, and shapes real dumps never have.
HOSTILE = [
    "0x", "0x03:", "0x:", "dev", "dev0", "[dev]", "-1", "99999999999999999999", "1e999", "NaN",
    "GPU-1", "GPU99999999", "GPU", "NIC", "X", "NV99999999", "busId ", "busid=\"0x\"",
    "busid=\"dev\"", "dev=\"-3\"", "dev=\"4294967297\"", "rank=\"9e9\"", "numaid=\"x\"",
    "affinity=\"zz\"", "count=\"99999999999999\"", "<pci busid=\"0000:zz:00.0\" class=\"0x0302\">",
    "<gpu dev=\"\" sm=\"\" rank=\"\">", "</system>", "<system>", "<!DOCTYPE x [<!ENTITY a \"aa\">]>",
    "&a;", "<", ">", "/>", "\"", "=", ":", "[", "]", "(", ")", "/", "->", " via ", "P2P/IPC",
    "Channel 00 : 0[0x] -> 1[dev] via P2P/IPC", "cudaDev 99999999 busId 0x", "=== System : maxBw",
    "GPU/0x :", "CPU/ (", "+ PCI[", "NET/IB : Using [0]", "# Rank  0 Group  0 Pid 1 on h device 7 [0x03:] X",
    "# Rank 99999999 Pid 1 on h device 99999999 [0x] A", "\x00", "\ufffd", "\t", "\r", "\n" * 3,
]


def mutate(data: str, rng: random.Random, rounds: int | None = None) -> str:
    """A damaged copy of `data`: a few random edits, each kept small so most of the input stays
    recognisable (the parser must get deep, not fail at the first line)."""
    out = data
    for _ in range(rounds if rounds is not None else rng.randint(1, 6)):
        op = rng.randrange(9)
        n = len(out)
        pos = rng.randrange(n + 1) if n else 0
        if op == 0 and n:  # flip a character
            out = out[:pos] + chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x2FF)])) + out[pos + 1:]
        elif op == 1:  # insert a hostile token
            out = out[:pos] + rng.choice(HOSTILE) + out[pos:]
        elif op == 2 and n:  # delete a span
            out = out[:pos] + out[pos + rng.randint(1, 64):]
        elif op == 3 and n:  # duplicate a span (repeated devices, repeated tags)
            span = out[pos:pos + rng.randint(1, 400)]
            out = out[:pos] + span * rng.randint(2, 20) + out[pos:]
        elif op == 4:  # cut it short
            out = out[:pos]
        elif op == 5 and n:  # replace a number with an extreme one
            digits = [i for i in range(max(0, pos - 200), min(n, pos + 200)) if out[i].isdigit()]
            if digits:
                i = rng.choice(digits)
                out = out[:i] + rng.choice(["99999999999", "-1", "0x", "4294967296", "00"]) + out[i + 1:]
        elif op == 6:  # swap two lines
            lines = out.split("\n")
            if len(lines) > 2:
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                out = "\n".join(lines)
        elif op == 7:  # nest an element deeply
            depth = rng.choice([50, 300, 3000])
            out = out[:pos] + "<pci busid=\"0000:01:00.0\">" * depth + out[pos:]
        else:  # replace a hex bus id part
            out = out[:pos] + rng.choice(["0x", "0x03:", "dev", ":", ".", "0000:", "-"]) + out[pos:]
    return out


JSON_HOSTILE = [
    "[" * 3000, "{\"a\":" * 3000, "9" * 5000, "1e999", "-1e999", "NaN", "Infinity", "-Infinity",
    "\"\\ud800\"", "\"\\u0000\"", "null", "true", "[]", "{}", "\"x\" * 9", "18446744073709551616",
    "-9223372036854775809", "0.1e-99999", "\"" + "x" * 70000 + "\"", ",", ":", "\"switches\":",
    "{\"summary\":" * 40, "\"gpu_count\":" + "9" * 30,
]


def mutate_json(data: str, rng: random.Random) -> str:
    """A damaged JSON document: the text edits of mutate() plus JSON's own hostile pieces
    spliced in at a random place (often inside the summary, which is read first)."""
    out = data
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.5:
            out = mutate(out, rng, rounds=1)
        else:
            pos = rng.randrange(len(out) + 1)
            out = out[:pos] + rng.choice(JSON_HOSTILE) + out[pos:]
    return out
