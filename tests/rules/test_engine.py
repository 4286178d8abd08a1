"""The engine: predicates over evaluations, classification, suppressions, baseline, --fail-on."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from auditor import arch, cli, pipeline
from auditor import verdicts as meaning
from auditor.model import Feature, Gate, Guards, Resolution, SourceFile
from auditor.rules import engine, rulebook
from auditor.rules import vocabulary as predicates
from auditor.rules.vocabulary import GateView, Relatives
from auditor.verdicts import verdicts
from tests.conftest import FIXTURES

TARGETS = arch.parse_targets(arch.DEFAULT_TARGETS)
CAPS = arch.capabilities()


def gate(admits, domain="device", **kw) -> Gate:
    fields = dict(
        id="g",
        file="f.py",
        line=1,
        end_line=1,
        language="python",
        kind="capability-compare",
        expression="x",
        domain=domain,
        admits=tuple(admits),
    )
    return Gate(**(fields | kw))


def caps(*majors_or_caps) -> tuple[str, ...]:
    """Capabilities by major (``9``) or exactly (``"12.0"``)."""
    out = []
    for m in majors_or_caps:
        out += [c for c in CAPS if (c == m if isinstance(m, str) else c.split(".")[0] == str(m))]
    return tuple(out)


def holds(name: str, g: Gate, targets=TARGETS, relatives=Relatives()) -> bool:
    return predicates.PREDICATES[name](GateView(g, targets, relatives))


def targets_where(condition) -> tuple[str, ...]:
    return tuple(t for t in arch.target_order() if condition(arch.target_macros()[t].get("__CUDA_ARCH__", 0), t))


@pytest.mark.parametrize(
    "admits,expected",
    [
        (caps(9, 10, 11), True),  # major >= 9 and major < 12
        (caps(7, 8, 9, 10, 11), True),  # cap < (12, 0)
        (caps(7, 8), False),  # cap < (9, 0): a legacy path, not a bound at the target
        (caps(9, 10), False),  # ends at 10: no bound at 12 (an allow-list's business)
        (caps(9, 10, 11, "12.0"), False),  # reaches the target's major: a minor trap instead
        (caps(9, 10, 11, 12), False),  # admits the target
        ((), False),
    ],
)
def test_upper_bound_cuts_target(admits, expected):
    assert holds("upper_bound_cuts_target", gate(admits)) is expected


def test_upper_bound_in_the_target_domain():
    below_1200 = targets_where(lambda v, t: v < 1200)
    assert holds("upper_bound_cuts_target", gate(below_1200, domain="target"))
    assert not holds("upper_bound_cuts_target", gate(targets_where(lambda v, t: v < 800), domain="target"))


def test_minor_trap_names_the_older_minor_and_single_target():
    assert holds("minor_trap", gate(caps("12.0")))
    assert not holds("minor_trap", gate(caps("12.1"), expression="cap == (12, 1)"))  # names it: on purpose
    assert not holds("minor_singled_out", gate(caps("12.1"), expression="cap == (12, 1)"))
    # a flag that carries a split made elsewhere: 12.0 out, 12.1 in is the let-through, not the trap
    assert holds("minor_singled_out", gate(caps(9, 10, "12.1"), expression="ENABLE_FAST"))
    assert not holds("minor_trap", gate(caps(9, 10, "12.1"), expression="ENABLE_FAST"))
    # true on 12.1 alone: a test for that part (``tuned_for_gb10()``), whatever its name says
    assert not holds("minor_singled_out", gate(caps("12.1"), expression="ENABLE_FAST"))
    by_name = {
        c: gate(caps(c), guards=Guards.REJECT, surely=caps(c), expression=f"sm == {c.replace('.', '')}")
        for c in ("12.0", "12.1")
    }
    # `if sm == 120: return False` keeps 12.0 out and lets 12.1 through: ARCH010's question
    assert not holds("minor_trap", by_name["12.0"]) and holds("minor_singled_out", by_name["12.0"])
    # `if sm == 121: return False` is about GB10 itself: no trap, nothing let through by mistake
    assert not holds("minor_trap", by_name["12.1"]) and not holds("minor_singled_out", by_name["12.1"])
    # `if not is_device_capability((12, 0)): split_k = 1`: 12.0 keeps its tuning, 12.1 goes with the rest
    tuned = gate(tuple(c for c in CAPS if c != "12.0"), expression="current_platform.is_device_capability((12, 0))")
    assert holds("minor_singled_out", tuned) and not holds("minor_trap", tuned)
    # `if not FAST_OK: raise` where the flag passes 12.0 alone: the trap
    rejected = tuple(c for c in CAPS if c != "12.0")
    assert holds("minor_trap", gate(rejected, guards=Guards.REJECT, surely=rejected))
    assert not holds("minor_trap", gate(caps(12)))
    assert not holds(
        "minor_trap",
        gate(
            caps("12.0"),
        ),
        arch.parse_targets("12.0"),
    )  # 12.0 alone is admitted
    assert holds("minor_trap", gate(targets_where(lambda v, t: v == 1200), domain="target"))


def test_several_generations_and_below_above():
    g = gate(caps(9, 10))
    assert holds("several_generations", g) and holds("admits_below_target", g) and not holds("admits_above_target", g)
    assert not holds("several_generations", gate(caps(10)))
    assert not holds("several_generations", gate(caps(10, 11)))  # datacenter Blackwell: one generation
    assert holds("admits_above_target", gate(caps(9)), arch.parse_targets("8.0"))


def test_feature_family_and_dead():
    assert holds("feature_family", gate(("sm_90a",), domain="target"))
    assert holds("feature_family", gate(("sm_100a", "sm_100f", "sm_103a", "sm_103f"), domain="target"))
    assert not holds("feature_family", gate(("sm_90", "sm_90a"), domain="target"))
    assert not holds("feature_family", gate(caps(9)))
    assert holds("dead", gate((), domain="target"))
    assert holds("dead", gate(("host",), domain="target"))
    assert not holds("dead", gate(("sm_75", "host"), domain="target"))


def test_dead_only_where_the_branch_itself_dies():
    """Not inside a dead branch, and not a host-only #else whose siblings take every device target."""
    outer = gate((), domain="target", id="o", line=1, chain=("A",), body_lines=(2, 9))
    inner = gate((), domain="target", id="i", line=3, chain=("A", "B"))
    assert holds("dead", outer)
    assert not holds("dead", inner, relatives=predicates.relatives([outer, inner])[inner.id])
    first = gate(arch.target_order()[1:], domain="target", id="a", line=1, chain=("X",))
    host_else = gate(("host",), domain="target", id="b", line=3, chain=("!(X)",))
    assert not holds("dead", host_else, relatives=predicates.relatives([first, host_else])[host_else.id])


def test_relatives_from_chains():
    """Earlier siblings and enclosing gates, found in C (``!(c)``) and Python (``not (c)``) chains."""
    a = gate(caps(10), id="a", line=3, chain=("E", "major >= 10"), body_lines=(4, 4))
    b = gate(caps(9), id="b", line=5, chain=("E", "not (major >= 10)", "major == 9"), body_lines=(6, 6))
    c = gate(caps(7, 8), id="c", line=7, chain=("E", "not (major >= 10)", "not (major == 9)"), body_lines=(8, 8))
    e = gate(CAPS, id="e", line=1, chain=("E",), body_lines=(2, 9))
    other = gate(caps(10), id="x", line=20, file="other.py", chain=("E", "major >= 10"))
    rel = predicates.relatives([c, b, a, e, other])
    assert [g.id for g in rel["c"].earlier] == ["a", "b"]
    assert [g.id for g in rel["b"].earlier] == ["a"] and [g.id for g in rel["b"].enclosing] == ["e"]
    assert "a" not in rel or rel["a"].earlier == ()
    assert "x" not in rel


def test_earlier_branch_takes_target():
    first = gate(targets_where(lambda v, t: v >= 1000), domain="target", id="a", line=1, chain=("X",))
    fallback = gate(targets_where(lambda v, t: v < 1000), domain="target", id="b", line=3, chain=("!(X)",))
    rel = predicates.relatives([first, fallback])
    assert holds("earlier_branch_takes_target", fallback, relatives=rel["b"])
    assert not holds("earlier_branch_takes_target", fallback)


def test_admits_beyond_name():
    """What the names in the condition promise, together, against what the definitions admit."""
    beyond = predicates.FIELDS["beyond_name"]

    def call(admits, expression="is_sm100_supported()"):
        return gate(admits, expression=expression, kind="predicate-call", name_implies=("10.0",))

    assert holds("admits_beyond_name", call(caps(10, 11, 12)))
    assert beyond(GateView(call(caps(10, 12)), TARGETS)) == "12.0, 12.1"
    assert not holds("admits_beyond_name", call(caps(10)))  # 10.3: the sm100 family
    assert not holds("admits_beyond_name", gate(caps(10, 12), expression="is_sm100_supported()"))  # nothing differs
    assert not holds(
        "admits_beyond_name", call(tuple(c for c in CAPS if not c.startswith("10.")), "not is_sm100_supported()")
    )
    both = call(caps(9, 10), "is_sm90_supported() or is_sm100_supported()")
    assert not holds("admits_beyond_name", both)  # 9.0 is what the other name promises
    assert predicates.FIELDS["name_implies"](GateView(both, TARGETS)) == "9.0, 10.0"
    assert not holds("admits_beyond_name", call(caps(9, 10), "apply_allreduce_fusion(n)"))  # no name to read
    # `UE8M0` where UE8M0 = ENABLED and (get_platform().is_sm100 or sm == 120): the flag tests the
    # capability itself beside the name, so it promises what it tests, not what the name says
    unread = gate(caps(9, 10, 11, 12), expression="use_mx and UE8M0", kind="predicate-call", name_implies=("10.0",))
    flag = Resolution("UE8M0", "c.py", 3, "ENABLED and (get_platform().is_sm100 or get_device_sm() == 120)")
    unread = replace(unread, resolved_by="definition")
    assert not holds("admits_beyond_name", replace(unread, resolutions=(flag,)))
    alias = Resolution("UE8M0", "c.py", 3, "ENABLED and get_platform().is_sm100")
    assert holds("admits_beyond_name", replace(unread, resolutions=(alias,)))
    assert not holds("admits_beyond_name", replace(unread, resolutions=(alias,), unknowns=("get_platform().is_sm100",)))
    # `use` where use = is_blackwell or hopper_ok: the flag it names in turn names 9.0 itself
    nested = replace(unread, expression="use and x")
    use = Resolution("use", "c.py", 5, "use = is_blackwell or hopper_ok")
    hopper_ok = Resolution("hopper_ok", "c.py", 4, "hopper_ok = is_sm90 and rows == 1")
    assert holds("admits_beyond_name", replace(nested, resolutions=(use,)))
    assert not holds("admits_beyond_name", replace(nested, resolutions=(use, hopper_ok)))


def test_reject_guards_turn_away_what_they_certainly_reject():
    """``if cap[0] not in [9, 10]: raise`` admits the raise on 7.x, 8.x, 11.x, 12.x: 12.x is turned away."""
    off_9_10 = tuple(c for c in CAPS if c.split(".")[0] not in ("9", "10"))
    reject = gate(off_9_10, guards="reject", surely=off_9_10)
    assert GateView(reject, TARGETS).excluded == TARGETS
    assert GateView(reject, TARGETS).capabilities == caps(9, 10)
    # the JSON verdicts say the same: the guarded code cannot run on 12.x
    assert verdicts(reject, TARGETS) == {"12.0": "excludes", "12.1": "excludes"}
    below_12 = tuple(c for c in CAPS if not c.startswith("12."))
    lets_12_in = gate(below_12, guards="reject", surely=below_12)
    assert GateView(lets_12_in, TARGETS).excluded == ()
    assert verdicts(lets_12_in, TARGETS) == {"12.0": "admits", "12.1": "admits"}
    # the rejection also depends on a dtype: it is certain nowhere
    maybe = gate(CAPS, guards="reject", unknowns=("query.dtype",))
    assert GateView(maybe, TARGETS).excluded == () and not holds("dead", maybe)
    # ``if not is_sm100_supported(): raise`` where the predicate also checks the toolkit:
    # the rejection may happen anywhere, and happens for sure off 10.x
    toolkit = gate(
        CAPS,
        guards="reject",
        unknowns=("torch.version.cuda >= '12.8'",),
        surely=tuple(c for c in CAPS if not c.startswith("10.")),
    )
    assert GateView(toolkit, TARGETS).excluded == TARGETS
    assert verdicts(toolkit, TARGETS) == {"12.0": "excludes", "12.1": "excludes"}
    # a condition on a value the evaluator could not pin down on any capability (no unknown
    # listed, nothing certain): the rejection may happen anywhere and is certain nowhere
    unpinned = gate(CAPS, guards="reject", surely=())
    assert GateView(unpinned, TARGETS).excluded == () and not holds("dead", unpinned)


def feature(token, **on):
    return Feature(
        token=token,
        line=2,
        feature=token,
        min_arch="sm_90",
        on_target=tuple((cap.replace("_", "."), v) for cap, v in on.items()),
    )


@pytest.mark.parametrize(
    "features,expected",
    [
        ((), "unknown"),
        ((feature("cudaGridDependencySynchronize", **{"12_0": "yes", "12_1": "yes"}),), "conservative"),
        ((feature("setmaxnreg", **{"12_0": "sm_120a-only", "12_1": "sm_121a-only"}),), "conservative"),
        (
            (
                feature("griddepcontrol.wait", **{"12_0": "yes", "12_1": "yes"}),
                feature("wgmma.fence", **{"12_0": "no", "12_1": "no"}),
            ),
            "hardware",
        ),
        ((feature("odd", **{"12_0": "n.a.", "12_1": "yes"}),), "unknown"),
        ((feature("cudaGridDependencySynchronize"),), "unknown"),  # no column for the target
    ],
)
def test_classification(features, expected):
    g = gate(caps(9, 10, 11), features=features)
    assert meaning.classify(g, TARGETS) == expected
    assert meaning.classify(gate(CAPS, features=features), TARGETS) == ""  # admits the target


def test_wgmma_region_gated_to_sm90a_is_hardware(capsys):
    """A real tree: a derived macro defined only for sm_90a guards wgmma (and a portable PDL wait)."""
    tree = FIXTURES / "rules" / "trees" / "sm90a_wgmma"
    assert cli.main(["scan", str(tree), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (g,) = [g for g in doc["gates"] if g["file"] == "gemm.cu" and g["line"] == 4]
    assert g["admits"] == ["sm_90a"] and g["kind"] == "derived-macro"
    assert {f["token"] for f in g["features"]} == {"wgmma.fence.sync.aligned", "griddepcontrol.wait"}
    assert g["classification"] == "hardware"
    assert not any(f["rule"] == "ARCH007" for f in doc["findings"])
    (else_branch,) = [g for g in doc["gates"] if g["file"] == "gemm.cu" and g["line"] == 7]
    assert else_branch["classification"] is None  # admits 12.x


# Suppressions ---------------------------------------------------------------------------

ALLREDUCE = FIXTURES / "rules" / "trees" / "allreduce"


def run(files, **options):
    opts = pipeline.Options(jobs=1, **options)
    return pipeline.audit_input(files, "t", opts)[1]


def src(path, text):
    return SourceFile(path, text.encode(), "python" if path.endswith(".py") else "cuda", "t")


GUARD = "#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && (__CUDA_ARCH__ < 1200)"


def test_suppression_on_the_gate_line_and_the_line_above():
    plain = src("a.cuh", f"{GUARD}\n  cudaGridDependencySynchronize();\n#endif\n")
    assert {f.rule for f in run([plain])} == {"ARCH001"}  # ARCH007 yields to it: one finding per gate
    same_line = src("a.cuh", f"{GUARD}  // archaudit: ignore[ARCH001]\n  cudaGridDependencySynchronize();\n#endif\n")
    assert run([same_line]) == []
    alone = src("a.cuh", f"{GUARD}  // archaudit: ignore[ARCH001]\n  cudaGridDependencySynchronize();\n#endif\n")
    assert {f.rule for f in run([alone], select=("ARCH007",))} == {"ARCH007"}  # nothing to yield to
    above = src(
        "a.cuh", f"// archaudit: ignore[ARCH001, ARCH007]\n{GUARD}\n  cudaGridDependencySynchronize();\n#endif\n"
    )
    assert run([above]) == []
    every_rule = src("a.cuh", f"// archaudit: ignore\n{GUARD}\n  cudaGridDependencySynchronize();\n#endif\n")
    assert run([every_rule]) == []
    python = src(
        "m.py",
        "import torch\nmajor, minor = torch.cuda.get_device_capability()\n"
        "# archaudit: ignore[ARCH001]\nif major >= 9 and major < 12:\n    x = 1\n",
    )
    assert run([python]) == []


def test_unused_suppressions_are_reported_as_info():
    text = (
        f"// archaudit: ignore[ARCH003]\n{GUARD}\n  cudaGridDependencySynchronize();\n#endif\n"
        "// archaudit: ignore[ARCH005]\nint x;\n"
    )
    found = run([src("a.cuh", text)])
    unused = [f for f in found if f.rule == engine.UNUSED_SUPPRESSION]
    assert [(f.line, f.severity) for f in unused] == [(1, "info"), (5, "info")]
    assert {f.rule for f in found} == {"ARCH001", engine.UNUSED_SUPPRESSION}
    assert not any(f.rule == engine.UNUSED_SUPPRESSION for f in run([src("a.cuh", text)], ignore=("ARCH000",)))
    # a suppression for a rule that --select turned off is not "unused"
    assert [f.rule for f in run([src("a.cuh", text)], select=("ARCH001",))] == ["ARCH001"]


# Baseline and exit codes ----------------------------------------------------------------


def scan_json(capsys, *args) -> tuple[int, dict]:
    code = cli.main(["scan", *args, "--format", "json", "--no-cache"])
    return code, json.loads(capsys.readouterr().out)


def test_baseline_round_trip(tmp_path, capsys):
    tree = tmp_path / "tree"
    shutil.copytree(ALLREDUCE, tree)
    base = tmp_path / "baseline.json"
    _, first = scan_json(capsys, str(tree), "--write-baseline", str(base))
    assert first["findings"] and json.loads(base.read_text())["schema"] == engine.BASELINE_SCHEMA
    assert len(json.loads(base.read_text())["findings"]) == len(first["findings"])
    _, again = scan_json(capsys, str(tree), "--baseline", str(base))
    assert again["findings"] == []
    header = tree / "csrc" / "allreduce.cuh"
    header.write_text("// moved down by a licence header\n// and another line\n\n" + header.read_text())
    _, moved = scan_json(capsys, str(tree), "--baseline", str(base))
    assert moved["findings"] == []
    (tree / "csrc" / "extra.cuh").write_text(
        "__device__ int rows() {\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 1200\n  return 64;\n#endif\n  return 32;\n}\n"
    )
    _, added = scan_json(capsys, str(tree), "--baseline", str(base))
    assert [(f["rule"], f["file"], f["line"]) for f in added["findings"]] == [("ARCH003", "csrc/extra.cuh", 2)]


def test_bad_baseline_is_one_line(tmp_path, capsys):
    bad = tmp_path / "b.json"
    bad.write_text("[1, 2]")
    assert cli.main(["scan", str(ALLREDUCE), "--baseline", str(bad), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an archaudit-baseline/1 file" in err
    assert cli.main(["scan", str(ALLREDUCE), "--baseline", str(tmp_path / "missing.json"), "--no-cache"]) == 2
    assert "cannot read baseline" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,code",
    [
        ([], 0),
        (["--fail-on", "high"], 1),
        (["--fail-on", "medium"], 1),
        (["--fail-on", "high", "--ignore", "ARCH001,ARCH002"], 0),
        (["--fail-on", "medium", "--ignore", "ARCH001,ARCH002"], 1),
        (["--fail-on", "high", "--select", "ARCH007"], 0),
        (["--fail-on", "info", "--select", "ARCH004"], 0),
        (["--select", "ARCH999"], 2),
        (["--ignore", "nope"], 2),
    ],
)
def test_fail_on_exit_codes(args, code, capsys):
    assert cli.main(["scan", str(ALLREDUCE), "--no-cache", "--format", "json", *args]) == code
    if code == 2:
        assert "unknown rule id" in capsys.readouterr().err


def test_findings_are_sorted_and_carry_classification_and_confidence(capsys):
    _, doc = scan_json(capsys, str(ALLREDUCE))
    keys = [(f["file"], f["line"], f["rule"]) for f in doc["findings"]]
    assert keys == sorted(keys)
    by_rule = {(f["rule"], f["file"], f["line"]): f for f in doc["findings"]}
    pdl = by_rule[("ARCH001", "csrc/allreduce.cuh", 5)]
    assert pdl["classification"] == "conservative" and pdl["confidence"] == "high"
    assert "`cudaGridDependencySynchronize` (12.0: yes, 12.1: yes)" in pdl["message"]
    assert ("ARCH007", "csrc/allreduce.cuh", 5) not in by_rule  # ARCH001 says it, and more
    assert by_rule[("ARCH002", "pkg/jit/comm.py", 6)]["classification"] == "unknown"
    gates = {(g["file"], g["line"]): g for g in doc["gates"]}
    assert gates[("csrc/allreduce.cuh", 5)]["classification"] == "conservative"
    assert gates[("csrc/arch.h", 2)]["classification"] is None


def test_rule_messages_render_every_field():
    """Every message field renders for a gate of each domain, and no rule leaves a placeholder."""
    gates = [
        gate(caps(9, 10, 11), id="a", expression="is_sm90_supported()", name_implies=("9.0",)),
        gate(
            ("sm_90a",),
            domain="target",
            id="b",
            language="cuda",
            kind="preprocessor",
            features=(feature("wgmma.fence", **{"12_0": "no", "12_1": "no"}),),
        ),
    ]
    for g in gates:
        view = GateView(g, TARGETS)
        assert all(f(view) for name, f in predicates.FIELDS.items() if name not in predicates.CLAUSES)
    found = engine.match(rulebook.builtin(), gates, TARGETS)
    assert {f.rule for f in found} == {"ARCH001", "ARCH004", "ARCH005"}
    assert all("{" not in f.message for f in found)


def test_code_one_toolkit_admits_is_not_dead():
    """12.9's sm_101 (renamed sm_110 in 13.0), or a toolkit test: the newest toolkit admits
    nothing, an older one does, so the code needs that toolkit; it is not dead."""
    only_129 = gate((), domain="target", language="cuda", kind="derived-macro", toolkits=(("sm_100a", ("12.9",)),))
    assert not holds("dead", only_129)
    assert holds("dead", gate((), domain="target", language="cuda", kind="preprocessor"))


def test_a_host_arm_is_the_host_path_not_dead_code():
    """CCCL's dispatch ``NV_PROVIDES_SM_70 … NV_IS_HOST``: the host arm is the host path even
    where no earlier arm takes a target (CUDA 12.x still builds sm_60); a value test that only
    the host passes (``__CUDA_ARCH__ < 500``) is still dead device code."""
    earlier = gate(targets_where(lambda v, t: v >= 700), domain="target", id="e", line=1, chain=("NV_PROVIDES_SM_70",))
    host_arm = gate(("host",), domain="target", id="h", line=3, chain=("!NV_PROVIDES_SM_70", "!defined(__CUDA_ARCH__)"))
    rel = predicates.relatives([earlier, host_arm])
    assert not holds("dead", host_arm, relatives=rel.get("h", Relatives()))
    legacy = gate(("host",), domain="target", id="l", line=3, chain=("!NV_PROVIDES_SM_70", "__CUDA_ARCH__ < 500"))
    assert holds("dead", legacy, relatives=predicates.relatives([earlier, legacy]).get("l", Relatives()))


def test_a_carve_out_that_names_the_target_is_written_about_it():
    """``not is_device_capability_family(120)`` in the condition, in its effective form, or in the
    definition of the flag it tests: the target is left out on purpose."""
    below_12 = caps(9, 10, 11)
    carve = "has_device_capability(90) and not is_device_capability_family(120)"
    assert holds("names_the_target", gate(below_12, expression=carve))
    flag = Resolution("use_topk", "f.py", 1, f"use_topk = n <= 64 and {carve}")
    assert holds("names_the_target", gate(below_12, expression="use_topk", resolutions=(flag,)))
    assert not holds("names_the_target", gate(below_12, expression="use_topk"))
    assert not holds("names_the_target", gate(below_12, expression="major >= 9 and major < 12"))
    # `heads < 64 and capability not in ((12, 0), (12, 1))`: 12.x kept from a path on purpose
    tuple_out = "heads < 64 and capability not in ((12, 0), (12, 1))"
    assert holds("names_the_target", gate(below_12, expression=tuple_out))
    assert holds("names_the_target", gate(below_12, expression="sm not in [120, 121]"))
    assert not holds("names_the_target", gate(below_12, expression="major not in (9, 10)"))


def test_a_flag_that_names_the_target_carries_the_name_to_its_uses():
    """``is_xqa = is_sm90_supported() or is_sm120_supported()`` routes 12.x to its own kernel on
    purpose: the rejection on the flag, and a flag one level further (``fused = fp8 and not
    is_xqa``), are written about 12.x, not lists that forgot it."""
    utils = (
        "import torch\n\n\ndef is_sm90_supported():\n    return torch.cuda.get_device_capability()[0] == 9\n"
        "\n\ndef is_sm120_supported():\n    return torch.cuda.get_device_capability()[0] == 12\n"
    )
    backend = (
        "from pkg.utils import is_sm90_supported, is_sm120_supported\n\n\nclass Backend:\n"
        "    def __init__(self):\n        self.is_xqa = is_sm90_supported() or is_sm120_supported()\n\n"
        "    def verify(self):\n        if self.is_xqa:\n            raise NotImplementedError('needs trtllm-gen')\n\n"
        "    def forward(self, q, fp8):\n        fused = fp8 and not self.is_xqa\n"
        "        if fused:\n            q = q.half()\n        return q\n"
    )
    named = run([src("pkg/utils.py", utils), src("pkg/backend.py", backend)])
    assert named == []
    anonymous = utils.replace("is_sm120_supported", "has_fast_decode")  # a name that promises nothing
    unnamed = run(
        [
            src("pkg/utils.py", anonymous),
            src("pkg/backend.py", backend.replace("is_sm120_supported", "has_fast_decode")),
        ]
    )
    assert {(f.rule, f.line) for f in unnamed} == {("ARCH002", 9), ("ARCH002", 14)}


def test_a_negation_of_a_test_for_the_target_is_the_path_for_the_rest():
    nested = "not (platform.is_cuda() and platform.is_device_capability((12, 0)))"
    rest = tuple(c for c in CAPS if c != "12.0")
    assert holds("negates_a_test_for_target", gate(rest, expression="x", chain=(nested,)))
    assert not holds("negates_a_test_for_target", gate(rest, expression="not a and b"))


def test_code_written_for_other_architectures():
    """A gate in a path named for other architectures (``fmha_sm100/``, ``sm90_gemm.hpp``) turns
    nothing away; in one named for the target's own generation it still does."""
    cut = caps(9, 10, 11)
    assert holds("own_architecture", gate(cut, file="third_party/fmha_sm100/csrc/api.cpp"))
    assert holds("own_architecture", gate(caps(9), file="cutlass/gemm/kernel/sm90_gemm_tma.hpp"))
    assert not holds("own_architecture", gate(cut, file="pkg/ops/attention.py"))
    assert not holds("own_architecture", gate(caps("12.0"), file="kda_kernels/sm120_fp8.py"))
