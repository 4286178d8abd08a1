"""Markdown for PR comments: counts, linked excluding gates, and an honest cut under GitHub's limit."""

from __future__ import annotations

import re
from dataclasses import replace

from auditor import diff, github
from auditor.render import diff as render_diff
from auditor.render import markdown
from auditor.render.json import verdicts
from auditor.render.report import SEVERITIES
from tests.render.render_support import REPORTS, scan


def test_fixture_report_links_and_escapes():
    result = scan(REPORTS, formats=("markdown",), extra_args=("--link-base", "https://github.com/o/r/blob/abc123/"))
    text = markdown.render(result)
    assert text.startswith(
        "### archaudit: 5 decisions route 12.0, 12.1 away from a fast path (3 of them guard code 12.0, 12.1 can run)\n"
    )
    assert "\n13 of 15 architecture gates exclude 12.0, 12.1.\n" in text
    assert "[`comm/allreduce.cuh:8`](https://github.com/o/r/blob/abc123/comm/allreduce.cuh#L8)" in text
    assert "(https://github.com/o/r/blob/abc123/gemm/%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.cuh#L2)" in text
    assert "<img" not in text.replace("`gemm/<img src=x onerror=alert(1)>.cuh:2`", "")
    assert "_…and" not in text, "everything fits"
    # Severity groups in order, the worst one open.
    worst = {
        f.gate: min((x.severity for x in result.findings if x.gate == f.gate), key=SEVERITIES.index)
        for f in result.findings
    }
    excluding = [g for g in result.gates if "excludes" in verdicts(g, result.targets).values()]
    expected = [s for s in SEVERITIES if any(worst.get(g.id) == s for g in excluding)]
    expected += ["no rule"] if any(g.id not in worst for g in excluding) else []
    groups = re.findall(r"<details( open)?><summary>\S+ <b>([a-z ]+)</b>", text)
    assert [g for _, g in groups] == expected, "grouped by each gate's worst finding, worst first"
    assert groups[0] == (" open", "high")
    # A `|` inside a condition cannot split the table row.
    for row in (ln for ln in text.splitlines() if ln.startswith("| [`")):
        assert len(re.findall(r"(?<!\\)\|", row)) == 6, row


def test_without_link_base_locations_are_plain_code():
    text = markdown.render(scan(REPORTS, formats=("markdown",)))
    assert "| `comm/allreduce.cuh:8` |" in text and "](" not in text


def test_code_spans_survive_backticks_and_pipes():
    assert markdown.code("a|b") == "`a\\|b`"
    assert markdown.code("x `y` z") == "``x `y` z``"
    assert markdown.code("`edge`") == "`` `edge` ``"
    assert markdown.inline("uses `a<b` and <b>bold</b> | x") == "uses `a<b` and &lt;b&gt;bold&lt;/b&gt; \\| x"


def many(base, copies: int):
    """The fixture scan repeated under ``copies`` package folders: a large, realistic result."""
    gates, findings = [], []
    for n in range(copies):
        gates += [replace(g, file=f"pkg{n:03d}/{g.file}", id=f"{g.id}-{n}") for g in base.gates]
        findings += [replace(f, file=f"pkg{n:03d}/{f.file}", gate=f"{f.gate}-{n}") for f in base.findings]
    return replace(base, gates=tuple(gates), findings=tuple(findings))


def test_many_findings_are_cut_with_a_count_under_the_limit():
    copies = 400
    text = markdown.render(many(scan(REPORTS, formats=("markdown",)), copies))
    assert len(text) <= markdown.LIMIT
    assert github.prepare_body(text) == f"{github.DEFAULT_MARKER}\n{text}", "the poster need not cut it again"
    excluding = 13 * copies
    shown = len(re.findall(r"^\| `pkg\d{3}/", text, re.M))
    cut = re.search(r"_…and ([\d,]+) more excluding gates not shown \(([^)]*)\)", text)
    assert cut and shown + int(cut.group(1).replace(",", "")) == excluding
    by_severity = re.findall(r"([\d,]+) (high|medium|low|info|without a finding)", cut.group(2))
    assert sum(int(n.replace(",", "")) for n, _ in by_severity) == int(cut.group(1).replace(",", ""))
    assert shown > 100
    assert f"{excluding:,} of {15 * copies:,} architecture gates" in text
    assert text.rstrip().endswith("lists them all._")


def test_a_clean_scan_says_so(tmp_path):
    (tmp_path / "ok.cu").write_text("#if __CUDA_ARCH__ >= 800\n#endif\n", "utf-8")
    text = markdown.render(scan(tmp_path, formats=("markdown",)))
    assert "### archaudit: 0 decisions route 12.0, 12.1 away from a fast path" in text
    assert "0 of 1 architecture gates exclude 12.0, 12.1." in text
    assert "No architecture gate excludes 12.0, 12.1." in text and "<details open>" not in text


CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def test_control_characters_show_as_escapes_and_tables_keep_their_lines(tmp_path):
    condition = "__CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200 && '\x1b' == 27"
    (tmp_path / "a\x1fb\x85\u2066c.cu").write_text(f"#if {condition}\nint x;\n#endif\n", "utf-8")
    result = scan(tmp_path, formats=("markdown",))
    text = markdown.render(result)
    assert not CONTROLS.search(text), repr(text)
    assert "`a\\x1fb\\x85\\u2066c.cu:1`" in text, "shown, not blanked or collapsed into a space"
    assert "'\\x1b' == 27" in text
    d = diff.compare(replace(result, gates=(), findings=()), result)
    md = render_diff.render_markdown(d)
    assert not CONTROLS.search(md) and "a\\x1fb\\x85\\u2066c.cu" in md
    assert "\\n" not in md, "line breaks of the template's own tables stay line breaks"
