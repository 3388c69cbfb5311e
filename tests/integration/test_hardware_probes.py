"""The hardware probes (issue 26) on their own: parsers, the Xid classes, live commands through
an injected runner, and the counters sampled twice. Recorded nodes: test_hardware_recorded.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from runnerkit import RecordedRunner

from distdoctor.probes.base import ProbeContext
from distdoctor.probes.hardware import (
    probe_gpu_health,
    probe_infiniband,
    probe_kernel,
    probe_limits,
    probe_pcie,
)
from distdoctor.probes.hardware.kernel import parse
from distdoctor.probes.hardware.nvsmi import parse_query
from distdoctor.probes.hardware.source import Text, bus_id
from distdoctor.probes.hardware.xid import APPLICATION, HARDWARE, XIDS, classify
from distdoctor.probes.offline import OfflineRunner
from distdoctor.probes.recorded import recorded_host

HERE = Path(__file__).parents[1] / "fixtures" / "hardware"


def test_application_xids_are_never_hardware() -> None:
    for code in (13, 31, 43, 45, 68, 69):
        assert classify(code)[0] == APPLICATION, code
    for code in (48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert classify(code)[0] == HARDWARE, code
    assert classify(99999)[0] not in (HARDWARE, APPLICATION)  # unknown numbers are "other"
    assert {c for c, (cat, _) in XIDS.items() if cat == HARDWARE}.isdisjoint({13, 31, 43})


@pytest.mark.parametrize("raw, want", [("00000000:10:1C.0", "0000:10:1c.0"), ("PCI:0000:10:1c", "0000:10:1c.0"),
                                       ("0000:9b:00", "0000:9b:00.0"), ("3b:00.0", "0000:3b:00.0")])
def test_bus_ids_have_one_spelling(raw: str, want: str) -> None:
    assert bus_id(raw) == want


def test_one_event_in_dmesg_and_the_journal_counts_once() -> None:
    line = "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    facts = parse([Text(f"[ 8812.334110] {line}\n", "dmesg"),
                   Text(f"Mar  3 10:14:02 gpu17 kernel: [ 8812.334110] {line}\n", "var/log/kern.log")])
    assert [(x["code"], x["bus"], x["count"]) for x in facts["xids"]] == [(79, "0000:3b:00.0", 1)]
    assert facts["fallen_off_bus"] == ["0000:3b:00.0"]


def test_application_xid_lines_are_kept_apart() -> None:
    text = (HERE / "kernel-application-xids/root/var/log/kern.log").read_text()
    facts = parse([Text(text, "kern.log")])
    assert facts["xid_hardware"] == [] and len(facts["xid_application"]) == 3
    assert facts["sxid_fatal"] == [] and facts["sxid_nonfatal_count"] == 1
    assert facts["aer_uncorrected"] == [] and facts["aer_corrected_count"] == 2


def test_kernel_probe_runs_dmesg_live_through_the_runner(tmp_path: Path) -> None:
    runner = RecordedRunner({("dmesg",): "[  1.0] NVRM: Xid (PCI:0000:07:00): 48, pid=1, DBE (0x1) (0x2)\n"})
    result = probe_kernel(ProbeContext(runner=runner, root=tmp_path))
    assert result.status == "ok" and result.facts["sources"] == ["dmesg"]
    assert result.facts["xid_hardware"] == ["Xid 48 (double-bit ECC error) on 0000:07:00.0 x1"]


def test_kernel_probe_without_a_log_says_why(tmp_path: Path) -> None:
    live = probe_kernel(ProbeContext(runner=RecordedRunner({}), root=tmp_path))
    assert live.status == "unavailable" and "dmesg: command not found" in live.reason
    recorded = probe_kernel(ProbeContext(runner=OfflineRunner(), root=tmp_path))
    assert recorded.status == "unavailable" and recorded.reason.startswith("not in this recorded node")


OLD_ECC = """GPU 00000000:00:1E.0
    Product Name                          : Tesla V100-SXM2-16GB
    ECC Errors
        Volatile
            Single Bit
                Device Memory             : 0
                Total                     : 3
            Double Bit
                Device Memory             : 2
                Register File             : 0
                Total                     : 2
        Aggregate
            Single Bit
                Total                     : 3
            Double Bit
                Total                     : 2
    Retired Pages
        Single Bit ECC                    : 0
        Double Bit ECC                    : 1
        Pending Page Blacklist            : Yes
"""


def test_older_drivers_ecc_layout_is_read() -> None:
    _, gpus = parse_query(OLD_ECC)
    gpu = gpus[0]
    assert gpu["bus"] == "0000:00:1e.0" and gpu["ecc_volatile_uncorrectable"] == 2
    assert gpu["ecc_volatile_correctable"] == 3 and gpu["retired_pending"] is True


def test_gpu_probe_runs_nvidia_smi_live_through_the_runner(tmp_path: Path) -> None:
    runner = RecordedRunner({("nvidia-smi", "-q"): OLD_ECC})
    result = probe_gpu_health(ProbeContext(runner=runner, root=tmp_path))
    assert result.facts["ecc_volatile_uncorrectable"] == ["0000:00:1e.0 (Tesla V100-SXM2-16GB): 2"]
    assert result.facts["retired_pages_pending"] == ["0000:00:1e.0 (Tesla V100-SXM2-16GB)"]
    assert ("nvidia-smi", "nvlink", "-s") in runner.calls
    missing = probe_gpu_health(ProbeContext(runner=RecordedRunner({}), root=tmp_path))
    assert missing.status == "unavailable" and "nvidia-smi: command not found" in missing.reason


def test_idle_gen1_is_power_saving_and_width_is_what_counts() -> None:
    ctx = ProbeContext(runner=OfflineRunner(), root=HERE / "gpu-idle-gen1/root")
    facts = probe_gpu_health(ctx).facts
    assert facts["gpus"][0]["pcie_gen_current"] == 1 and facts["gpus"][0]["idle"] is True
    assert facts["pcie_gen_degraded_busy"] == [] and facts["pcie_width_degraded"] == []
    busy = probe_gpu_health(ProbeContext(runner=OfflineRunner(), root=HERE / "gpu-link-x8-busy/root")).facts
    assert busy["pcie_width_degraded"] == ["0000:3b:00.0 (NVIDIA A100-SXM4-80GB): x8 of x16"]
    assert busy["nvlink_inactive"] == ["GPU 0 (NVIDIA A100-SXM4-80GB): links 2 inactive, 3 active"]
    assert busy["nvlink_errors"] == ["GPU 0: crc_errors=340, recovery_errors=1, replay_errors=12"]


def test_acs_counts_only_on_bridges_above_a_gpu() -> None:
    bad = probe_pcie(ProbeContext(runner=OfflineRunner(), root=HERE / "pcie-acs-redirect/root")).facts
    assert [a.split(" ")[0] for a in bad["acs_redirect_gpu_path"]] == ["0000:03:08.0", "0000:03:10.0"]
    assert bad["iommu_mode"] == "translated" and bad["iommu_params"] == ["intel_iommu=on"]
    good = probe_pcie(ProbeContext(runner=OfflineRunner(), root=HERE / "pcie-acs-off/root")).facts
    assert good["acs_redirect_gpu_path"] == [] and good["iommu_mode"] == "passthrough"
    # a GPU whose speed reads "(downgraded)" on a Gen3 switch is not a width fault
    assert good["gpu_link_width_degraded"] == []


def test_lspci_live_through_the_runner(tmp_path: Path) -> None:
    text = (HERE / "pcie-gpu-link-x8/root/sos_commands/pci/lspci_-nnvv").read_text()
    facts = probe_pcie(ProbeContext(runner=RecordedRunner({("lspci", "-vvv"): text}), root=tmp_path)).facts
    assert facts["gpu_link_width_degraded"] == ["0000:05:00.0: x8 of x16"] and facts["source"] == "lspci -vvv"


def test_ib_counters_are_sampled_twice_live(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(HERE / "ib-port-active/root", tmp_path / "root")
    counter = tmp_path / "root/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"

    def sleep(_: float) -> None:  # the link drops symbols while we wait
        counter.write_text("37\n")

    result = probe_infiniband(ProbeContext(runner=RecordedRunner({}), root=tmp_path / "root"), sleep=sleep)
    assert result.facts["counters_sampled_twice"] is True
    assert result.facts["error_counters_rising"] == ["mlx5_0/1: symbol_error +37"]
    recorded = probe_infiniband(ProbeContext(runner=OfflineRunner(), root=HERE / "ib-port-active/root"),
                                sleep=lambda _: pytest.fail("a recording is read once"))
    assert recorded.facts["counters_sampled_twice"] is False and recorded.facts["ib_ports_not_active"] == []


def test_ibstat_and_perfquery_from_a_sos_report() -> None:
    facts = probe_infiniband(ProbeContext(runner=OfflineRunner(), root=HERE / "ib-sos-ibstat/root")).facts
    assert facts["source"] == "sos_commands/infiniband/ibstat"
    assert facts["ports"][0]["counters"]["symbol_error"] == 1204 and facts["ports"][1]["counters"] == {}
    assert facts["ib_ports_not_active"] == ["mlx5_1/1: Initializing (LinkUp)"]
    assert facts["error_counters_nonzero"] == ["mlx5_0/1: link_error_recovery=3, port_rcv_errors=57, symbol_error=1204"]


def test_memlock_and_removeipc() -> None:
    small = probe_limits(ProbeContext(runner=OfflineRunner(), root=HERE / "ib-port-polling/root")).facts
    assert small["memlock_soft_bytes"] == 65536 and small["rdma_memlock_bytes"] == 65536
    unlimited = probe_limits(ProbeContext(runner=OfflineRunner(), root=HERE / "ib-port-active/root")).facts
    assert unlimited["memlock_unlimited"] is True and unlimited["rdma_memlock_bytes"] is None
    rhel = probe_limits(ProbeContext(runner=OfflineRunner(), root=HERE / "logind-removeipc-no/root")).facts
    assert rhel["remove_ipc"] is False
    dropin = probe_limits(ProbeContext(runner=OfflineRunner(), root=HERE / "logind-removeipc-dropin/root")).facts
    assert dropin["remove_ipc"] is True and dropin["remove_ipc_source"].endswith("50-site.conf")


def test_the_recorded_node_names_its_host(tmp_path: Path) -> None:
    (tmp_path / "sosreport-gpu17-2026-03-03-abcdef").mkdir()
    assert recorded_host(tmp_path / "sosreport-gpu17-2026-03-03-abcdef") == "gpu17"
    (tmp_path / "n" / "etc").mkdir(parents=True)
    (tmp_path / "n" / "etc" / "hostname").write_text("node-042\n")
    assert recorded_host(tmp_path / "n") == "node-042"
    (tmp_path / "case" / "root").mkdir(parents=True)
    assert recorded_host(tmp_path / "case" / "root") == "case"


def test_probes_import_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, distdoctor.probes.registry, distdoctor.probes.recorded; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_roce_v2_gid_index_for_nccl(tmp_path: Path) -> None:
    port = tmp_path / "sys/class/infiniband/mlx5_1/ports/1"
    for rel, text in {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "100 Gb/sec (4X EDR)",
                      "link_layer": "Ethernet", "gids/0": "fe80:0000:0000:0000:0a42:a1ff:fe3c:1a2b",
                      "gid_attrs/types/0": "IB/RoCE v1", "gids/1": "fe80:0000:0000:0000:0a42:a1ff:fe3c:1a2b",
                      "gid_attrs/types/1": "RoCE v2", "gids/2": "0000:0000:0000:0000:0000:ffff:0a00:0011",
                      "gid_attrs/types/2": "IB/RoCE v1", "gids/3": "0000:0000:0000:0000:0000:ffff:0a00:0011",
                      "gid_attrs/types/3": "RoCE v2"}.items():
        (port / rel).parent.mkdir(parents=True, exist_ok=True)
        (port / rel).write_text(text + "\n")
    facts = probe_infiniband(ProbeContext(runner=OfflineRunner(), root=tmp_path)).facts
    assert facts["roce_v2_ipv4_gid_index"] == 3 and len(facts["roce_v2_gids"]) == 2
    assert facts["ib_ports_not_active"] == []  # an Ethernet port is not judged as an IB one


def test_xid_times_for_the_diagnosis() -> None:
    from distdoctor.probes.hardware.kernel import when

    assert when("Wed Mar  1 17:38:33 2023") == {"time": "2023-03-01T17:38:33"}
    assert when(" 8812.334110") == {"uptime_s": 8812.33411}
    assert when("Mar  3 10:14:02 gpu17 kernel:") == {}  # syslog has no year: no time is made up


def test_this_boots_log_wins_over_syslog_files(tmp_path: Path) -> None:
    """kern.log keeps earlier boots: an Xid 79 repaired weeks ago must not flag the node when
    this boot's dmesg is there (and is clean)."""
    shutil_tree = tmp_path / "root"
    (shutil_tree / "sos_commands/kernel").mkdir(parents=True)
    (shutil_tree / "sos_commands/kernel/dmesg").write_text("[    0.000000] Linux version 5.15.0\n")
    (shutil_tree / "var/log").mkdir(parents=True)
    (shutil_tree / "var/log/kern.log").write_text(
        (HERE / "kernel-xid79-off-bus/root/var/log/kern.log").read_text())
    facts = probe_kernel(ProbeContext(runner=OfflineRunner(), root=shutil_tree)).facts
    assert facts["sources"] == ["sos_commands/kernel/dmesg"] and facts["xid_hardware"] == []
    assert facts["earlier_boots_possible"] is False
    (shutil_tree / "sos_commands/kernel/dmesg").unlink()
    facts = probe_kernel(ProbeContext(runner=OfflineRunner(), root=shutil_tree)).facts
    assert facts["sources"] == ["var/log/kern.log"] and facts["earlier_boots_possible"] is True
    assert facts["xid_hardware"]


def test_numa_of_gpus_and_rdma_nics(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(HERE / "pcie-acs-off/root", tmp_path / "root")
    for slot, node in (("0000:04:00.0", "0"), ("0000:05:00.0", "1")):
        (tmp_path / f"root/sys/bus/pci/devices/{slot}").mkdir(parents=True)
        (tmp_path / f"root/sys/bus/pci/devices/{slot}/numa_node").write_text(node + "\n")
    facts = probe_pcie(ProbeContext(runner=OfflineRunner(), root=tmp_path / "root")).facts
    assert facts["gpu_numa"] == {"0000:04:00.0": 0, "0000:05:00.0": 1} and facts["rdma_nics"] == []


def test_on_this_machine_every_probe_ends_in_a_word() -> None:
    """Live, whatever this host has (no GPU, no lspci, dmesg restricted): facts or a reason."""
    for probe in (probe_kernel, probe_gpu_health, probe_pcie, probe_infiniband, probe_limits):
        result = probe(ProbeContext(timeout=10.0))
        assert result.status in ("ok", "unavailable"), (result.name, result.reason)
        assert result.status == "ok" or result.reason, result.name


def test_parsers_survive_cut_and_mangled_text() -> None:
    """sos captures get cut, pasted with tabs turned to spaces, or hold binary junk: the parsers
    must return what they can, never raise."""
    import random

    from distdoctor.probes.hardware.infiniband import parse_ibstat, parse_perfquery
    from distdoctor.probes.hardware.lspci import parse as parse_lspci
    from distdoctor.probes.hardware.nvsmi import parse_nvlink_errors, parse_nvlink_status

    shared = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "hardware"
    files = [*HERE.rglob("*"), *(shared.rglob("*") if shared.is_dir() else ())]
    texts = [p.read_text(errors="replace") for p in files if p.is_file() and p.suffix not in (".json", ".md")]
    rng = random.Random(26)
    junk = ["", " : ", "GPU ", "GPU 0000:zz:00.0", "\t\tLnkSta:\tSpeed GT/s", "NVRM: Xid (PCI:): x,",
            "Bus: primary=zz, secondary=, subordinate=", "\x00\x01\xff", "    " * 40 + "Pending : Yes",
            "Port 1:", "CA '", "SymbolErrorCounter:....", "Link 0: <inactive>"]
    for _ in range(300):
        lines = rng.choice(texts).splitlines()
        cut = lines[rng.randrange(len(lines) + 1):] if lines and rng.random() < 0.5 else lines
        mangled = [rng.choice(junk) if rng.random() < 0.1 else line.replace("\t", " " * rng.randrange(1, 5))
                   for line in cut]
        text = "\n".join(mangled)
        parse([Text(text, "x")])
        parse_query(text)
        parse_lspci(text)
        parse_ibstat(text)
        parse_perfquery(text)
        parse_nvlink_status(text)
        parse_nvlink_errors(text)


def test_rising_counters_are_one_finding_not_two(tmp_path: Path) -> None:
    import shutil

    from distdoctor.knowledge import load_knowledge
    from distdoctor.knowledge.evaluate import evaluate

    shutil.copytree(HERE / "ib-port-polling/root", tmp_path / "root")
    counter = tmp_path / "root/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"
    result = probe_infiniband(ProbeContext(runner=RecordedRunner({}), root=tmp_path / "root"),
                              sleep=lambda _: counter.write_text("5000\n"))
    found = {f.check: f.status for f in evaluate(load_knowledge(use_env=False), {"infiniband": result})}
    assert found["ib-errors-rising"] == "fail" and found["ib-error-counters"] == "ok"


def test_a_lost_gpu_is_evidence_not_a_failed_command(tmp_path: Path) -> None:
    """nvidia-smi exits non-zero when a GPU fell off the bus; what it printed names the GPU."""
    from distdoctor.probes.runner import CommandResult

    lost = "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\n"
    runner = RecordedRunner({("nvidia-smi", "-q"): CommandResult(("nvidia-smi", "-q"), 15, lost, "", 0.1)})
    result = probe_gpu_health(ProbeContext(runner=runner, root=tmp_path))
    assert result.status == "ok" and result.facts["gpus_lost"] == ["0000:3b:00.0: Unknown Error"]
    none = RecordedRunner({("nvidia-smi", "-q"): CommandResult(("nvidia-smi", "-q"), 6, "No devices were found\n",
                                                               "", 0.1)})
    result = probe_gpu_health(ProbeContext(runner=none, root=tmp_path))
    assert result.status == "unavailable" and result.reason.endswith("nvidia-smi -q: No devices were found")
