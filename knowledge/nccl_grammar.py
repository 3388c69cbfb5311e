"""NCCL's log line grammar, declared once: the header before each line NCCL logs, its version
banner, the 'set by environment' lines of its parameters and nccl-tests' list of ranks.

Each piece is a pattern source with named groups, so a reader builds what it needs from them
(`anonymous` drops the group names where pieces are joined by `|`); the compiled `*_RX` helpers
are compiled on first use (knowledge/lazyre.py), so importing this module costs nothing.
Every pattern stays linear on hostile input (a 10 MB line without a newline, a long run of word
characters): each starts on a literal or at the start of a word only.
"""
from __future__ import annotations

import re

from .lazyre import lazy

# ------------------------------------------------------------------ the header
# NCCL's debug.cc (ncclDebugLogV) writes "%s:%d:%d " (hostname, pid, tid), then per level:
#   INFO  "[%d] NCCL INFO "          gpu-node-01:2270:2270 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
#   WARN  "[%d] %s:%d NCCL WARN "    gpu-node-01:2270:2301 [0] misc/socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<43127> failed
# (WARN's source is "%s:%d", __FILE__ and __LINE__). The host may be empty, and a launcher's or a
# logger's prefix (`[rank0]:`, a timestamp) may come before it.
# A host starts only where a word starts: without the lookbehind a long run of word characters
# is rescanned from each of its positions (quadratic).
WORD_START = r"(?<![\w.\-])"
ORIGIN = r"(?P<host>[\w.\-]*):(?P<pid>\d+):(?P<tid>\d+)"
DEVICE = r"\[(?P<dev>\d+)\]"
SOURCE = r"(?:\S+:\d+ )?"
LEVEL = r"NCCL (?P<level>INFO|WARN|TRACE|ERROR)"
HEADER = WORD_START + ORIGIN + " " + DEVICE + " " + SOURCE + LEVEL
# a whole line: the header, then NCCL's own text (`rest`)
LINE = HEADER + r" ?(?P<rest>.*)$"

# ------------------------------------------------------------------ the version banner
# init.cc prints it once per process (NCCL_DEBUG=VERSION or more); ncclras starts its report with it:
#   NCCL version 2.18.1+cuda12.1
#   NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8
# `full` is the whole word (2.18.1+cuda12.1), `version` the release, `cuda` the CUDA it was built for.
BANNER = r"NCCL version "
VERSION = BANNER + r"(?P<full>(?P<version>\d+\.\d+\.\d+)(?:[+.]cuda(?P<cuda>\d+\.\d+))?\S*)"

# ------------------------------------------------------------------ parameters set by environment
# param.cc logs each parameter read from the environment (INFO, subsystem ENV):
#   gpu-node-01:2270:2270 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.
# `name` starts a word (the lookbehind keeps a long word from being rescanned); the final dot is
# NCCL's, not the value's.
ENV_SET = r"(?<!\w)(?P<name>(?:NCCL|TORCH|GLOO)_\w+) set by environment to (?P<value>\S+?)\.?\s*$"

# ------------------------------------------------------------------ nccl-tests' ranks
# nccl-tests (src/common.cu) lists every rank before its results:
#   "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
#   #  Rank  0 Group  0 Pid  43398 on gpu-node-01 device  0 [0000:07:00] NVIDIA A100-SXM4-80GB
# older releases print no Group and the bus as [0x07]. TESTS_RANK_HEAD is enough to know the line,
# TESTS_RANK_DEVICE adds the host and device, TESTS_RANK the bus id and the GPU's name.
TESTS_RANK_HEAD = r"#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(?P<pid>\d+)\s+on\s+"
TESTS_RANK_DEVICE = TESTS_RANK_HEAD + r"(?P<host>\S+)\s+device\s+(?P<dev>\d+)\s+"
TESTS_RANK = TESTS_RANK_DEVICE + r"\[(?P<bus>[0-9a-fA-Fx:.]+)\]\s*(?P<gpu>.*)$"


def anonymous(source: str) -> str:
    """The pattern with its named groups made non-capturing, so pieces sharing a group name
    (`pid`, `host`) can be joined with `|`."""
    return re.sub(r"\(\?P<\w+>", "(?:", source)


LINE_RX = lazy(LINE)
VERSION_RX = lazy(VERSION)
ENV_SET_RX = lazy(ENV_SET)
TESTS_RANK_RX = lazy(TESTS_RANK)
