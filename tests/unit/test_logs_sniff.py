"""sources.sniff counts control characters on the bytes (issue 25, item 15: a Python loop over
8 KiB of every file was 0.3 s of 4096 rank files); the count must be the decoded text's."""
from __future__ import annotations

import random

from distdoctor.knowledge.logs import sources


def test_control_count_is_the_decoded_texts() -> None:
    rng = random.Random(1)
    for _ in range(3000):
        # control bytes, ASCII, and bytes that start or break UTF-8 sequences
        window = bytes(rng.randrange(256) if rng.random() < 0.3 else rng.randrange(40)
                       for _ in range(rng.randrange(200)))
        text = window.decode("utf-8", "replace")
        want = sum(1 for ch in text if ch < " " and ch not in "\t\n\r\f\v\x1b\x08")
        assert len(window) - len(window.translate(None, sources._CONTROL)) == want, window


def test_binary_and_text_verdicts() -> None:
    assert sources.sniff(b"step 1\n" * 100) == ""
    assert "binary" in sources.sniff(bytes(range(1, 32)) * 50)
    assert sources.sniff("caf\u00e9 \x1b[31mred\x1b[0m\n".encode() * 100) == ""
