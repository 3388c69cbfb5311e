"""What to set, derived from the P2P and NVLink support and the link codes; every item carries a command to paste.
The prose is in the output's language (knowledge/i18n.py: English is the catalogue key, the
commands are placeholders filled in unchanged)."""
from __future__ import annotations

import re
from typing import Any

import networkx as nx

from distdoctor.knowledge.i18n import t

from .model import P2P_BAD, P2P_GOOD, P2P_MEANING, is_nvlink, link_rank, p2p_level

ASK_P2P = "nvidia-smi topo -p2p r > p2p.txt && distdoctor topo --input p2p.txt"
ACS_CHECK = "sudo lspci -vvv | grep -i acsctl"
RDMA_NAME = re.compile(r"^(mlx\d|bnxt|irdma|efa|erdma|qedr|hfi|rdma|ib)", re.I)


def item(text: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {"text": text, "env": env or {}}


def join(names: list[str], limit: int = 6) -> str:
    return t(", ").join(names[:limit]) + (t(" and {n} more", n=len(names) - limit) if len(names) > limit else "")


def pair_names(pairs: list[dict], facts: dict | None = None) -> str:
    if facts is not None and len(pairs) == len(facts["pairs"]) > 2:
        return t("all {n} GPU pairs", n=len(pairs))
    return join([f"{p['a']}-{p['b']}" for p in pairs])


def visible(gpus: list[str], facts: dict) -> str | None:
    """CUDA_VISIBLE_DEVICES for these GPU ids, when every one has a device number."""
    index = {g["id"]: g["index"] for g in facts["gpus"]}
    if any(index.get(g) is None for g in gpus):
        return None
    return ",".join(str(index[g]) for g in gpus)


def make_advice(facts: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pairs = facts["pairs"]
    support = facts["p2p"]
    if support == "none":
        out.append(no_p2p(facts, pairs))
    elif support == "partial":
        out += partial_p2p(facts, pairs)
    out += unknown_p2p(facts, pairs)
    if support == "unknown" and not pairs and sum(g["seen"] for g in facts["gpus"]) > 1:
        out.append(item(t("This input names the GPUs but no pair's link or transport. Ask the driver how "
                          "they connect and whether P2P works, on the GPU node:")
                        + f"\n  nvidia-smi topo -m > topo.txt && distdoctor topo --input topo.txt\n  {ASK_P2P}"))
    out += nvlink_broken(pairs)
    out += nic_warnings(facts)
    out += cross_socket(facts, pairs)
    return out


def explain(pairs: list[dict]) -> str:
    parts = []
    for p in pairs[:4]:
        meaning = t(P2P_MEANING.get(p["p2p"], p["p2p"]))
        link = f" {p['link']}" if p.get("link") else ""
        parts.append(f"{p['a']}-{p['b']}{link}: {meaning}")
    return t("; ").join(parts) + (t("; ...") if len(pairs) > 4 else "")


def no_p2p(facts: dict, pairs: list[dict]) -> dict[str, Any]:
    from_log = all(p["p2p"] == "unused" for p in pairs)
    codes = sorted({p.get("link") for p in pairs if p.get("link")}, key=link_rank)
    how = (t("the GPUs meet only through {codes} ", codes="/".join(codes)) if codes else "") \
        + t("({why})", why=explain(pairs))
    if from_log:
        lead = t("The NCCL log shows SHM (host memory) where P2P would be used: P2P is not in use "
                 "between these GPUs ({why}). If the job hangs without NCCL_P2P_DISABLE=1 "
                 "and runs with it, make it this hardware's default:", why=explain(pairs))
    else:
        lead = t("No GPU pair has a usable peer-to-peer path: {how}. NCCL turns P2P off by itself where "
                 "the driver says not OK; make that explicit as this hardware's default, so a patched "
                 "driver or a changed BIOS cannot bring back hangs (always safe, only slower: traffic "
                 "goes through host shared memory):", how=how)
    return item(f"{lead}\n  export NCCL_P2P_DISABLE=1\n{t('or for every job on this machine:')}\n"
                "  echo NCCL_P2P_DISABLE=1 | sudo tee -a /etc/nccl.conf\n"
                + t("If the driver says OK on other boxes of this model but jobs hang, check ACS: {command} "
                    "(SrcValid+ means ACS is on); disable ACS/VT-d in the BIOS or boot with iommu=pt.",
                    command=ACS_CHECK),
                {"NCCL_P2P_DISABLE": "1"})


def groups(facts: dict, pairs: list[dict]) -> list[list[str]]:
    """Largest sets of GPUs in which every pair has P2P."""
    g = nx.Graph()
    g.add_nodes_from(gpu["id"] for gpu in facts["gpus"] if gpu["seen"])
    g.add_edges_from((p["a"], p["b"]) for p in pairs if p["p2p"] in P2P_GOOD)
    order = {gpu["id"]: i for i, gpu in enumerate(facts["gpus"])}
    cliques = [sorted(c, key=order.get) for c in nx.find_cliques(g) if len(c) > 1]
    return sorted(cliques, key=lambda c: (-len(c), order[c[0]]))


def partial_p2p(facts: dict, pairs: list[dict]) -> list[dict[str, Any]]:
    bad = [p for p in pairs if p["p2p"] in P2P_BAD]
    good = [p for p in pairs if p["p2p"] in P2P_GOOD]
    out = []
    best = groups(facts, pairs)
    if best:
        devices = visible(best[0], facts)
        names = ", ".join(best[0])
        text = t("P2P works only between some GPUs ({good} pairs yes, {bad} no: {why}). GPUs {names} all "
                 "reach each other; run a job on such a group:", good=len(good), bad=len(bad), why=explain(bad),
                 names=names)
        if devices:
            text += f"\n  CUDA_VISIBLE_DEVICES={devices} torchrun --nproc-per-node {len(best[0])} train.py"
        others = [", ".join(c) for c in best[1:4]]
        if others:
            text += "\n" + t("Other groups that work together: {groups}.", groups="; ".join(others))
        out.append(item(text, {"CUDA_VISIBLE_DEVICES": devices} if devices else {}))
    good_codes = [p["link"] for p in good if p.get("link")]
    bad_codes = [p["link"] for p in bad if p.get("link")]
    if good_codes and bad_codes:
        worst_good = max(good_codes, key=link_rank)
        best_bad = min(bad_codes, key=link_rank)
        if link_rank(worst_good) < link_rank(best_bad):
            level = p2p_level(worst_good)
            out.append(item(t("Every working pair is at {good} or closer and every failing one at {bad} or "
                              "further: limit P2P to the paths that work for jobs on all GPUs:", good=worst_good,
                              bad=best_bad)
                            + f"\n  export NCCL_P2P_LEVEL={level}", {"NCCL_P2P_LEVEL": level}))
            return out
        why = t("Working and failing pairs share the same link type, so no NCCL_P2P_LEVEL separates them; ")
    else:
        why = t("This input gives no link codes to choose an NCCL_P2P_LEVEL from; ")
    out.append(item(why + t("for jobs on all GPUs switch P2P off:") + "\n  export NCCL_P2P_DISABLE=1",
                    {"NCCL_P2P_DISABLE": "1"}))
    return out


def unknown_p2p(facts: dict, pairs: list[dict]) -> list[dict[str, Any]]:
    unknown = [p for p in pairs if p["p2p"] in ("unknown", "U")]
    if not unknown:
        return []
    codes = sorted({p.get("link") or "?" for p in unknown}, key=link_rank)
    out = [item(t("This input shows how {pairs} connect ({codes}) but not whether P2P works between them: "
                  "a link code never says, the GPU model and driver decide. Ask the driver on the GPU node:",
                  pairs=pair_names(unknown, facts), codes="/".join(codes)) + f"\n  {ASK_P2P}")]
    near = [p for p in unknown if p.get("link") in ("PIX", "PXB")]
    if near:
        out.append(item(t("{pairs} share a PCIe switch ({codes}): NCCL uses P2P there by default. If jobs on "
                          "these GPUs hang at init or at the first collective, ACS on the switch is the usual "
                          "cause: check it with {command}, and confirm with one run with P2P off:",
                          pairs=pair_names(near), codes="/".join(sorted({p["link"] for p in near})),
                          command=ACS_CHECK)
                        + "\n  NCCL_P2P_DISABLE=1 torchrun --nproc-per-node 2 train.py", {"NCCL_P2P_DISABLE": "1"}))
    far = [p for p in unknown if p.get("link") in ("PHB", "NODE", "SYS")]
    if far:
        amd = (facts.get("cpu_vendor") or "").lower().startswith("authenticamd") and len(facts["gpus"]) <= 2
        names = pair_names(far, facts)
        codes = "/".join(sorted({p["link"] for p in far}, key=link_rank))
        values = {"pairs": names[0].upper() + names[1:], "codes": codes}
        text = (t("{pairs} meet at {codes}, above NCCL's default P2P level on most CPUs (PXB since NCCL 2.23), "
                  "so NCCL normally uses SHM there. This is an AMD host with two GPUs NCCL raises the level and "
                  "tries P2P across root ports, where ACS makes it hang; if that happens:", **values) if amd else
                t("{pairs} meet at {codes}, above NCCL's default P2P level on most CPUs (PXB since NCCL 2.23), "
                  "so NCCL normally uses SHM there. On AMD hosts with two GPUs NCCL raises the level and tries "
                  "P2P across root ports, where ACS makes it hang; if that happens:", **values))
        out.append(item(text + "\n  export NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"} if amd else {}))
    return out


def nvlink_broken(pairs: list[dict]) -> list[dict[str, Any]]:
    broken = [p for p in pairs if p["p2p"] in P2P_BAD and is_nvlink(p.get("link"))]
    if not broken:
        return []
    return [item(t("{pairs} are NVLink-connected yet P2P is off ({why}): that is a hardware or driver fault, "
                   "not a setting. Check the links and the fabric manager:", pairs=pair_names(broken),
                   why=explain(broken))
                 + "\n  nvidia-smi nvlink --status && systemctl status nvidia-fabricmanager")]


def nic_warnings(facts: dict) -> list[dict[str, Any]]:
    out = []
    far = [g["id"] for g in facts["gpus"] if g["nic_link"] == "SYS"]
    if far:
        out.append(item(
            t("{gpus}: the nearest NIC is SYS (across the CPU interconnect). GPUDirect RDMA stays off "
              "for them by default (NCCL_NET_GDR_LEVEL defaults to PXB) and every inter-node byte crosses "
              "sockets; rail-optimised fabrics expect each GPU to have its NIC behind its own PCIe switch "
              "(PIX/PXB). See which NIC each rank takes and whether GDRDMA is used:", gpus=join(far)) + "\n"
            "  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET\n"
            "  torchrun --nproc-per-node 2 train.py 2>&1 | grep -E 'NET/|GDRDMA'"))
    closer = {n["id"] for n in facts["nics"] if n["gpu_link"] and n["gpu_link"] != "SYS"}
    lone = [n for n in facts["nics"] if n["gpu_link"] == "SYS" and closer and RDMA_NAME.match(n["name"])]
    if lone:
        names = ",".join(f"={n['name']}" for n in lone)
        nics = join([n["name"] for n in lone])
        text = (t("{nics} is SYS to every GPU (a management or bonded NIC?): if NCCL should not use it, leave "
                  "it out:", nics=nics) if len(lone) == 1 else
                t("{nics} are SYS to every GPU (a management or bonded NIC?): if NCCL should not use it, leave "
                  "it out:", nics=nics))
        out.append(item(text + f"\n  export NCCL_IB_HCA=^{names}", {"NCCL_IB_HCA": f"^{names}"}))
    return out


def cross_socket(facts: dict, pairs: list[dict]) -> list[dict[str, Any]]:
    groups_ = [g for g in facts["numa"] if g["gpus"] and (g["id"] is not None or g["cpus"])]
    if len(groups_) < 2:
        return []
    sys_pairs = [p for p in pairs if p.get("link") == "SYS" and "NVB" not in p["evidence"]]
    if not sys_pairs or all(p["p2p"] in P2P_BAD for p in sys_pairs) and facts["p2p"] == "partial":
        return []  # the P2P groups advice already keeps jobs on one side
    biggest = max(groups_, key=lambda g: len(g["gpus"]))
    if len(biggest["gpus"]) < 2:  # one GPU per socket: nothing to keep together
        biggest = {"id": None, "gpus": []}
    label = lambda g: f"NUMA{g['id']}" if g["id"] is not None else f"CPUs {g['cpus']}"  # noqa: E731
    layout = "; ".join(f"{label(g)}: {', '.join(g['gpus'])}" for g in groups_)
    devices = visible(biggest["gpus"], facts) if biggest["gpus"] else None
    text = t("The GPUs sit on {n} CPU sockets/NUMA nodes ({layout}), and {pairs} meet only through the CPU "
             "interconnect (SYS). A ring over all of them crosses sockets twice per step: slower, and the path "
             "where cross-socket P2P is least reliable. Keep a job inside one socket where you can, with its "
             "CPUs and memory bound to it:", n=len(groups_), layout=layout, pairs=pair_names(sys_pairs))
    if devices and biggest["id"] is not None:
        text += (f"\n  CUDA_VISIBLE_DEVICES={devices} numactl --cpunodebind={biggest['id']} "
                 f"--membind={biggest['id']} torchrun --nproc-per-node {len(biggest['gpus'])} train.py")
    elif devices:
        text += f"\n  CUDA_VISIBLE_DEVICES={devices} torchrun --nproc-per-node {len(biggest['gpus'])} train.py"
    return [item(text, {"CUDA_VISIBLE_DEVICES": devices} if devices else {})]
