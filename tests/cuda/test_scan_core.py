"""The scan core: known-answer conditions, fixture gates, derived macros, the real flashinfer wheel."""

from __future__ import annotations

import json

import pytest
import yaml

from auditor import arch, cli
from auditor.cuda.macros import Axis, MacroTable
from auditor.pipeline import Options, audit
from tests.conftest import FIXTURES, wheel

KNOWN = yaml.safe_load((FIXTURES / "gates" / "cuda.yaml").read_text())


@pytest.mark.parametrize("case", KNOWN, ids=[c["condition"] for c in KNOWN])
def test_known_answers(case):
    reach, unknowns, _, toolkits = Axis(MacroTable()).effective([(case["condition"], True)])
    admits = [t for t, v in zip(arch.target_order(), reach) if v is not False]
    assert arch.compact("target", admits) == case["admits"]
    assert sorted(unknowns) == case.get("unknowns", [])
    expected = {t: [str(r) for r in releases] for t, releases in case.get("toolkits", {}).items()}
    assert {t: list(r) for t, r in toolkits} == expected


def gates_by_line(result, file):
    return {g.line: g for g in result.gates if g.file == file}


def test_fixture_gates_and_non_gates():
    result = audit([str(FIXTURES / "cuda" / "basic")], Options(jobs=1))
    g = gates_by_line(result, "shapes.cuh")
    assert arch.compact("target", g[10].admits) == "sm_90…sm_110f"
    assert g[10].features[0].token == "cudaGridDependencySynchronize"
    # #if / #elif / #elif / #else: each branch its own effective set
    assert arch.compact("target", g[16].admits) == "sm_100…sm_107f"  # sm_101 (12.9), sm_107 (13.4+)
    assert arch.compact("target", g[19].admits) == "sm_90, sm_90a, sm_110…sm_121f"
    assert arch.compact("target", g[21].admits) == "sm_80…sm_89"  # 0x320 is 800
    assert arch.compact("target", g[23].admits) == "sm_50…sm_75, host"  # below 800: CUDA 12.x builds sm_50 on
    assert arch.compact("target", g[36].admits) == "sm_107…sm_107f"  # sm_107 exists from CUDA 13.4: not dead
    assert g[36].toolkits == ()  # every toolkit that has sm_107 admits it
    assert g[70].unknowns == ("ENABLE_FP8",) and arch.compact("target", g[70].admits) == "sm_89…sm_121f"
    # the block comment's '#if' and the host/device split are not gates
    assert 6 not in g and 64 not in g and 66 not in g
    # nested: the sm_120 branch inside >= 800
    assert arch.compact("target", g[59].admits) == "sm_120…sm_121f"


def test_cccl_arms():
    result = audit([str(FIXTURES / "cuda" / "basic")], Options(jobs=1))
    g = {(x.line, x.expression): x for x in result.gates if x.file == "cccl.cuh"}
    admits = {k: arch.compact("target", x.admits) for k, x in g.items()}
    assert admits == {
        (5, "NV_PROVIDES_SM_90"): "sm_90…sm_121f",  # holds on 12.x
        (6, "!NV_PROVIDES_SM_90"): "sm_50…sm_89, host",  # its else arm
        (8, "NV_HAS_FEATURE_SM_90a"): "sm_90a",  # does not hold on 12.x
        (8, "!NV_HAS_FEATURE_SM_90a"): "sm_50…sm_90, sm_100…sm_121f, host",
        (10, "NV_IS_EXACTLY_SM_100"): "sm_100…sm_100f",
        (11, "NV_PROVIDES_SM_80"): "sm_80…sm_90a, sm_101…sm_121f",  # the second arm of a dispatch
    }  # NV_IS_HOST (line 13) is a host/device split, not a gate
    assert all(x.kind == "cccl-target" for x in g.values())


def test_derived_macro_resolves_to_exactly_sm90a():
    result = audit([str(FIXTURES / "cuda" / "derived")], Options(jobs=1))
    g = gates_by_line(result, "kernel.cu")
    assert g[5].admits == ("sm_90a",)
    assert g[5].kind == "derived-macro" and g[5].resolved_by == "definition"
    assert [(r.name, r.file, r.line) for r in g[5].resolutions] == [("MYLIB_SM90A_ENABLED", "arch_config.h", 6)]
    assert arch.compact("target", g[8].admits) == "sm_90…sm_121f"
    # a derived macro defined under a toolkit condition: evaluated per toolkit, no unknown left
    assert g[11].admits == ("sm_100a",) and g[11].unknowns == ()
    assert dict(g[11].toolkits) == {"sm_100a": ("13.0", "13.1", "13.2", "13.3", "13.4", "13.5")}
    # CUTLASS's sm_101f flags exist only with CUDA 12.9 (13.0 renamed sm_101 to sm_110): not dead
    assert g[17].admits == ("sm_101a", "sm_101f") and dict(g[17].toolkits) == {"sm_101a": ("12.9",)}
    # a flag nested under an `#if !defined(FLAG_ITSELF) ...` that defines it: the definitions
    # under that #if come after it and cannot decide it, so sm_90a takes the block
    assert g[20].admits == ("sm_90a",) and g[20].unknowns == ()
    config = gates_by_line(result, "arch_config.h")
    assert [x.admits for x in config.values() if "!defined(MYLIB_SM90_ENABLED)" in x.expression] == [
        ("sm_90", "sm_90a")
    ]
    assert 14 not in g  # defined only as a host/device split
    assert not any(x.file == "arch_config.h" and x.line == 2 for x in result.gates)  # include guard


@pytest.mark.slow
def test_flashinfer_060_allreduce_guards(tmp_path):
    out = tmp_path / "r.json"
    code = cli.main(["scan", str(wheel("flashinfer-python==0.6.0")), "--no-cache", "-o", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == "archaudit/1" and doc["targets"] == ["12.0", "12.1"]
    guards = [
        g
        for g in doc["gates"]
        if g["file"].endswith("comm/trtllm_allreduce.cuh")
        and "(__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)" in g["expression"]
        and not g["expression"].startswith("!")
    ]
    assert len(guards) >= 5
    for g in guards:
        assert g["admits"] == [
            "sm_90",
            "sm_90a",
            "sm_100",
            "sm_100a",
            "sm_100f",
            "sm_101",  # CUDA 12.9
            "sm_101a",
            "sm_101f",
            "sm_103",
            "sm_103a",
            "sm_103f",
            "sm_107",  # CUDA 13.4 on
            "sm_107a",
            "sm_107f",
            "sm_110",
            "sm_110a",
            "sm_110f",
        ]
        assert g["excludes_target"] is True and g["verdicts"] == {"12.0": "excludes", "12.1": "excludes"}
        assert g["language"] == "cuda" and g["domain"] == "target"
    paths = [(g["file"], g["line"]) for g in doc["gates"]]
    assert paths == sorted(paths)
