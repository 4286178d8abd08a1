"""What the guarded code uses: PTX read from asm templates and judged by ptxas's facts, APIs only as code.

Why: the classification (hardware / conservative / unknown) and ARCH001/ARCH007 rest on these
features; a log string that says "bf16" or a 2-SM TMA copy matched as a plain one turns advice
to widen a gate into advice that cannot compile.
"""

from __future__ import annotations

import json

import pytest

from auditor import arch, cli
from auditor.facts import code, ptx
from auditor.facts.features import UNKNOWN_CALL, scan_region
from tests.conftest import FIXTURES, wheel

FEATURES = FIXTURES / "cuda" / "features"
CAPS = ("12.0", "12.1")


def scan(path, capsys, *args: str) -> dict:
    assert cli.main(["scan", str(path), "--format", "json", "--no-cache", *args]) == 0
    return json.loads(capsys.readouterr().out)


def only_gate(name: str, capsys) -> dict:
    (gate,) = scan(FEATURES / name, capsys)["gates"]
    return gate


# known answers


def test_cta_group_2_tma_copy_is_hardware_on_12x(capsys):
    gate = only_gate("tma_2sm.cu", capsys)
    assert gate["classification"] == "hardware"
    (f,) = gate["features"]
    assert f["token"].startswith("cp.async.bulk.tensor.2d.cta_group::2.") and f["line"] == 6
    assert f["on_target"] == {"12.0": "no", "12.1": "no"}


def test_plain_tma_copy_is_available(capsys):
    gate = only_gate("tma_plain.cu", capsys)
    (f,) = gate["features"]
    assert f["on_target"] == {"12.0": "yes", "12.1": "yes"} and f["min_arch"] == "sm_90"
    assert gate["classification"] == "conservative"


def test_a_call_the_facts_do_not_know_leaves_the_needs_unknown(capsys):
    """One visible instruction 12.x has does not make the region conservative when it also
    calls a function whose needs are unknown (a 2-SM helper, a template reaching wgmma)."""
    gate = only_gate("wrapped_call.cu", capsys)
    tokens = {f["token"]: f["on_target"] for f in gate["features"]}
    assert tokens["mbarrier.arrive.shared::cluster.b64"] == {"12.0": "yes", "12.1": "yes"}
    assert "peer_cta_address" in tokens
    assert gate["classification"] == "unknown"
    # keywords, casts and asm are not calls
    assert {f[1].token for f in scan_region('if (x) { asm volatile("fence.proxy.async;"); }', 1, "cuda", CAPS)} == {
        "fence.proxy.async"
    }


def test_log_string_and_comment_are_no_features(capsys):
    gate = only_gate("log_only.cu", capsys)
    assert gate["features"] == [] and gate["classification"] == "unknown"


def test_define_only_region_has_no_features(capsys):
    gate = only_gate("define_only.cu", capsys)
    assert gate["features"] == []


def test_a_variant_the_facts_lack_is_unknown_not_available(capsys):
    gate = only_gate("unprobed.cu", capsys)
    (f,) = gate["features"]
    assert f["on_target"] == {"12.0": "unknown", "12.1": "unknown"}
    assert gate["classification"] == "unknown"


def test_apis_count_only_as_code(capsys):
    gate = only_gate("api.cu", capsys)
    assert [f["token"] for f in gate["features"]] == ["cudaGridDependencySynchronize"]


def test_finding_cites_toolkit_variant_and_accepting_targets(capsys):
    doc = scan(FEATURES / "tma_plain.cu", capsys)
    (finding,) = [f for f in doc["findings"] if f["rule"] == "ARCH001"]
    toolkit = ptx.table()[0]
    assert f"ptxas {toolkit}, variant tma_load_cluster: accepted on sm_90…" in finding["message"]


# the pieces


def test_blank_keeps_lines_and_drops_comments_strings_and_directives():
    text = '#define X "a"\nint a; // b\n/* c\n d */ f("e");\n'
    blanked, strings = code.blank(text, "cuda")
    assert len(blanked) == len(text) and blanked.count("\n") == text.count("\n")
    assert blanked.split() == ["int", "a;", "f(", ");"]
    assert [text[s:e] for s, e in strings] == ['"e"']


def test_asm_statements_are_split_into_opcodes():
    text = 'asm volatile("{\\n .reg .pred p;\\n L1: @!p bra L1;\\n" "mbarrier.try_wait" ".parity.b64 p, [%0];}" :: "r"(x));'
    blanked, strings = code.blank(text, "cuda")
    assert [op for _, op in code.asm_instructions(text, blanked, strings)] == ["bra", "mbarrier.try_wait.parity.b64"]


def test_every_probe_judges_its_own_instruction_as_ptxas_did():
    toolkit, targets, rows = ptx.table()
    facts = json.loads((FIXTURES.parent / "auditor" / "data" / "ptx-facts.json").read_text())
    for probe in facts["probes"]:
        opcode = probe["ptx"].split()[0].rstrip(";")
        j = ptx.judge(opcode, CAPS)
        accepted = probe["results"][toolkit]["accepted"]
        for cap, status in j.on_target:
            ok = [t for t in targets if arch.capability_of(t) == cap and t in accepted]
            assert (status == "no") == (not ok), (probe["id"], cap, status)
            assert status != "unknown", probe["id"]


def test_matching_is_order_insensitive_but_only_stricter():
    cutlass = "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
    ptx_order = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::2"
    assert (
        ptx.judge(cutlass, CAPS).on_target == ptx.judge(ptx_order, CAPS).on_target == (("12.0", "no"), ("12.1", "no"))
    )


def test_unmatched_instruction_is_unknown():
    assert ptx.judge("frobnicate.b32", CAPS).on_target == (("12.0", "unknown"), ("12.1", "unknown"))


def test_region_without_candidates_is_not_lexed(monkeypatch):
    monkeypatch.setattr(code, "blank", lambda *a: pytest.fail("lexed"))
    assert scan_region("int x = bf16 + e5m2;\n", 1, "cuda", CAPS) == []


# a real wheel


@pytest.mark.slow
def test_flashinfer_053_2sm_tma_gates_are_never_conservative(capsys):
    doc = scan(wheel("flashinfer-python==0.5.3"), capsys)
    gates = [g for g in doc["gates"] if g["file"].endswith("cute/arch/copy_sm100_tma.hpp")]
    used = [g for g in gates if g["features"]]
    assert used and all(g["classification"] == "hardware" for g in used)
    assert not [g for g in gates if g["classification"] == "conservative"]


def test_implementations_named_for_other_generations():
    """Kernels named for 9.x and 10.x are what the region runs: 12.x has no code of its own there;
    one named for 12.x, or a predicate's name, is not such evidence."""
    region = "    kernel = AttentionForwardSm90(q)\n    other = fmha.run_gemm_sm100(q)\n    ok = is_sm90_supported()\n"
    found = {f.token: f for _, f in scan_region(region, 1, "python", ("12.0", "12.1"))}
    assert found["AttentionForwardSm90"].feature == "an implementation written for 9.0"
    assert found["AttentionForwardSm90"].on_target == (("12.0", "no"), ("12.1", "no"))
    assert found["fmha.run_gemm_sm100"].feature == "an implementation written for 10.0"
    assert found["is_sm90_supported"].feature == UNKNOWN_CALL  # a test, not an implementation
    mixed = region + "    kernel = AttentionForwardSm120(q)\n"
    assert not any(f.feature.startswith("an implementation") for _, f in scan_region(mixed, 1, "python", ("12.0",)))
    assert scan_region(region, 1, "cuda", ("12.0",)) == []  # C names are not read this way
