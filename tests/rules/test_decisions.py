"""Decisions, routes and root causes: which branch each target takes, and one finding per cause."""

from __future__ import annotations

from auditor import arch, pipeline
from auditor.model import Finding, Gate, Resolution, SourceFile
from auditor.rules import roots
from auditor.rules.decisions import decisions

TARGETS = arch.parse_targets(arch.DEFAULT_TARGETS)
T120, T121 = TARGETS


def run(path: str, text: str, **options):
    source = SourceFile(path, text.encode(), "python" if path.endswith(".py") else "cuda", "t")
    gates, findings, _ = pipeline.audit_input([source], "t", pipeline.Options(jobs=1, **options))
    return gates, findings


CHAIN = """import torch


def tile():
    major, minor = torch.cuda.get_device_capability()
    if major == 10:
        return 256
    elif major == 12 and minor == 0:
        return 128
    elif major == 12 and minor == 1:
        return 96
    else:
        return 64
"""


def test_an_elif_chain_is_one_decision_and_each_target_has_its_route():
    gates, findings = run("t.py", CHAIN)
    by_line = {g.line: g for g in gates}
    decided = decisions(gates)
    (decision,) = {decided[g.id] for g in gates}
    assert [b.line for b in decision.branches] == [6, 8, 10, 12]
    assert decision.route(T120) is by_line[8] and decision.route(T121) is by_line[10]
    assert decision.is_else(by_line[12]) and not decision.is_else(by_line[10])
    assert findings == []  # each 12.x has its own branch: nothing is excluded


GUARDED_ELSE = """import torch


def grid():
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (12, 0):
        score_target_grid = 48
    elif torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        score_target_grid = 1056
    else:
        score_target_grid = 1
    return score_target_grid
"""


def test_an_else_after_conditions_with_other_parts_is_the_else_of_its_decision():
    """The ``else`` negates its siblings' whole conditions (``is_available() and …``), as their
    chains write them: one decision, a tuning table, one low finding on 12.1's route."""
    gates, findings = run("t.py", GUARDED_ELSE)
    by_line = {g.line: g for g in gates}
    decided = decisions(gates)
    (decision,) = {decided[g.id] for g in gates}
    assert decision.is_else(by_line[9]) and decision.route(T121) is by_line[9]
    assert [(f.rule, f.line) for f in findings] == [("ARCH012", 5)]


def test_two_separate_statements_are_two_decisions():
    text = "import torch\nmajor, minor = torch.cuda.get_device_capability()\n"
    text += "if major == 9:\n    a = 1\n" + "\n" * 8 + "if not (major == 9):\n    b = 2\n"
    gates, _ = run("t.py", text)
    decided = decisions(gates)
    assert len({decided[g.id].id for g in gates}) == 2


def test_an_if_group_routes_each_minor_to_its_branch():
    text = "#if __CUDA_ARCH__ == 1200\n  a();\n#elif __CUDA_ARCH__ == 1210\n  b();\n#else\n  c();\n#endif\n"
    gates, findings = run("k.cu", text)
    decided = decisions(gates)
    first = min(gates, key=lambda g: g.line)
    assert decided[first.id].route(T121).line == 3
    assert findings == []


def test_the_message_names_the_route_of_the_fallback():
    text = "#if __CUDA_ARCH__ == 1200\n  a();\n#else\n  c();\n#endif\n"
    _, (finding,) = run("k.cu", text)
    assert finding.rule == "ARCH003"
    assert "on 12.1 the decision takes the fallback `else` at line 3, while 12.0 takes this branch" in finding.message


def test_side_by_side_per_arch_constants_are_a_table():
    text = (
        "def flags():\n"
        '    sm120a = ["-gencode=arch=compute_120a,code=sm_120a"]\n'
        '    sm121a = ["-gencode=arch=compute_121a,code=sm_121a"]\n'
        "    return sm120a + sm121a\n"
    )
    gates, findings = run("jit.py", text)
    decided = decisions(gates)
    assert len(gates) == 2 and all(decided[g.id].table for g in gates)
    assert findings == []
    alone = 'def flags():\n    sm120a = ["-gencode=arch=compute_120a,code=sm_120a"]\n    return sm120a\n'
    assert [f.rule for f in run("jit.py", alone)[1]] == ["ARCH003"]


# Root causes -------------------------------------------------------------------------------


def gate(id: str, file: str, line: int, expression: str = "x", **kw) -> Gate:
    fields = dict(
        id=id, file=file, line=line, end_line=line, language="cuda", kind="preprocessor", expression=expression
    )
    return Gate(**(fields | {"domain": "target", "admits": ()} | kw))


def finding(g: Gate, rule: str = "ARCH001") -> Finding:
    return Finding(rule, "high", g.id, g.file, g.line, "m", input="t")


def test_identical_vendored_copies_are_one_finding_with_also():
    a = gate("a", "pkg/third_party/x/include/cutlass/arch/config.h", 10)
    b = gate("b", "pkg/other/cutlass/include/cutlass/arch/config.h", 10)
    own = gate("c", "pkg/csrc/config.h", 10)
    out = roots.fold([finding(a), finding(b), finding(own)], {g.id: g for g in (a, b, own)})
    assert len(out) == 2
    (copy,) = [f for f in out if f.also]
    assert copy.vendored and copy.also == (("pkg/third_party/x/include/cutlass/arch/config.h", 10),)
    assert "identical copies; also at" in copy.message
    assert [f.vendored for f in out if not f.also] == [""]


def test_uses_of_one_definition_are_one_finding_naming_the_root():
    defined = (Resolution("is_sm90_supported", "pkg/utils.py", 3),)
    uses = [
        gate(f"u{i}", f"pkg/m{i}.py", 5, "is_sm90_supported()", resolved_by="definition", resolutions=defined)
        for i in range(3)
    ]
    out = roots.fold([finding(g, "ARCH002") for g in uses], {g.id: g for g in uses})
    (one,) = out
    assert one.root == "`is_sm90_supported` (pkg/utils.py:3)"
    assert one.also == (("pkg/m1.py", 5), ("pkg/m2.py", 5))
    literal = [gate(f"l{i}", f"pkg/k{i}.cuh", 5, "__CUDA_ARCH__ < 1200") for i in range(2)]
    assert len(roots.fold([finding(g) for g in literal], {g.id: g for g in literal})) == 1  # one folder, one cause
    apart = [gate(f"a{i}", f"pkg/{d}/k.cuh", 5, "__CUDA_ARCH__ < 1200") for i, d in enumerate(("comm", "gemm"))]
    assert len(roots.fold([finding(g) for g in apart], {g.id: g for g in apart})) == 2  # two folders, two causes


def test_vendored_folders_come_from_data():
    assert roots.vendored("vllm/third_party/deep_gemm/include/cute/arch/config.hpp") == (
        "third_party",
        "cute/arch/config.hpp",
    )
    assert roots.vendored("flashinfer/jit/comm.py") == ("", "")


def test_a_bare_negation_of_a_test_for_the_target_is_the_path_for_the_rest():
    from tests.rules.test_engine import caps, gate, holds

    rest = caps(7, 8, 10, 11)  # `not self.is_xqa`, where is_xqa = is_sm90() or is_sm120()
    assert holds("negates_a_test_for_target", gate(rest, expression="not self.is_xqa_impl"))
    assert holds("negates_a_test_for_target", gate(rest, expression="!(USE_XQA)"))
    assert not holds("negates_a_test_for_target", gate(rest, expression="is_sm90() or is_sm100()"))
    assert not holds("negates_a_test_for_target", gate(rest, expression="not a and b"))
    assert not holds("negates_a_test_for_target", gate(rest, expression="not ok", guards="reject"))


def test_an_early_return_sequence_is_one_decision():
    text = (
        "import torch\n\n\ndef variant():\n    major, minor = torch.cuda.get_device_capability()\n"
        "    if major == 12 and minor == 0:\n        return 128\n"
        "    if major == 12 and minor == 1:\n        return 96\n    return 64\n"
    )
    gates, findings = run("t.py", text)
    decided = decisions(gates)
    assert len({decided[g.id].id for g in gates}) == 1 and findings == []
    overlapping = text.replace("major == 12 and minor == 1", "major >= 9")  # both may hold on 12.0: two decisions
    gates, findings = run("t.py", overlapping)
    assert len({decisions(gates)[g.id].id for g in gates}) == 2
    assert [f.rule for f in findings] == ["ARCH003"]


def test_a_later_statement_of_a_sequence_is_not_an_else():
    text = (
        "import torch\n\n\ndef tile():\n    major, minor = torch.cuda.get_device_capability()\n"
        "    if major == 9:\n        return 128\n    if major == 12:\n        return 96\n    return 64\n"
    )
    gates, _ = run("t.py", text)
    (decision,) = {decisions(gates)[g.id] for g in gates}
    assert [b.line for b in decision.branches] == [6, 8] and not decision.is_else(decision.branches[1])


def test_one_flag_at_several_uses_in_a_function_is_one_finding():
    uses = [
        gate(f"f{i}", "pkg/moe.py", 10 + i, "use_psum_layout", language="python", context="Experts.apply")
        for i in range(4)
    ]
    (one,) = roots.fold([finding(g, "ARCH002") for g in uses], {g.id: g for g in uses})
    assert one.line == 10 and len(one.also) == 3 and one.root == "the flag `use_psum_layout` in `Experts.apply`"
    elsewhere = [*uses[:1], gate("g", "pkg/moe.py", 90, "use_psum_layout", language="python", context="other")]
    assert len(roots.fold([finding(g, "ARCH002") for g in elsewhere], {g.id: g for g in elsewhere})) == 2


OLDER_THEN_NEWER = """import torch


def pick():
    major, minor = torch.cuda.get_device_capability()
    if major == 8:
        return ampere()
    elif major >= 9:
        return hopper_or_newer()
    elif major == 7:
        return volta()
"""


def test_a_later_branch_for_newer_devices_takes_the_target_from_a_branch_for_older_ones():
    gates, _ = run("t.py", OLDER_THEN_NEWER)
    by_line = {g.line: g for g in gates}
    decision = decisions(gates)[by_line[6].id]
    assert decision.route(T120) is by_line[8]
    assert decision.newer_branch_takes(by_line[6], T120)  # `major == 8`: the path for older devices
    assert not decision.newer_branch_takes(by_line[8], T120)  # the route itself
    assert not decision.newer_branch_takes(by_line[10], T120)  # the route is earlier


def test_a_later_fallback_shared_with_older_devices_is_not_a_newer_branch():
    text = "import torch\nmajor, minor = torch.cuda.get_device_capability()\n"
    text += "if major >= 9 and major < 12:\n    fast()\nelif major >= 8:\n    slow()\nelse:\n    slowest()\n"
    gates, _ = run("t.py", text)
    by_line = {g.line: g for g in gates}
    decision = decisions(gates)[by_line[3].id]
    assert decision.route(T120) is by_line[5]
    assert not decision.newer_branch_takes(by_line[3], T120)


PER_MAJOR = """import torch


def constraints(compute_capability):
    major, minor = compute_capability
    if major == 7:
        return 2, 2
    elif major == 8:
        return 4, 2
    elif major == 9 and minor >= 0:
        return 8, 8
    else:
        raise ValueError(f"Unsupported compute capability: {major}.{minor}")


def divide():
    return constraints(torch.cuda.get_device_capability())
"""


def test_an_else_that_raises_after_a_per_major_table_surely_rejects_what_the_table_leaves_out():
    """The ``else`` is taken wherever every branch is surely false: 12.x meets the ``raise``.
    ``minor >= 0`` is about 9.x (the major beside it), not a bound written at 12.0."""
    gates, findings = run("t.py", PER_MAJOR)
    (other,) = [g for g in gates if g.line == 12]
    assert {"12.0", "12.1", "10.0"} <= set(other.surely)
    (f,) = findings
    assert (f.rule, f.severity, f.line) == ("ARCH002", "high", 12)
    assert "this check rejects" in f.message


def test_a_per_major_table_with_a_general_else_is_no_list_that_omits_the_target():
    """The same table whose ``else`` is the general value: 12.x takes it, nothing is rejected,
    and a comparison chain is not read as a list (a legacy floor reads the same way)."""
    general = PER_MAJOR.replace('raise ValueError(f"Unsupported compute capability: {major}.{minor}")', "return 1, 1")
    _, findings = run("t.py", general)
    assert [f.rule for f in findings if f.rule == "ARCH002"] == []


NESTED_REJECTION = """import torch


def downgrade_for_legacy(config):
    if torch.cuda.get_device_capability()[0] < 8:
        config.dtype = torch.float16
        if torch.cuda.get_device_capability()[1] < 5:
            raise RuntimeError("only sm75 and above are supported")
"""


def test_a_rejection_inside_a_branch_for_older_parts_rejects_only_what_reaches_it():
    """``minor < 5`` is true on 12.0, but only 7.x gets past ``major < 8`` to the ``raise``."""
    gates, findings = run("t.py", NESTED_REJECTION)
    (inner,) = [g for g in gates if g.line == 7]
    assert inner.admits == ("7.0",) and inner.surely == ("7.0",)
    assert findings == []


def test_a_rejection_inside_a_branch_on_an_option_is_as_sure_as_it_was():
    """``if params is not None:`` is about the request, not the device: whoever uses the option
    on 12.x meets the ``raise``."""
    text = NESTED_REJECTION.replace("torch.cuda.get_device_capability()[0] < 8", "config.params is not None").replace(
        "torch.cuda.get_device_capability()[1] < 5", "torch.cuda.get_device_capability()[0] not in (9, 10)"
    )
    gates, _ = run("t.py", text)
    (inner,) = [g for g in gates if g.line == 7]
    assert {"12.0", "12.1"} <= set(inner.surely)


BLOCK_SIZE = """import torch

SAGE_BLOCK_SIZE = 128
SUBBLOCK_BLOCK_SIZE = 64


def _sage_key_block_size():
    if torch.cuda.get_device_capability() == (12, 0):
        return SUBBLOCK_BLOCK_SIZE
    return SAGE_BLOCK_SIZE
"""


def test_a_branch_that_returns_a_block_size_tunes():
    """The function answers a tuning value: 12.1 runs with the other one, no kernel is off."""
    gates, findings = run("t.py", BLOCK_SIZE)
    (g,) = [g for g in gates if g.line == 8]
    assert g.guards == "tune"
    assert [f.rule for f in findings] == ["ARCH012"]
    numbers = BLOCK_SIZE.replace("return SUBBLOCK_BLOCK_SIZE", "return 64").replace(
        "return SAGE_BLOCK_SIZE", "return 128"
    )
    assert [f.rule for f in run("t.py", numbers)[1]] == ["ARCH012"]
