#!/usr/bin/env bash
# Records real outputs on a GPU node for tests/fixtures/ (run by a session that is lent a GPU
# machine, from the repository root): NVML answers, nvidia-smi topology, one-rank and two-rank
# NCCL repros with NCCL_DEBUG=INFO. Every step has a timeout; a failing step is recorded too.
# Usage: OUT=/some/dir bash tests/gpu/record_device.sh
set -u
OUT=${OUT:-recordings}
mkdir -p "$OUT"
py=${PYTHON:-python3}
step() {  # step NAME SECONDS CMD...: stdout+stderr to $OUT/NAME.txt, exit code to NAME.rc
  local name=$1 secs=$2; shift 2
  timeout --kill-after=5 "$secs" "$@" >"$OUT/$name.txt" 2>&1
  echo $? >"$OUT/$name.rc"
  echo "$name: rc=$(cat "$OUT/$name.rc")"
}
if [ ! -x .venv/bin/distdoctor ]; then
  step setup 300 bash -c "$py -m venv .venv && .venv/bin/pip install -q -e '.[test]'"
fi
step nvidia-smi-L 20 nvidia-smi -L
step nvidia-smi-q 30 nvidia-smi -q
step topo-m 20 nvidia-smi topo -m
step topo-p2p-r 20 nvidia-smi topo -p2p r
step topo-p2p-w 20 nvidia-smi topo -p2p w
step topo-p2p-n 20 nvidia-smi topo -p2p n
step nvml-record 60 .venv/bin/python tests/gpu/record_nvml.py "$OUT/nvml.json"
step distdoctor-topo 60 .venv/bin/distdoctor topo --json
step distdoctor-check 60 .venv/bin/distdoctor check --json
step collect 60 .venv/bin/distdoctor collect -o "$OUT/snapshot.json"
step repro-nccl-1rank 180 .venv/bin/distdoctor repro --backend nccl --nproc 1 --timeout 120 --json
step repro-nccl-2rank 180 .venv/bin/distdoctor repro --backend nccl --nproc 2 --timeout 120 --json
# The two-rank run on one GPU: NCCL refuses two ranks per device; keep its raw output as well.
step torchrun-nccl-2rank 180 env NCCL_DEBUG=INFO NCCL_TOPO_DUMP_FILE="$OUT/nccl-topo.xml" \
  .venv/bin/python -m torch.distributed.run --nproc-per-node 2 tests/gpu/nccl_same_device.py
ls -la "$OUT"
