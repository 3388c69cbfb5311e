"""fields.toml (the fields `fleet compare` compares) loads, is validated, and names real causes."""
from __future__ import annotations

import pytest

from distdoctor.knowledge import load_knowledge
from distdoctor.probes.fleet.fields import FIELDS, cause_of, parse
from distdoctor.probes.fleet.schema import MAY_DIFFER, REQUIRED_FIELDS, SUMMARY_FIELDS


def test_every_cause_a_field_names_is_in_the_knowledge_base() -> None:
    kb = load_knowledge(use_env=False)
    named = {f.cause for f in FIELDS if f.cause}
    assert named and named <= set(kb.causes), named - set(kb.causes)


def test_the_schema_and_compare_read_the_declared_fields() -> None:
    assert SUMMARY_FIELDS[:3] == ("python", "torch", "torch_git") and SUMMARY_FIELDS[-1] == "hardware"
    assert set(MAY_DIFFER) == {"glibc", "kernel", "nccl_files"}
    assert "shm_bytes" in REQUIRED_FIELDS and "python" not in REQUIRED_FIELDS
    assert (cause_of("shm_bytes"), cause_of("gpu_model"), cause_of("switch:NCCL_X")) == \
        ("shm-insufficient", None, None)


@pytest.mark.parametrize("text,why", [
    ('[[field]]\nid = "x"\n', "label must be a non-empty string"),
    ('[[field]]\nid = "x"\nlabel = "X"\ncolour = "red"\n', "unknown key(s) colour"),
    ('[[field]]\nid = "x"\nlabel = "X"\ntype = "float"\n', "type must be one of"),
    ('[[field]]\nid = "x"\nlabel = "X"\nrequired = "yes"\n', "required must be a bool"),
    ('[[field]]\nid = "x"\nlabel = "X"\n[[field]]\nid = "x"\nlabel = "Y"\n', "id appears twice"),
    ("", "no [[field]] entries"),
])
def test_a_malformed_entry_is_named(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        parse(text)
