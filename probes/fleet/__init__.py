"""The fleet view: one snapshot per node, fan-out over srun/ssh/pdsh, and the odd node out."""
from __future__ import annotations

from .batch import SlurmError, fan_out_pdsh, fan_out_srun, pdsh_argv, split_pdsh, srun_argv
from .compare import compare, outlier_line
from .fanout import (
                     VIAS,
                     FanoutOptions,
                     HostResult,
                     collect_local,
                     fan_out_ssh,
                     parse_output,
                     ssh_argv,
                     write_results,
)
from .hosts import HostListError, expand_hosts, read_hostfile
from .load import load_snapshots
from .schema import SCHEMA_ID, SNAPSHOT_SCHEMA, validate, validate_snapshot
from .snapshot import SnapshotError, snapshot

__all__ = ["SCHEMA_ID", "SNAPSHOT_SCHEMA", "VIAS", "FanoutOptions", "HostListError", "HostResult",
           "SlurmError", "SnapshotError", "collect_local", "compare", "expand_hosts",
           "fan_out_pdsh", "fan_out_srun", "fan_out_ssh", "load_snapshots", "outlier_line",
           "parse_output", "pdsh_argv", "read_hostfile", "snapshot", "split_pdsh", "srun_argv",
           "ssh_argv", "validate", "validate_snapshot", "write_results"]
