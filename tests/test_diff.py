"""``archaudit diff``: matching gates across two sides, root causes, reports and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from auditor import arch, diff, fingerprint
from auditor.cli import main
from auditor.model import AuditResult, Finding, Gate, InputInfo, Resolution
from auditor.pipeline import Options, audit
from auditor.render import diff as render
from tests.conftest import FIXTURES

TARGETS = arch.parse_targets("12.0,12.1")
MOVED = FIXTURES / "diff" / "moved"
DEFINITION = FIXTURES / "diff" / "definition"


def gate(
    file: str,
    line: int,
    expression: str,
    admits=("9.0", "10.0"),
    context: str = "",
    kind: str = "capability-compare",
    ordinal: int = 0,
    resolutions=(),
    domain: str = "device",
    body=(0, 0),
) -> Gate:
    """A gate as an extractor would record it, with its fingerprint."""
    return Gate(
        id=fingerprint.gate_id(file, kind, context, expression, ordinal),
        file=file,
        line=line,
        end_line=line,
        language="python",
        kind=kind,
        expression=expression,
        domain=domain,
        admits=tuple(admits),
        resolutions=tuple(resolutions),
        context=context,
        body_lines=body,
    )


def result(*gates: Gate, findings=(), path: str = "side") -> AuditResult:
    """An audit result holding exactly these gates."""
    return AuditResult(
        tool_version="test", targets=TARGETS, inputs=(InputInfo(path, "dir"),), gates=gates, findings=tuple(findings)
    )


def statuses(d: diff.DiffResult) -> list[tuple[str, str, int, str]]:
    return [(c.status, c.gate.file, c.gate.line, c.gate.expression) for c in d.changes]


# -- matching ------------------------------------------------------------------------------


def test_moved_gates_in_fixture_dirs_are_not_changes():
    old, new = audit([str(MOVED / "old")]), audit([str(MOVED / "new")])
    assert {g.file for g in old.gates} == {"pkg/comm.cuh", "pkg/jit.py"}
    # The gates really moved: same files, other lines.
    assert sorted(g.line for g in old.gates) != sorted(g.line for g in new.gates)
    d = diff.compare(old, new)
    assert d.changes == () and d.definitions == ()
    assert d.unchanged == len(old.gates) == 3


def test_identical_gate_inserted_before_its_twin_is_the_one_added():
    x = gate("m.py", 2, "major >= 8", context="f")
    twin = gate("m.py", 10, "cap[0] >= 9", context="f")
    inserted = gate("m.py", 1, "cap[0] >= 9", context="f")
    # By ordinals the new first twin would take the old twin's id; alignment with the
    # neighbour between them finds the one really inserted.
    assert inserted.id == twin.id
    d = diff.compare(
        result(x, twin), result(inserted, replace(x, line=5), gate("m.py", 12, "cap[0] >= 9", context="f", ordinal=1))
    )
    assert statuses(d) == [("added", "m.py", 1, "cap[0] >= 9")]
    assert d.unchanged == 2


def test_gate_moved_past_another_gate_is_matched():
    a, b = gate("m.py", 3, "major >= 9", context="f"), gate("m.py", 9, "major >= 10", context="g")
    moved_a, moved_b = replace(a, line=20), replace(b, line=4)
    d = diff.compare(result(a, b), result(moved_b, moved_a))
    assert d.changes == () and d.unchanged == 2


def test_condition_edited_in_its_function_is_rewritten_with_verdict_delta():
    old = result(
        gate("m.py", 3, "major == 12 and minor == 0", admits=("12.0",), context="is_x"),
        gate("m.py", 9, "major >= 9", context="other"),
    )
    new = result(
        gate("m.py", 3, "major == 12", admits=("12.0", "12.1"), context="is_x"),
        gate("m.py", 9, "major >= 9", context="other"),
    )
    d = diff.compare(old, new)
    [c] = d.changes
    assert (c.status, c.how, c.old.expression, c.new.expression) == (
        "changed",
        "rewritten",
        "major == 12 and minor == 0",
        "major == 12",
    )
    assert c.delta == ("now admits 12.1",)
    assert [(v.target, v.before, v.after) for v in c.verdicts] == [
        ("12.0", "admits", "admits"),
        ("12.1", "excludes", "admits"),
    ]


def test_unrelated_gates_in_one_file_are_added_and_removed_not_rewritten():
    old = result(
        gate("k.cuh", 3, "__CUDA_ARCH__ >= 900", kind="preprocessor", domain="target", admits=("sm_90",)),
        gate("k.cuh", 9, "__CUDA_ARCH__ >= 700", kind="preprocessor", domain="target", admits=("sm_75",)),
        gate("k.cuh", 30, "__CUDA_ARCH__ >= 800", kind="preprocessor", domain="target", admits=("sm_80",)),
    )
    new = result(
        gate("k.cuh", 9, "__CUDA_ARCH__ >= 700", kind="preprocessor", domain="target", admits=("sm_75",)),
        gate("k.cuh", 30, "__CUDA_ARCH__ >= 1000", kind="preprocessor", domain="target", admits=("sm_100",)),
    )
    d = diff.compare(old, new)
    # Line 3 vanished above the kept gate; line 30 was edited in place after it.
    assert sorted((c.status, c.how, c.gate.line) for c in d.changes) == [
        ("changed", "rewritten", 30),
        ("removed", "", 3),
    ]


def test_versioned_top_folder_and_wheel_data_are_ignored_when_matching():
    old = result(gate("pkg-1.0/pkg/a.py", 4, "major >= 9"), gate("pkg-1.0/pkg/b.py", 4, "major >= 8"))
    new = result(gate("pkg-1.1/pkg/a.py", 6, "major >= 9"), gate("pkg-1.1/pkg/b.py", 4, "major >= 8"))
    assert diff.compare(old, new).changes == ()
    wheel = result(gate("pkg-2.0.data/purelib/pkg/a.py", 4, "major >= 9"))
    assert diff.compare(result(gate("pkg/a.py", 1, "major >= 9")), wheel).changes == ()
    assert diff.top_prefix(["python-3/x.py", "python-3/y.py"]) == "python-3/"
    assert diff.top_prefix(["src/x.py", "src/y.py"]) == ""


def test_added_and_removed_gates_carry_verdict_deltas():
    upper = gate(
        "k.cuh", 5, "__CUDA_ARCH__ < 1200", kind="preprocessor", domain="target", admits=("host", "sm_90", "sm_100")
    )
    d = diff.compare(result(), result(upper))
    [c] = d.changes
    assert c.status == "added" and c.delta == ("newly excludes 12.0", "newly excludes 12.1") and c.newly_excludes
    d = diff.compare(result(upper), result())
    # A removed gate is not "now admits": its code may be gone with it (issue 21).
    assert d.changes[0].status == "removed" and d.changes[0].delta == ()


def test_only_new_findings_on_newly_excluding_gates_count():
    g_old = gate("m.py", 3, "major < 12", admits=("9.0", "10.0"), context="f")
    g_new = replace(g_old, line=5)
    known = Finding(rule="ARCH001", severity="high", gate=g_old.id, file="m.py", line=3, message="m")
    again = replace(known, line=5)
    added = gate("m.py", 9, "major in (9, 10)", admits=("9.0", "10.0"), context="g")
    fresh = Finding(rule="ARCH002", severity="high", gate=added.id, file="m.py", line=9, message="m")
    d = diff.compare(result(g_old, findings=[known]), result(g_new, added, findings=[again, fresh]))
    assert d.findings == (fresh,)
    assert [c.gate.line for c in d.changes] == [9]


# -- definitions ---------------------------------------------------------------------------


def test_predicate_definition_change_is_reported_once_with_its_call_sites():
    old_d, new_d = audit([str(DEFINITION / "old")]), audit([str(DEFINITION / "new")])
    d = diff.compare(old_d, new_d)
    by_name = {dc.name: dc for dc in d.definitions}
    assert set(by_name) == {"is_sm120f_supported", "PKG_TMA_ENABLED"}

    pred = by_name["is_sm120f_supported"]
    assert pred.file == "pkg/utils.py"
    [inside] = pred.body
    assert (inside.old.expression, inside.new.expression) == ("major == 12 and minor == 0", "major == 12")
    assert inside.delta == ("now admits 12.1",)
    [site] = pred.call_sites
    assert (site.status, site.how, site.gate.file, site.gate.line) == ("changed", "admits", "pkg/attention.py", 7)
    assert site.gate.expression == "is_sm120f_supported(device)"
    assert site.delta == ("now admits 12.1",) and site.causes == (pred.key,)

    macro = by_name["PKG_TMA_ENABLED"]
    assert "< 1200" in macro.old_detail and "< 1200" not in macro.new_detail
    assert [c.gate.line for c in macro.body] == [2]
    assert sorted((c.gate.line, c.delta) for c in macro.call_sites) == [
        (5, ("now admits 12.0", "now admits 12.1")),
        (7, ("newly excludes 12.0", "newly excludes 12.1")),
    ]
    # Shown under their definitions, not again on their own.
    assert all(c.explained for c in d.changes)
    assert d.by_status("changed") == ()

    text = render.render_text(d)
    assert text.count("definition changed: is_sm120f_supported") == 1
    assert text.count("pkg/attention.py:7") == 1


def test_cosmetic_change_to_a_definition_line_is_not_a_root_cause():
    res = Resolution("get_cc", "u.py", 3, "def get_cc(d):")
    old = result(gate("m.py", 5, "get_cc(d)[0] >= 9", resolutions=[res], context="f"))
    new = result(
        gate("m.py", 5, "get_cc(d)[0] >= 9", resolutions=[replace(res, detail="def get_cc(d: int):")], context="f")
    )
    d = diff.compare(old, new)
    assert d.changes == () and d.definitions == ()


# -- reports -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def definition_diff() -> diff.DiffResult:
    return diff.compare(audit([str(DEFINITION / "old")]), audit([str(DEFINITION / "new")]))


def test_json_report_schema_and_fields(definition_diff):
    doc = json.loads(render.render_json(definition_diff))
    assert doc["schema"] == "archaudit-diff/1"
    assert doc["targets"] == ["12.0", "12.1"]
    assert doc["summary"]["changed"] == 5 and doc["summary"]["definitions"] == 2
    pred = next(x for x in doc["definitions"] if x["name"] == "is_sm120f_supported")
    assert [(s["file"], s["line"], s["delta"]) for s in pred["call_sites"]] == [
        ("pkg/attention.py", 7, ["now admits 12.1"])
    ]
    change = next(c for c in doc["changes"] if c["file"] == "pkg/attention.py")
    assert change["verdicts"]["12.1"] == {"before": "excludes", "after": "admits"}
    assert change["old"]["admits"] == ["12.0"] and change["new"]["admits"] == ["12.0", "12.1"]
    assert render.render_json(definition_diff) == render.render_json(definition_diff)


def test_markdown_and_html_escape_and_show_root_cause(definition_diff):
    md = render.render_markdown(definition_diff)
    assert not md.startswith(render.MARKER)  # only the pr comment carries the marker
    assert "#### Definition changed: `is_sm120f_supported`" in md
    assert "`major == 12 and minor == 0` admits 12.0 → `major == 12` admits 12.0, 12.1" in md
    pr = render.render_markdown(replace(definition_diff, mode="pr"))
    assert pr.startswith("<!-- archaudit -->\n")
    html = render.render_html(definition_diff)
    assert html.startswith("<!DOCTYPE html>") and "is_sm120f_supported" in html
    assert "!(defined(PKG_TMA_ENABLED))" in html and "&amp;&amp;" in html  # autoescaped


def test_hostile_expression_stays_text_in_markdown_and_html():
    evil = gate("m.py", 3, "x | `y` <script>alert(1)</script>", admits=("9.0",), context="f")
    d = diff.compare(result(), result(evil))
    md = render.render_markdown(d)
    span = "``x \\| `y` <script>alert(1)</script>``"  # a code span: GitHub shows it as text
    assert span in md and "<script>" not in md.replace(span, "")
    page = render.render_html(d)
    assert "<script>alert" not in page and "alert(1)" in page, "the condition is page data, not markup"


def test_sarif_lists_only_new_findings_on_newly_excluding_gates():
    upper = gate("k.cuh", 5, "__CUDA_ARCH__ < 1200", kind="preprocessor", domain="target", admits=("host", "sm_90"))
    f = Finding(rule="ARCH001", severity="high", gate=upper.id, file="k.cuh", line=5, message="cuts 12.0")
    old_f = gate("k.cuh", 40, "__CUDA_ARCH__ >= 1000", kind="preprocessor", domain="target", admits=("sm_100",))
    stale = Finding(rule="ARCH002", severity="high", gate=old_f.id, file="k.cuh", line=40, message="old")
    d = diff.compare(result(old_f, findings=[stale]), result(upper, old_f, findings=[f, stale]))
    log = json.loads(render.render_sarif(d))
    assert [
        (r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in log["runs"][0]["results"]
    ] == [("ARCH001", 5)]


# -- command line --------------------------------------------------------------------------


def test_cli_diff_formats_and_outputs(tmp_path, capsys):
    old, new = str(DEFINITION / "old"), str(DEFINITION / "new")
    outs = [tmp_path / n for n in ("d.json", "d.md", "d.html", "d.sarif", "d.txt")]
    args = ["diff", old, new, "--no-cache"] + [x for o in outs for x in ("-o", str(o))]
    assert main(args) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(outs[0].read_text())["schema"] == "archaudit-diff/1"
    assert "Definition changed" in outs[1].read_text()
    assert outs[2].read_text().startswith("<!DOCTYPE html>")
    assert json.loads(outs[3].read_text())["version"] == "2.1.0"
    assert "definition changed: is_sm120f_supported" in outs[4].read_text()
    assert main(["diff", old, new, "--no-cache"]) == 0
    assert capsys.readouterr().out.startswith("archaudit diff: ")


def test_cli_fail_on_counts_only_newly_excluding_gates(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    body = (
        "__device__ void f() {\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
        "  cudaGridDependencySynchronize();\n#endif\n}\n"
    )
    (tmp_path / "old" / "k.cuh").write_text("// nothing gated yet\n")
    (tmp_path / "new" / "k.cuh").write_text(body)
    base = ["diff", str(tmp_path / "old"), str(tmp_path / "new"), "--no-cache", "--format", "json"]
    assert main(base + ["--fail-on", "high"]) == 1
    assert main(base) == 0
    # The same gate on both sides is not new: nothing to fail on.
    assert main(["diff", str(tmp_path / "new"), str(tmp_path / "new"), "--no-cache", "--fail-on", "info"]) == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["diff", "/nonexistent/old", "x"], "/nonexistent/old: no such file"),
        (["diff", str(MOVED / "old"), str(MOVED / "new"), "-o", "report.xyz"], "unknown extension"),
    ],
)
def test_cli_diff_bad_input_is_one_line_exit_2(argv, message, capsys):
    assert main(argv + ["--no-cache"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_cli_diff_usage_error_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "auditor", "diff", str(MOVED / "old")], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_diff_takes_git_revisions(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], check=True)
    for n, src in enumerate((MOVED / "old", MOVED / "new")):
        for f in src.rglob("*"):
            if f.is_file():
                dest = repo / f.relative_to(src)
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(f.read_bytes())
        subprocess.run(git + ["add", "-A"], check=True)
        subprocess.run(git + ["commit", "-q", "-m", f"c{n}"], check=True)
    assert main(["diff", f"git:{repo}:HEAD~1", f"git:{repo}:HEAD", "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changes"] == [] and doc["summary"]["unchanged"] == 3
    assert doc["old"]["inputs"] == [{"path": "HEAD~1", "kind": "git"}]


def test_options_targets_reach_the_verdicts():
    upper = gate("k.cuh", 5, "__CUDA_ARCH__ < 1000", kind="preprocessor", domain="target", admits=("host", "sm_90"))
    d = diff.compare(result(), result(upper), arch.parse_targets("10.0"))
    assert d.changes[0].delta == ("newly excludes 10.0",)
    assert Options().targets == TARGETS


def test_a_new_predicate_is_not_a_definition_change():
    res = Resolution("is_new", "u.py", 3, "def is_new(d):")
    body = gate("u.py", 4, "major == 12", admits=("12.0", "12.1"), context="is_new")
    site = gate("m.py", 5, "is_new(d)", admits=("12.0", "12.1"), resolutions=[res], context="f")
    d = diff.compare(result(), result(body, site))
    assert d.definitions == () and sorted(c.status for c in d.changes) == ["added", "added"]
    assert not any(c.explained for c in d.changes)


def test_condition_edited_beside_a_new_gate_is_rewritten():
    kw = dict(kind="preprocessor", domain="target")
    old = result(gate("a.cuh", 2, "defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700", admits=("sm_75", "sm_120"), **kw))
    new = result(
        gate(
            "a.cuh",
            2,
            "defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && __CUDA_ARCH__ < 1200",
            admits=("sm_75",),
            **kw,
        ),
        gate("a.cuh", 7, "(defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900))", admits=("sm_90", "sm_120"), **kw),
    )
    d = diff.compare(old, new)
    assert [(c.status, c.how, c.gate.line) for c in d.changes] == [("changed", "rewritten", 2), ("added", "", 7)]
    assert d.changes[0].delta == ("newly excludes 12.0",)


def test_a_name_that_now_resolves_to_another_definition_is_the_root_cause():
    kw = dict(kind="derived-macro", domain="target")
    was = Resolution("ENABLE_PDL", "csrc/defines.h", 130, "defined where __CUDA_ARCH__ >= 900")
    now = Resolution("ENABLE_PDL", "csrc/other_kernel.cu", 39, "defined where always")
    old = result(gate("csrc/mha.cu", 1660, "ENABLE_PDL", admits=("sm_90",), resolutions=[was], **kw))
    new = result(gate("csrc/mha.cu", 1664, "ENABLE_PDL", admits=("host", "sm_75", "sm_90"), resolutions=[now], **kw))
    d = diff.compare(old, new)
    [dc] = d.definitions
    assert (dc.name, dc.old_file, dc.old_line, dc.file, dc.new_line) == (
        "ENABLE_PDL",
        "csrc/defines.h",
        130,
        "csrc/other_kernel.cu",
        39,
    )
    assert [c.gate.line for c in dc.call_sites] == [1664] and d.changes[0].explained
    assert "before: csrc/defines.h:130: defined where __CUDA_ARCH__ >= 900" in render.render_text(d)


def test_markdown_fits_a_github_comment():
    many = [
        gate(
            "k.cuh",
            n,
            f"__CUDA_ARCH__ >= {n} && __CUDA_ARCH__ < 1200 /* {'x' * 300} */",
            kind="preprocessor",
            domain="target",
            admits=("sm_90",),
        )
        for n in range(1, 400)
    ]
    md = render.render_markdown(replace(diff.compare(result(), result(*many)), mode="pr"))
    assert len(md) <= 65_536 - 512 and md.startswith(render.MARKER)
    assert "more_ |" in md  # the rows left out are counted


def test_a_moved_file_is_not_removed_and_added(tmp_path):
    from auditor import diff as diffing
    from tests.render.render_support import scan

    source = (FIXTURES / "reports" / "pkg" / "fusion.py").read_text("utf-8")
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "pkg").mkdir(parents=True)
    (new / "kernels").mkdir(parents=True)
    (old / "pkg" / "fusion.py").write_text(source, "utf-8")
    (new / "kernels" / "allreduce_fusion.py").write_text(source, "utf-8")
    result = diffing.compare(scan(old, formats=()), scan(new, formats=()))
    assert result.changes == () and result.unchanged == 1
