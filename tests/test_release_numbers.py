"""How a release string becomes numbers (deployment/launch.py), including what is no release at all."""

from __future__ import annotations

from kvplan.deployment.launch import release_tuple, version_tuple


def test_releases_read_to_their_patch():
    assert release_tuple("v0.5.4") == (0, 5, 4)
    assert release_tuple("0.5.10.post1") == (0, 5, 10)
    assert release_tuple("0.19.0rc1") == (0, 19, 0)
    assert version_tuple("v0.33.0") == (0, 33)


def test_a_number_of_thousands_of_digits_is_no_release():
    # found by tests/test_explain_fuzz.py: a log's "(v999...90.19.0)" made int() raise past Python's 4,300-digit limit
    huge = "9" * 5000 + "0.19.0"
    assert version_tuple(huge) is None and release_tuple(huge) is None
    assert release_tuple("1" * 10 + ".1") is None


def test_a_rank_tag_of_thousands_of_digits_is_no_rank():
    # the same limit in explain's process prefixes (explain/inferred.py): Worker_TP<5,000 digits> is no TP rank
    from kvplan.explain import read_log

    run = read_log("(Worker_TP" + "9" * 5000 + " pid=1) INFO 04-22 01:42:43 [gpu_worker.py:1] Available KV cache "
                   "memory: 10.5 GiB\n(Worker_TP1 pid=2) INFO 04-22 01:42:43 [gpu_worker.py:1] x\n")
    assert run.flag("tensor_parallel_size") == 2
