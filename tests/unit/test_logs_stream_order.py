"""Stream order in one console (issue 21): torchrun interleaves each rank's stdout and stderr, so a
rank's buffered step lines can land after its own traceback. The rank's last traceback before the
launcher's record of its non-zero exit is what ended it; without that record, later progress still
means the exception was handled. Written from the formats (torchrun's `[defaultN]:` tee prefix,
torch's `[rankN]:` traceback prefix, torchelastic's `failed (exitcode: N) local_rank: N` record)."""
from __future__ import annotations

from distdoctor.knowledge import load_knowledge
from distdoctor.knowledge.logs import analyse_text

KB = load_knowledge(use_env=False)

HEAD = """[default0]:epoch 0 step 1/6 loss 0.70
[default1]:epoch 0 step 1/6 loss 0.71
[default1]:[rank1]: Traceback (most recent call last):
[default1]:[rank1]:   File "/job/train.py", line 80, in <module>
[default1]:[rank1]:     main()
[default1]:[rank1]:   File "/job/train.py", line 61, in main
[default1]:[rank1]:     batch = next(loader)
[default1]:[rank1]: OSError: [Errno 5] Input/output error: '/data/shard-0007.bin'
[default1]:epoch 0 step 2/6 loss 0.69
[default0]:[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4021
"""
EXIT = ("E0101 10:00:05.000000 900 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) "
        "local_rank: 1 (pid: 902) of binary: /usr/bin/python3\n")


def test_the_last_traceback_before_a_non_zero_exit_record_ended_the_rank() -> None:
    rep = analyse_text(HEAD + EXIT, KB, symptom="error")
    assert rep.culprit is not None and rep.culprit["ranks"] == ["1"] and rep.culprit["role"] == "crashed"
    assert rep.timeline["1"]["end"]["kind"] == "crashed"
    assert rep.first_failure is not None and "Input/output error" in rep.first_failure.text


def test_without_the_exit_record_later_progress_means_it_was_handled() -> None:
    rep = analyse_text(HEAD, KB, symptom="error")
    assert rep.timeline["1"]["end"]["kind"] != "crashed"


def test_a_later_traceback_of_the_same_rank_is_the_terminal_one() -> None:
    later = ("[default1]:[rank1]: Traceback (most recent call last):\n"
             "[default1]:[rank1]:   File \"/job/train.py\", line 90, in <module>\n"
             "[default1]:[rank1]: ValueError: loss is nan at step 2\n")
    rep = analyse_text(HEAD + later + EXIT, KB, symptom="error")
    assert rep.timeline["1"]["end"]["kind"] == "crashed"
    assert "ValueError" in rep.timeline["1"]["end"]["detail"]
