"""One finding per root cause, on a small tree of the shapes real releases repeat
(``fixtures/rules/trees/roots``): a flag computed once and used in several files, a predicate and
its callers, an assignment and its ``if``, one ``#if`` written out at each kernel of a header."""

from __future__ import annotations

from dataclasses import replace

import pytest

from auditor import arch
from auditor.model import Finding, Gate, Resolution
from auditor.pipeline import Options, audit
from auditor.rules import engine, roots, rulebook
from tests.conftest import FIXTURES, audit_texts

TREE = FIXTURES / "rules" / "trees" / "roots"


@pytest.fixture(scope="module")
def result():
    return audit([str(TREE)], Options(jobs=1))


def at(result, file: str) -> list[Finding]:
    return [f for f in result.findings if f.file == file]


def sites(f: Finding) -> set[tuple[str, int]]:
    return {(f.file, f.line), *f.also}


def test_a_flag_computed_once_is_one_finding_at_the_decision_that_sets_it(result):
    """``ENABLE_FAST = _compute_enable_fast()`` (``sm == 120`` turns 12.0 away) is tested as
    ``ENABLE_FAST``, ``not configurer.ENABLE_FAST`` and ``ENABLE_FAST and get_device_sm() >= 100``
    in two files: one finding, inside the function that decides, listing every use."""
    (one,) = at(result, "pkg/configurer.py")
    assert (one.line, one.rule) == (10, "ARCH010")  # 12.0 kept out by name, 12.1 let through
    assert sites(one) == {
        ("pkg/configurer.py", 10),
        ("pkg/configurer.py", 16),
        ("pkg/gemm.py", 4),
        ("pkg/gemm.py", 9),
    }
    assert one.root == "`_compute_enable_fast` (pkg/configurer.py:6)"
    assert "one root cause, `_compute_enable_fast`" in one.message
    assert at(result, "pkg/gemm.py") == []


def test_a_predicate_and_its_callers_are_one_finding(result):
    (definition, assignment) = at(result, "pkg/attention.py")
    assert definition.line == 6 and set(definition.also) == {("pkg/attention.py", 11), ("pkg/attention.py", 14)}
    assert definition.root == "`_use_wide_heads` (pkg/attention.py:4)"
    # ``use_cooperative = … in (9, 10, 11)`` and ``if use_cooperative:``
    assert assignment.line == 23 and assignment.also == (("pkg/attention.py", 24),)


def test_one_condition_repeated_in_a_folder_is_one_finding(result):
    """The same ``#if`` three times in ``allreduce.cuh`` and three times in its sibling
    ``other.cuh``: one finding, the five other sites listed."""
    (f,) = [f for f in result.findings if f.file.startswith("csrc/")]
    assert (f.file, f.line, f.rule) == ("csrc/allreduce.cuh", 5, "ARCH001")
    assert f.also == (
        ("csrc/allreduce.cuh", 11),
        ("csrc/allreduce.cuh", 17),
        ("csrc/other.cuh", 5),
        ("csrc/other.cuh", 11),
        ("csrc/other.cuh", 17),
    )
    assert "the same condition; also at" in f.message and f.root == ""


def test_every_count_sees_the_folded_findings(result):
    assert len(result.findings) == 4
    assert len({f.decision for f in result.findings}) == 4


def test_a_gate_two_rules_judge_alike_keeps_the_more_specific_one(result):
    """``ENABLE_FAST`` admits 9.0…11.0 and 12.1 but not 12.0: an allow-list of several majors
    (ARCH002) and a minor let through (ARCH010); the whole difference is a minor, so ARCH010
    stays (``yields_to`` in ARCH002's rule file)."""
    (use,) = [g for g in result.gates if (g.file, g.line) == ("pkg/gemm.py", 4)]
    targets = arch.parse_targets(arch.DEFAULT_TARGETS)
    rules = rulebook.builtin()
    assert [f.rule for f in engine.match(rules, [use], targets)] == ["ARCH010"]
    assert "ARCH010" in next(r for r in rules if r.id == "ARCH002").yields_to


def gate(id: str, line: int, expression: str, context: str = "", *resolutions: Resolution) -> Gate:
    return Gate(
        id,
        "pkg/fa.py",
        line,
        line,
        "python",
        "predicate-call",
        expression,
        "device",
        (),
        (),
        "definition",
        (),
        resolutions,
        context=context,
    )


def route(g: Gate) -> Finding:
    return Finding("ARCH001", "high", g.id, g.file, g.line, "m", input="t", decision=g.id)


def test_a_use_follows_the_values_its_condition_names_not_every_helper_passed():
    """``if ENABLE:`` where ``ENABLE = _compute()`` joins the finding inside ``_compute``;
    ``if is_hopper or (version == 4 and ...)`` where ``version = pick_version()`` is its own
    allow-list: the evaluation went through ``pick_version`` but the condition does not name it."""
    compute = Resolution("_compute", "pkg/fa.py", 1, "def _compute():")
    pick = Resolution("pick_version", "pkg/fa.py", 10, "def pick_version():")
    inside = [gate("c", 3, "major == 12", "_compute"), gate("p", 12, "major in (10, 11)", "pick_version")]
    enable = gate("e", 30, "ENABLE", "", Resolution("ENABLE", "pkg/fa.py", 6, "_compute()"), compute)
    hopper = Resolution("is_hopper", "pkg/fa.py", 40, "is_hopper = major == 9")
    own = gate("o", 42, "is_hopper or (version == 4 and is_blackwell)", "fp8_cache", pick, hopper)
    gates = [*inside, enable, own]
    out = {f.line: f for f in roots.fold([route(g) for g in gates], {g.id: g for g in gates})}
    assert sorted(out) == [3, 12, 42]
    assert out[3].also == (("pkg/fa.py", 30),) and out[3].root == "`_compute` (pkg/fa.py:1)"
    assert out[12].also == () and out[42].also == ()


def test_a_quieter_finding_that_passes_a_trap_on_folds_into_it():
    """``if not _supports(x): return None`` whose only arch test is ``_has_runtime``'s
    ``capability == (12, 0)``: the speed-choice reading of the caller (low) is the trap inside
    the predicate (high) again, one finding; a caller's finding as loud as the trap stays."""
    has_runtime = Resolution("_has_runtime", "pkg/fa.py", 1, "def _has_runtime(device):")
    trap = gate("t", 3, "capability == (12, 0)", "_has_runtime")
    caller = gate(
        "c",
        20,
        "not _supports(x)",
        "try_gemm",
        Resolution("_supports", "pkg/fa.py", 10, "def _supports(x):"),
        has_runtime,
    )
    quiet = Finding("ARCH014", "low", "c", "pkg/fa.py", 20, "m", input="t")
    out = roots.fold([route(trap), quiet], {g.id: g for g in (trap, caller)})
    assert [(f.line, f.also) for f in out] == [(3, (("pkg/fa.py", 20),))]
    loud = replace(quiet, rule="ARCH008", severity="high")
    out = roots.fold([route(trap), loud], {g.id: g for g in (trap, caller)})
    assert sorted(f.line for f in out) == [3, 20]


def test_one_cause_spelled_two_ways_is_one_finding():
    """``is_sm90() or is_sm100()`` in one file and ``_is_sm90 or _is_sm100`` (flags set from
    them) in another rest on the same two predicates: one finding, the other site listed."""
    sm90 = Resolution("is_sm90", "pkg/utils.py", 1, "def is_sm90():")
    sm100 = Resolution("is_sm100", "pkg/utils.py", 5, "def is_sm100():")
    direct = gate("d", 10, "is_sm90() or is_sm100()", "enable", sm90, sm100)
    flags = replace(
        gate(
            "f",
            20,
            "_is_sm90 or _is_sm100",
            "",
            Resolution("_is_sm90", "pkg/comm.py", 3, "_is_sm90 = is_cuda() and is_sm90()"),
            Resolution("_is_sm100", "pkg/comm.py", 4, "_is_sm100 = is_cuda() and is_sm100()"),
            sm90,
            sm100,
        ),
        file="pkg/comm.py",
    )
    other = gate("o", 30, "is_sm90()", "other", sm90)
    gates = [direct, flags, other]
    out = roots.fold([route(g) for g in gates], {g.id: g for g in gates})
    assert sorted((f.file, f.line, f.also) for f in out) == [
        ("pkg/comm.py", 20, (("pkg/fa.py", 10),)),
        ("pkg/fa.py", 30, ()),
    ]


RUNNER = """\
import torch


class Runner:
    def __init__(self, device):
        arch = torch.cuda.get_device_capability(device)
        if arch not in ((9, 0), (10, 0), (12, 0)):
            raise NotImplementedError("runner requires SM90, SM100 or SM120")
        self.arch = arch

    def tactics(self):
        capability = torch.cuda.get_device_capability()
        if capability == (12, 0):
            return [fast_sm120_tactic()]
        return [generic_tactic()]
"""


def test_a_class_that_rejects_a_target_in_its_constructor_is_one_cause_with_its_methods_gates():
    """12.1 never gets past ``Runner.__init__``, so the method's test of 12.0 is not a second
    trap but another site of the first: widening the constructor is where a user starts."""
    _, findings = audit_texts({"pkg/runner.py": RUNNER})
    (f,) = findings
    assert (f.rule, f.line, f.also) == ("ARCH003", 7, (("pkg/runner.py", 13),))
    assert "this check in `Runner.__init__`, which 12.1 never passes" in f.message


def test_a_method_gate_that_turns_away_a_target_the_constructor_lets_through_stays_its_own():
    text = RUNNER.replace("(10, 0), (12, 0))", "(10, 0), (12, 0), (12, 1))")
    _, findings = audit_texts({"pkg/runner.py": text})
    assert [(f.line, f.also) for f in findings] == [(13, ())]


ROUNDING = """\
#pragma once
#include <cstdint>

__device__ __forceinline__ uint32_t cvt_rs(float a, float b, uint32_t bits);

__device__ __forceinline__ uint32_t round_one(float x, uint32_t bits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && defined(__CUDA_ARCH_FEAT_SM100_ALL)
  return cvt_rs(x, 0.0f, bits);
#else
  return software_round(x, bits);
#endif
}

__device__ __forceinline__ uint32_t cvt_rs(float a, float b, uint32_t bits) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000 && defined(__CUDA_ARCH_FEAT_SM100_ALL)
  uint32_t packed;
  asm("cvt.rs.f16x2.f32 %0, %2, %1, %3;" : "=r"(packed) : "r"(__float_as_uint(a)), "r"(__float_as_uint(b)), "r"(bits));
  return packed;
#else
  return software_round(a, bits);
#endif
}
"""


def test_the_site_whose_code_shows_what_the_target_lacks_speaks_for_the_same_condition():
    """The caller's lines only call the helper; the helper's ``asm`` is what 12.x lacks."""
    _, findings = audit_texts({"pkg/include/rounding.cuh": ROUNDING})
    (f,) = [f for f in findings if f.rule == "ARCH005"]
    assert (f.line, f.also) == (15, (("pkg/include/rounding.cuh", 7),))
    assert "`cvt.rs.f16x2.f32`" in f.message


SEQUENCE = """\
import torch


def check_device():
    capability = torch.cuda.get_device_capability()
    if capability != (12, 0):
        raise RuntimeError("the SM120 backend requires compute capability 12.0")
    if not toolkit_targets_sm120a(capability):
        raise RuntimeError("the toolkit cannot target sm_120a")


def toolkit_targets_sm120a(capability):
    return capability == (12, 0) and torch.version.cuda >= "12.8"
"""


def test_a_check_after_one_that_surely_rejects_the_same_targets_says_nothing_more():
    """12.1 never reaches the second ``raise``: one finding, the first check, lists it."""
    _, findings = audit_texts({"pkg/runtime.py": SEQUENCE})
    (f,) = [f for f in findings if f.line in (6, 8)]
    assert f.line == 6 and ("pkg/runtime.py", 8) in f.also
    assert "(one root cause, this check, which 12.1 never passes; also at pkg/runtime.py:8)" in f.message


def test_a_check_behind_an_accepted_rejection_of_the_same_targets_is_not_reported():
    """The first check names 12.1 and says why (no finding); the list after it is never met there."""
    text = SEQUENCE.replace(
        'if capability != (12, 0):\n        raise RuntimeError("the SM120 backend requires compute capability 12.0")',
        'if capability == (12, 1):\n        raise RuntimeError("GB10 lacks the shared memory this kernel needs")',
    ).replace("if not toolkit_targets_sm120a(capability):", "if capability not in ((9, 0), (12, 0)):")
    _, findings = audit_texts({"pkg/runtime.py": text})
    assert [f for f in findings if f.line in (6, 8)] == []
