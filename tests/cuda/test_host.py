"""Host C++ capability checks: known answers written beside the code, and the real releases."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from auditor import arch
from auditor.cuda import host
from auditor.model import GateKind, Guards
from auditor.pipeline import Options, audit
from auditor.rules.decisions import decisions
from auditor.verdicts import allowed, verdicts
from tests.conftest import FIXTURES, wheel

HOST = FIXTURES / "cuda" / "host"
_EXPECT = re.compile(r"//\s*expect:\s*(.*?)\s*$")


def _expected(path: Path) -> dict[int, str]:
    """Line -> the expectation written on it (``9.0…12.1 reject by=name``)."""
    return {n: m.group(1) for n, line in enumerate(path.read_text().splitlines(), 1) if (m := _EXPECT.search(line))}


def _written(gate) -> str:
    """A gate as the fixtures write it: what it lets through, whether it rejects, how it was resolved."""
    parts = [arch.compact("device", allowed(gate))]
    if gate.guards == Guards.REJECT:
        parts.append("reject")
    if gate.resolved_by != "literal":
        parts.append(f"by={gate.resolved_by}")
    return " ".join(parts)


@pytest.fixture(scope="module")
def result():
    return audit([str(HOST)], Options(jobs=1))


@pytest.mark.parametrize("name", sorted(p.name for p in HOST.iterdir()))
def test_known_answers(result, name):
    """Every gate of the file is where an expectation says, and reads as it says; no other line is a gate."""
    found = {g.line: _written(g) for g in result.gates if g.file == name and g.kind == GateKind.RUNTIME_CHECK}
    assert found == _expected(HOST / name)


def test_messages_and_context(result):
    by_line = {g.line: g for g in result.gates if g.file == "checks.cu"}
    moe = by_line[54]
    assert moe.expression == "TVM_FFI_ICHECK_EQ(major, 10)"
    assert moe.context == 'attribute_checks: "MoE kernel requires 10.x architecture"'
    assert verdicts(moe, arch.parse_targets("12.0,12.1")) == {"12.0": "excludes", "12.1": "excludes"}
    assert by_line[12].chain == ("sm >= 100 && sm < 120",)
    assert by_line[14].chain == ("!(sm >= 100 && sm < 120)", "sm == 120 || sm == 121")
    # after an `if` that returns, the rest of the block is its `else`
    assert by_line[80].chain == ("!(sm == 120 || sm == 121)", "sm >= 100 && sm < 120")


def test_helper_resolutions(result):
    g = next(g for g in result.gates if g.file == "uses.cu" and g.line == 7)
    assert [(r.name, r.file, r.line, r.detail) for r in g.resolutions] == [
        ("getSMVersion", "helper.h", 4, "definition")
    ]


def test_findings_through_the_rules(result):
    rules = {(f.file, f.line): f.rule for f in result.findings if f.file.endswith((".cu", ".h"))}
    # sm >= 100 && sm < 120 covers one generation (datacenter Blackwell): that generation's path, no cut bound
    assert ("checks.cu", 12) not in rules
    assert ("checks.cu", 45) not in rules  # TLLM_CHECK_WITH_INFO(sm_version >= 100 && sm_version < 120)
    assert ("checks.cu", 54) not in rules  # ICHECK_EQ(major, 10): one generation's check, not a list that forgot 12.x
    assert ("checks.cu", 47) not in rules  # assert(sm != 121) turns GB10 away by name, on purpose
    assert ("checks.cu", 14) not in rules  # the 12.x branch admits both
    assert ("checks.cu", 80) not in rules  # the `if ... return` before it takes 12.x


def test_chains_give_each_target_its_route(result):
    """A later sibling that takes 12.x is its route (``} else if`` on the closing brace's line
    too); a refusal that returns ``{}`` on a condition the evaluator cannot pin down rejects
    nothing for sure; a parameter with a literal default, or a member a constructor sets to an
    SM number, is the configuration's architecture, not the device's SM."""
    lines = (HOST / "chains.cu").read_text().splitlines()

    def line(text: str) -> int:
        return next(n for n, written in enumerate(lines, 1) if text in written)

    decided = decisions(g for g in result.gates if g.file == "chains.cu")
    at = {g.line: g for g in result.gates if g.file == "chains.cu"}
    twelve = arch.parse_targets("12.0")[0]
    sm90, sm100, sm120 = line("(sm == 90)"), line("(sm >= 100 && sm < 120)"), line("(sm == 120 || sm == 121)")
    assert decided[at[sm100].id].route(twelve) == at[sm120]
    assert decided[at[sm90].id].branches == (at[sm90], at[sm100], at[sm120])
    fast, slow = line("(sm >= 90 && sm < 120)"), line("run_slow") - 1
    assert decided[at[fast].id].route(twelve) == at[slow] and decided[at[fast].id].is_else(at[slow])
    turing, ampere = line("(sm >= 75 && sm < 80)"), line("(sm >= 80 && sm < 90)")
    assert decided[at[turing].id].newer_branch_takes(at[turing], twelve)
    assert decided[at[ampere].id].newer_branch_takes(at[ampere], twelve)
    assert not decided[at[fast].id].newer_branch_takes(at[fast], twelve)  # the else is a fallback
    refusals = line("&& !valid) {"), line("(sm == 120 || sm == 121) && !valid")
    assert all(at[n].guards == Guards.REJECT and not at[n].surely for n in refusals)
    assert not {line("Expected SM 10x"), line("(sm_version == 120)"), line("the SM90 arm")} & set(at)
    rules = {f.line: f.rule for f in result.findings if f.file == "chains.cu"}
    assert not {sm100, *refusals} & set(rules)
    assert rules[fast] == "ARCH001"  # the `else` it falls into is still the fallback
    sm10x, sm12x = line("case 103:"), line("case 121:")
    assert at[sm10x].chain == ("sm_of(dev) == 100 || sm_of(dev) == 103",)
    assert decided[at[sm10x].id].route(twelve) == at[sm12x] and sm10x not in rules


def test_a_file_that_does_not_parse_whole_keeps_its_checks():
    data = b"""
template <typename T> __global__ void k(T* x) { x[0] = 1; }
void broken( {{{ int sm = ;
}
void launch(int sm) {
  k<<<1, 32>>>(p);
  if (sm >= 120) { run(); }
}
"""
    checks = host.scan_bytes(data).checks
    assert [(c.line, c.expression) for c in checks] == [(7, "sm >= 120")]


def test_the_prefilter_skips_files_without_a_source():
    assert not host.wanted(b"int f(int n) { if (n > 90) return 1; return 0; }")
    assert host.scan_bytes(b"int f(int n) { if (n > 90) return 1; return 0; }") == host.HostScan()


def test_the_cache_round_trip():
    scan = host.scan_bytes((HOST / "checks.cu").read_bytes())
    assert host.decode(host.encode(scan)) == scan


def _sites(result, wanted: dict[tuple[str, int], dict[str, str]]) -> dict:
    targets = arch.parse_targets("12.0,12.1")
    out = {}
    for g in result.gates:
        for (suffix, line), _ in wanted.items():
            if g.kind == GateKind.RUNTIME_CHECK and g.file.endswith(suffix) and g.line == line:
                out[(suffix, line)] = verdicts(g, targets)
    return out


@pytest.mark.slow
def test_flashinfer_053_sites():
    result = audit([str(wheel("flashinfer-python==0.5.3"))], Options(jobs=1))
    excluded = {"12.0": "excludes", "12.1": "excludes"}
    admitted = {"12.0": "admits", "12.1": "admits"}
    wanted = {
        ("kernels/cutlass_kernels/cutlass_heuristic.cpp", 653): excluded,
        ("kernels/cutlass_kernels/cutlass_heuristic.cpp", 656): admitted,
        # `return {}` when the MoE specialisation is invalid: rejects nothing for sure
        ("moe_gemm/moe_gemm_template_dispatch.h", 600): admitted,
        ("moe_gemm/moe_gemm_template_dispatch_tma_ws.h", 450): excluded,
        ("moe_gemm/moe_gemm_template_dispatch_tma_ws.h", 472): admitted,
        ("csrc/trtllm_fused_moe_kernel_launcher.cu", 386): excluded,
    }
    assert _sites(result, wanted) == wanted
    # the SM100 constructor's check of the sm_version its caller chose, and the tile getters
    # that read the member the per-architecture constructors set: not the device's SM
    configs = {g.line for g in result.gates if g.file.endswith("cutlass_extensions/gemm_configs.h")}
    assert not {372, 386, 387} & configs
    rules = {(f.file.rsplit("/", 1)[-1], f.line): f.rule for f in result.findings}
    # ICHECK_EQ(major, 10) guards one generation's (tcgen05) kernels: a gate that excludes 12.x, no finding
    assert ("trtllm_fused_moe_kernel_launcher.cu", 386) not in rules
    # a sibling takes 12.x: its own route, no finding on the 10.x branch
    for site in [("cutlass_heuristic.cpp", 653), ("moe_gemm_template_dispatch_tma_ws.h", 450)]:
        assert site not in rules
    assert ("moe_gemm_template_dispatch.h", 600) not in rules


@pytest.mark.slow
def test_sglang_0515_jit_kernels():
    result = audit([str(wheel("sglang==0.5.15"))], Options(jobs=1))
    admitted = {"12.0": "admits", "12.1": "admits"}
    wanted = {
        ("jit_kernel/csrc/gemm/nvfp4/nvfp4_scaled_mm_kernels.cuh", 125): admitted,
        ("jit_kernel/csrc/gemm/nvfp4/nvfp4_quant_kernels.cuh", 217): admitted,
        ("jit_kernel/csrc/gemm/nvfp4/nvfp4_expert_quant.cuh", 588): admitted,
        ("jit_kernel/csrc/moe/nvfp4_blockwise_moe.cuh", 759): {"12.0": "excludes", "12.1": "excludes"},
        ("jit_kernel/csrc/moe/nvfp4_blockwise_moe.cuh", 809): admitted,
    }
    assert _sites(result, wanted) == wanted
    g = next(g for g in result.gates if g.file.endswith("nvfp4_scaled_mm_kernels.cuh") and g.line == 125)
    assert g.resolved_by == "definition"
