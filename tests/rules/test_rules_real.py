"""The rules on real releases: flashinfer-python 0.6.0, where 12.x lost allreduce fusion."""

from __future__ import annotations

import re

import pytest

from auditor import cli
from auditor.pipeline import Options, audit
from tests.conftest import wheel

pytestmark = pytest.mark.slow

ALLREDUCE = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
PDL = {"cudaGridDependencySynchronize", "cudaTriggerProgrammaticLaunchCompletion"}


@pytest.fixture(scope="module")
def flashinfer_060():
    return audit([str(wheel("flashinfer-python==0.6.0"))], Options(jobs=2))


def test_the_allreduce_pdl_guards_are_one_upper_bound_finding(flashinfer_060):
    result = flashinfer_060
    guards = [
        g
        for g in result.gates
        if g.file == ALLREDUCE
        and g.expression == "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200))"
    ]
    assert len(guards) == 13
    # one condition written out at 13 kernels of one header: one finding listing the others
    (upper,) = [f for f in result.findings if f.file == ALLREDUCE and f.rule == "ARCH001"]
    assert {(f, line) for f, line in upper.also} | {(upper.file, upper.line)} == {(g.file, g.line) for g in guards}
    assert upper.severity == "high" and upper.classification == "conservative"
    named = set(re.findall(r"`(\w+)` \(12\.0: yes, 12\.1: yes\)", upper.message))
    first = next(g for g in guards if g.line == upper.line)
    assert named & PDL and named >= {f.token for f in first.features} & PDL, upper.message
    assert "the same condition; also at" in upper.message


def test_comm_jit_allow_list_finding(flashinfer_060):
    (f,) = [f for f in flashinfer_060.findings if f.file == "flashinfer/jit/comm.py" and f.rule == "ARCH002"]
    assert f.line == 60 and f.severity == "high"
    assert "supported_major_versions=[9, 10]" in f.message and "but not 12.0, 12.1" in f.message


def test_explain_in_the_wheel(capsys):
    spec = f"{wheel('flashinfer-python==0.6.0')}::{ALLREDUCE}:417"
    assert cli.main(["explain", spec, "--include", "flashinfer/data/include/**"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{ALLREDUCE}:417  preprocessor (cuda)")
    assert "    cudaGridDependencySynchronize  line 418  PDL device API; needs sm_90; 12.0: yes  12.1: yes" in out
    assert "  classification: conservative" in out
    assert any(ln.startswith("    [high] ARCH001: ") for ln in out)


def test_sglang_allreduce_fusion_allow_list_is_listed_with_its_reason():
    """sglang 0.5.15 enables FlashInfer's allreduce fusion on ``is_sm90_supported() or
    is_sm100_supported()``; the check that refuses the same fusion gives the reason, and the
    flashinfer it pins builds those kernels for majors 9 and 10 only: listed with that reason
    (ARCH013), every site folded into it, not a high allow-list that forgot 12.x."""
    result = audit([str(wheel("sglang==0.5.15"))], Options(jobs=2))
    (f,) = [f for f in result.findings if f.file == "sglang/srt/arg_groups/overrides.py" and f.line == 1386]
    assert f.rule == "ARCH013" and f.severity == "info"
    assert '"FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.' in f.message
    assert {("sglang/srt/layers/communicator.py", 170), ("sglang/srt/layers/flashinfer_comm_fusion.py", 49)} <= set(
        f.also
    )
    assert not [f for f in result.findings if f.file == "sglang/srt/layers/communicator.py"]


def test_flashinfer_072_speed_choices_and_a_minor_trap():
    """flashinfer 0.7.2.post1: schedules for one model shape on 12.0 and launch flags chosen by
    measurement are speed choices (low), a check that names only 12.0 in front of a kernel
    compiled at run time for the device stays a minor-version trap (high), and one in front of
    kernels built for sm_120a agrees with the build (info)."""
    result = audit([str(wheel("flashinfer-python==0.7.2.post1"))], Options(jobs=2))
    by_site = {(f.file, f.line): f for f in result.findings}
    planner = by_site[("flashinfer/experimental/b12x/attention/paged/planner.py", 272)]
    assert (planner.rule, planner.severity) == (
        "ARCH014",
        "low",
    ) and "for one problem shape: num_q_heads" in planner.message
    flag = by_site[("flashinfer/cake_sampling.py", 1042)]
    assert (flag.rule, flag.severity) == ("ARCH014", "low") and 'measured: "' in flag.message
    trap = by_site[("flashinfer/attention/cute_dsl/sm120_fmha.py", 82)]
    assert (trap.rule, trap.severity) == ("ARCH003", "high")
    # A check helper whose callers run a JIT module built with sm120a_nvcc_flags, two calls up.
    pinned = by_site[("flashinfer/diffusion_ops/cake_minimax_h3_sm120_quant_gate.py", 24)]
    assert (pinned.rule, pinned.severity) == ("ARCH015", "info") and "sm_120a only" in pinned.message
