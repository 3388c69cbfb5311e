"""A sos report still in its .tar.xz (issue 26): `check --root`, `fleet compare --recorded` read
it; only the files the probes read come out, as plain files inside a temporary folder."""
from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from distdoctor.probes.sosarchive import extracted
from distdoctor.tui.cli import main

HERE = Path(__file__).parents[1] / "fixtures" / "hardware"


def sos_archive(tmp_path: Path, case: str, name: str, hostile: bool = False) -> Path:
    """The case's tree packed as sos packs a report: one top folder, xz-compressed."""
    out = tmp_path / f"{name}.tar.xz"
    with tarfile.open(out, "w:xz") as tar:
        tar.add(HERE / case / "root", arcname=name)
        if hostile:
            for member_name, data in ((f"{name}/../escaped", b"x"), ("/abs-escaped", b"x"),
                                      (f"{name}/sos_commands/kernel/huge-unwanted", b"y" * 10)):
                info = tarfile.TarInfo(member_name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            link = tarfile.TarInfo(f"{name}/etc/hostname")
            link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
            tar.addfile(link)
    return out


def test_check_reads_the_archive_and_names_the_host_from_its_name(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    archive = sos_archive(tmp_path, "kernel-xid79-off-bus", "sosreport-gpu17-2026-03-03-abcdef", hostile=True)
    rc = main(["check", "--root", str(archive), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["host"] == "gpu17" and data["root"] == str(archive.resolve())
    assert "xid-hardware-error" in {f["check"] for f in data["findings"] if f["status"] == "fail"}
    assert not (tmp_path.parent / "escaped").exists() and not Path("/abs-escaped").exists()


def test_only_wanted_plain_files_come_out(tmp_path: Path) -> None:
    archive = sos_archive(tmp_path, "kernel-xid79-off-bus", "sosreport-gpu17-2026-03-03-abcdef", hostile=True)
    with extracted(archive) as root:
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())
        assert files == ["var/log/kern.log"]  # no link, no escape, nothing the probes do not read
        kept = root
    assert not kept.exists()  # removed afterwards


def test_fleet_compare_over_archives_and_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    for i, case in enumerate(("pcie-acs-off", "pcie-acs-off", "pcie-gpu-link-x8")):
        sos_archive(reports, case, f"sosreport-node{i}-2026-03-03-aaaa")
    (reports / "sosreport-broken-2026.tar.xz").write_bytes(b"not an archive")
    assert main(["fleet", "compare", "--recorded", str(reports), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert [(o["node"], o["field"]) for o in result["outliers"]] == [("node2", "hardware")]
    assert [s["file"].endswith("broken-2026.tar.xz") for s in result["skipped"]] == [True]


def test_a_broken_archive_is_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "sosreport-x.tar.xz"
    bad.write_bytes(b"\xfd7zXZ\x00 truncated")
    assert main(["check", "--root", str(bad)]) == 2
    assert "not a readable sos archive" in capsys.readouterr().err
