"""--enable-multimodal-encoder-data-parallel by vLLM release, read in the wheels' vllm/engine/arg_utils.py: 0.11.0
and 0.12.0 still add the flag (EngineArgs.enable_multimodal_encoder_data_parallel, a deprecation warning pointing at
--mm-encoder-tp-mode data); 0.13.0 has no such flag. So it is accepted with a note up to 0.12 and refused from 0.13
(was refused for every release: its catalogue entry gave no release still_there could read).

SGLang's --enable-multimodal pasted into a vLLM command is a prefix of that flag alone. argparse's allow_abbrev
(vLLM keeps it on) would take it for the old flag only where the release still has it; 0.33.0 has no flag it
prefixes, so vLLM names it unrecognized, and kvplan refuses it as an unknown vLLM flag that is SGLang's (it said
the renamed flag was gone, pointing at --mm-encoder-tp-mode)."""

from __future__ import annotations

import pytest

from kvplan.deployment.launch import parse_command
from kvplan.errors import KvplanError

OLD = "--enable-multimodal-encoder-data-parallel"


@pytest.mark.parametrize("version", ["0.11.0", "0.12.0"])
def test_the_old_flag_is_taken_up_to_0_12(version):
    for typed in (OLD, "--enable-multimodal"):
        notes = parse_command(["vllm", "serve", "m", typed], version=version).notes
        assert any(note.startswith(f"{OLD} is deprecated or gone") for note in notes), typed


def test_the_old_flag_is_refused_from_0_13():
    with pytest.raises(KvplanError, match="this flag is gone from current vLLM"):
        parse_command(["vllm", "serve", "m", OLD], version="0.13.0")


def test_sglangs_enable_multimodal_is_an_unknown_vllm_flag_today():
    with pytest.raises(KvplanError) as error:
        parse_command(["vllm", "serve", "m", "--enable-multimodal"], version="0.33.0")
    assert "unknown vLLM flag" in str(error.value) and "(it is SGLang's: add --engine sglang)" in str(error.value)
    assert "gone" not in str(error.value)
    assert error.value.where == "--enable-multimodal"


# --enable-bf16x3-router-gemm by the wheels' arg_utils.py: absent in 0.25.0, added in 0.26.0 (0.27.0 has it too),
# absent in 0.33.0; its catalogue entry says last in 0.29. Before this it was refused at every release, 0.26 too.
@pytest.mark.parametrize(("version", "taken"), [("0.25.0", False), ("0.26.0", True), ("0.27.0", True),
                                                ("0.29.0", True), ("0.30.0", False), ("0.33.0", False)])
def test_a_flag_of_a_range_of_releases(version, taken):
    command = ["vllm", "serve", "m", "--enable-bf16x3-router-gemm"]
    if taken:
        notes = parse_command(command, version=version).notes
        assert any(note.startswith("--enable-bf16x3-router-gemm is deprecated or gone") for note in notes)
    else:
        with pytest.raises(KvplanError, match="this flag is gone from current vLLM"):
            parse_command(command, version=version)
