"""The generated fact tables: ``auditor/data/toolkits.json`` and ``auditor/data/ptx-facts.json``.

Why: the auditor's verdicts are only as good as these tables. The fast tests pin the shape and the facts the
auditor's reasoning leans on (12.x macros, sm_107, the 2-CTA TMA row); the slow test re-asks the compilers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "auditor" / "data"
SCRIPTS = ROOT / "scripts"
TOOLKITS = json.loads((DATA / "toolkits.json").read_text())
FACTS = json.loads((DATA / "ptx-facts.json").read_text())
ROWS = {row["id"]: row for row in FACTS["probes"]}
TARGET = re.compile(r"^sm_(\d+)([af]?)$")

# The 2-SM TMA copy CUTLASS emits (SM100_TMA_2SM_LOAD), as one instruction.
CUTLASS_2SM_TMA = (
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::2"
    " [%0], [%1, {%3, %4}], [%2];"
)


def version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def toolkits_13x() -> list[str]:
    return [v for v in TOOLKITS["toolkits"] if version(v) >= (13,)]


def matching(instruction: str) -> list[dict]:
    """Rows whose pattern matches the instruction, most specific first (how the evaluator is meant to use them)."""
    rows = [row for row in FACTS["probes"] if re.match(row["pattern"], instruction)]
    return sorted(rows, key=lambda row: -row["specificity"])


def admits(instruction: str, toolkit: str, target: str) -> bool:
    return all(target in row["results"][toolkit]["accepted"] for row in matching(instruction))


# toolkits.json


def test_toolkit_tables_are_deterministic_and_well_formed():
    assert (DATA / "toolkits.json").read_text() == json.dumps(TOOLKITS, indent=1) + "\n"
    assert list(TOOLKITS["toolkits"]) == sorted(TOOLKITS["toolkits"], key=version)
    for v, entry in TOOLKITS["toolkits"].items():
        assert entry["macro_source"] == ("nvcc --dryrun" if version(v) >= (13,) else "derived"), v
        assert re.fullmatch(r"\d+\.\d+", entry["ptx_isa"]), v
        names = list(entry["targets"])
        keys = [(int(TARGET.match(t).group(1)), TARGET.match(t).group(2)) for t in names]
        assert keys == sorted(keys), f"{v}: targets out of architecture order"
        for target, macros in entry["targets"].items():
            number, suffix = TARGET.match(target).groups()
            assert macros["__CUDA_ARCH__"] == macros["__CUDA_ARCH_LIST__"] == number + "0", (v, target)
            assert ("__CUDA_ARCH_FEAT_SM" + number + "_ALL" in macros) == (suffix == "a"), (v, target)
            assert list(macros) == sorted(macros), (v, target)


@pytest.mark.parametrize("toolkit", toolkits_13x())
def test_every_13x_toolkit_has_the_12x_targets(toolkit):
    targets = TOOLKITS["toolkits"][toolkit]["targets"]
    for number in ("120", "121"):
        for suffix in ("", "a", "f"):
            assert targets[f"sm_{number}{suffix}"]["__CUDA_ARCH__"] == number + "0"
    assert targets["sm_120a"]["__CUDA_ARCH_SPECIFIC__"] == "1200"
    assert targets["sm_121f"]["__CUDA_ARCH_FAMILY_SPECIFIC__"] == "1210"
    assert "__CUDA_ARCH_SPECIFIC__" not in targets["sm_120f"]
    assert "__CUDA_ARCH_FEAT_SM120_ALL" not in targets["sm_121a"]


def test_sm107_arrives_in_13_4_and_sm101_became_sm110():
    has = {v: set(e["targets"]) for v, e in TOOLKITS["toolkits"].items()}
    assert {v for v in has if "sm_107" in has[v]} == {v for v in has if version(v) >= (13, 4)}
    assert "sm_107f" in has["13.5.37"]
    assert {v for v in has if "sm_101" in has[v]} == {v for v in has if version(v) < (13,)}
    assert {v for v in has if "sm_110" in has[v]} == {v for v in has if version(v) >= (13,)}


def test_family_targets_and_their_macros_start_in_12_9():
    t128, t129 = (TOOLKITS["toolkits"][v]["targets"] for v in ("12.8.93", "12.9.86"))
    assert not [t for t in t128 if t.endswith("f")]
    assert {"sm_100f", "sm_103f", "sm_120f", "sm_121f"} <= set(t129)
    assert "__CUDA_ARCH_SPECIFIC__" not in t128["sm_120a"]
    assert t129["sm_120a"]["__CUDA_ARCH_SPECIFIC__"] == "1200"


def test_the_target_domain_is_every_toolkits_targets_as_the_newest_defines_them():
    """The evaluator's target domain: every target of every toolkit, with its newest toolkit's macros."""
    from auditor import arch

    newest: dict[str, dict[str, int]] = {}
    for version in sorted(TOOLKITS["toolkits"], key=lambda v: tuple(int(x) for x in v.split("."))):
        for target, macros in TOOLKITS["toolkits"][version]["targets"].items():
            newest[target] = {k: int(v) for k, v in macros.items()}
    assert set(arch.device_targets()) == set(newest)
    assert all(arch.target_macros()[t] == m for t, m in newest.items())


# ptx-facts.json


def test_ptx_facts_are_deterministic_and_well_formed():
    assert (DATA / "ptx-facts.json").read_text() == json.dumps(FACTS, indent=1) + "\n"
    assert set(FACTS["toolkits"]) == set(TOOLKITS["toolkits"])
    assert len(ROWS) == len(FACTS["probes"]), "duplicate probe ids"
    assert len({row["pattern"] for row in FACTS["probes"]}) == len(ROWS), "two rows share a pattern"
    for v, entry in FACTS["toolkits"].items():
        assert entry["targets"] == list(TOOLKITS["toolkits"][v]["targets"]), v
        assert entry["ptx_isa"] == TOOLKITS["toolkits"][v]["ptx_isa"], v
    for row in FACTS["probes"]:
        assert re.match(row["pattern"], row["ptx"]), f"{row['id']}: pattern misses its own instruction"
        assert set(row["results"]) == set(FACTS["toolkits"]), row["id"]
        for v, result in row["results"].items():
            rejected = [t for targets in result["errors"].values() for t in targets]
            assert sorted(result["accepted"] + rejected) == sorted(FACTS["toolkits"][v]["targets"]), (row["id"], v)
            assert len(set(rejected)) == len(rejected), (row["id"], v)
            advised = {t for targets in result["advisories"].values() for t in targets}
            assert advised <= set(result["accepted"]), (row["id"], v)


def test_no_probe_is_rejected_everywhere():
    broken = [row["id"] for row in FACTS["probes"] if not any(r["accepted"] for r in row["results"].values())]
    assert not broken, f"probes whose PTX no ptxas accepts: {broken}"


def test_baseline_probe_is_accepted_on_every_target():
    for v, result in ROWS["shfl_sync"]["results"].items():
        assert result["accepted"] == FACTS["toolkits"][v]["targets"], v


@pytest.mark.parametrize("toolkit", toolkits_13x())
def test_two_cta_tma_rejects_sm120a_and_accepts_sm100a(toolkit):
    result = ROWS["tma_load_cta_group2"]["results"][toolkit]
    assert "sm_100a" in result["accepted"]
    assert "sm_120a" not in result["accepted"]
    assert any("cta_group::2" in error for error, targets in result["errors"].items() if "sm_120a" in targets)


def test_cutlass_2sm_copy_matches_the_cta_group2_row_not_the_plain_one():
    rows = matching(CUTLASS_2SM_TMA)
    assert rows[0]["id"] == "tma_load_cta_group2"
    assert "tma_load_cluster" in [row["id"] for row in rows]
    assert not admits(CUTLASS_2SM_TMA, "13.0.88", "sm_120a")
    assert admits(CUTLASS_2SM_TMA, "13.0.88", "sm_100a")


def test_plain_tma_load_accepts_sm90_and_sm120():
    plain = CUTLASS_2SM_TMA.replace(".cta_group::2", "")
    assert matching(plain)[0]["id"] == "tma_load_cluster"
    for v, result in ROWS["tma_load_cluster"]["results"].items():
        assert {"sm_90", "sm_120"} <= set(result["accepted"]), v
        assert admits(plain, v, "sm_120")


def test_wgmma_is_sm90a_only():
    wgmma = [row for row in FACTS["probes"] if row["family"] == "wgmma"]
    assert len(wgmma) >= 5
    for row in wgmma:
        for v, result in row["results"].items():
            assert result["accepted"] == ["sm_90a"], (row["id"], v)


def test_tcgen05_is_never_accepted_on_12x():
    for row in FACTS["probes"]:
        if row["family"] == "tcgen05":
            for v, result in row["results"].items():
                assert not [t for t in result["accepted"] if t.startswith("sm_12")], (row["id"], v)


# Re-ask the compilers.


def cached_toolkits() -> list[str]:
    cache = Path(os.environ.get("ARCHAUDIT_TOOLKIT_CACHE", Path.home() / ".cache" / "archaudit-toolkits"))
    cached = [v for v in TOOLKITS["toolkits"] if (cache / v / ".complete").exists()]
    return cached or ["13.0.88"]


def run_script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(SCRIPTS / name), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600)


@pytest.mark.slow
def test_toolkit_table_matches_what_the_toolkits_say(tmp_path):
    toolkits = cached_toolkits()
    done = run_script("gen_toolkit_targets.py", "--check", "--toolkits", *toolkits)
    assert done.returncode == 0, done.stderr
    # The check must be able to fail: a table with one macro changed is caught.
    tampered = json.loads(json.dumps(TOOLKITS))
    tampered["toolkits"][toolkits[0]]["targets"]["sm_90"]["__CUDA_ARCH__"] = "910"
    (tmp_path / "t.json").write_text(json.dumps(tampered))
    done = run_script("gen_toolkit_targets.py", "--check", "--toolkits", toolkits[0], "--out", str(tmp_path / "t.json"))
    assert done.returncode == 1


@pytest.mark.slow
def test_ptx_facts_match_what_ptxas_says(tmp_path):
    """Oldest and newest cached toolkit (ARCHAUDIT_FACTS_TOOLKITS overrides): all eight take 7 to 9 minutes."""
    cached = cached_toolkits()
    toolkits = os.environ.get("ARCHAUDIT_FACTS_TOOLKITS", "").split() or sorted({cached[0], cached[-1]}, key=version)
    done = run_script("gen_ptx_facts.py", "--check", "--toolkits", *toolkits)
    assert done.returncode == 0, done.stderr[-3000:]
    # The check must be able to fail: a table that claims one rejection too few is caught.
    tampered = json.loads(json.dumps(FACTS))
    tampered["probes"][0]["results"][toolkits[0]]["accepted"].pop()
    (tmp_path / "f.json").write_text(json.dumps(tampered))
    args = (
        "--check",
        "--toolkits",
        toolkits[0],
        "--probes",
        FACTS["probes"][0]["id"],
        "--out",
        str(tmp_path / "f.json"),
    )
    assert run_script("gen_ptx_facts.py", *args).returncode == 1


LOWERING = json.loads((DATA / "intrinsic-lowering.json").read_text())


def test_intrinsic_lowering_holds_the_facts_the_fallback_rule_leans_on():
    """On sm_121a nvcc lowers the round-up e8m0 conversion to the instruction flashinfer's
    fast branch writes by hand; on plain sm_121 (no arch-specific target) it does not."""
    e8m0 = {row["id"]: row for row in LOWERING["intrinsics"]}["e8m0_rp"]
    assert e8m0["emits"]["sm_121a"] == ["cvt.rp.satfinite.ue8m0x2.f32"]
    assert "sm_121" not in e8m0["emits"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_intrinsic_lowering_matches_what_nvcc_says(tmp_path):
    """The installed nvcc must be the one the table was made with (its version is recorded)."""
    done = run_script("gen_intrinsic_lowering.py", "--check")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    # The check must be able to fail: a table that claims one instruction too many is caught.
    tampered = json.loads(json.dumps(LOWERING))
    tampered["intrinsics"][0]["emits"]["sm_121"] = ["cvt.rn.f16x2.f32"]
    (tmp_path / "l.json").write_text(json.dumps(tampered))
    probe = LOWERING["intrinsics"][0]["id"]
    assert (
        run_script(
            "gen_intrinsic_lowering.py", "--check", "--probes", probe, "--out", str(tmp_path / "l.json")
        ).returncode
        == 1
    )
