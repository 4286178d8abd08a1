"""The diff reports: every count computed once (``counts.diff_headline``) and stated the same
in text, Markdown, HTML and JSON; the HTML page summary-first, filterable and virtualised."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from auditor import diff
from auditor.render import diff as render
from tests.conftest import FIXTURES
from tests.render.render_support import ARTIFACTS, chromium, open_report, scan

DEFINITION = FIXTURES / "diff" / "definition"


@pytest.fixture(scope="module")
def changed(tmp_path_factory):
    """A diff with definition changes (some changes shown under them) and a gate changed on its own."""
    root = tmp_path_factory.mktemp("sides")
    for side, bound in (("old", 1000), ("new", 1200)):
        shutil.copytree(DEFINITION / side, root / side)
        gate = f"#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < {bound}\nint x;\n#endif\n"
        (root / side / "own.cuh").write_text(gate, "utf-8")
    return diff.compare(scan(root / "old", formats=()), scan(root / "new", formats=()))


def test_counts_agree_across_formats_and_sections(changed):
    s = json.loads(render.render_json(changed))["summary"]
    text, md, page = render.render_text(changed), render.render_markdown(changed), render.render_html(changed)
    assert s["changed"] == len(changed.by_status("changed", explained=True)) > 0
    assert s["explained"]["changed"] > 0, "the fixture shows some changes under its definitions"
    line = f"{s['added']} added, {s['changed']} changed, {s['removed']} removed, {s['unchanged']} unchanged gates"
    assert line in text and line in page
    assert f"**{s['added']}** added · **{s['changed']}** changed · **{s['removed']}** removed" in md
    # A section's heading states the headline's count, not the rows left after the definitions.
    assert f"changed ({s['changed']}; {s['explained']['changed']} of them under the definition changes above):" in text
    assert f"#### Changed ({s['changed']};" in md
    for t in ("12.0", "12.1"):
        n, back = s["newly_excludes"][t], s["now_admits"][t]
        assert f"{t}: {n} decision(s) newly turn it away, {back} now let it in" in text
        assert re.search(
            rf"<strong>{n}</strong> decisions? newly turns? <span class=\"target\">{re.escape(t)}</span>", page
        )
    rows = json.loads(re.search(r'id="archaudit-diff">(.*?)</script>', page, re.S)[1])["rows"]
    assert len(rows) == s["added"] + s["changed"] + s["removed"], "the page lists every change once"
    resolved = ", ".join(f"{n} {sev}" for sev, n in s["resolved_findings"].items() if n)
    assert f"resolved findings: {resolved}" in text and f"resolved findings: {resolved}" in md


def test_a_removed_gate_does_not_count_as_now_admitting(tmp_path):
    source = "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\nint x;\n#endif\n"
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    (old / "k.cuh").write_text(source, "utf-8")
    (new / "k.cuh").write_text("int x;\n", "utf-8")
    d = diff.compare(scan(old, formats=()), scan(new, formats=()))
    s = render.summary(d)
    assert s["removed"] == 1 and s["now_admits"] == {"12.0": 0, "12.1": 0}
    assert s["resolved_findings"]["high"] == 1, "its finding is resolved"
    assert "now admits" not in render.render_text(d)


@pytest.mark.slow
def test_diff_page_in_chromium_filters_and_fits(tmp_path, changed):
    path = tmp_path / "diff.html"
    path.write_text(render.render_html(changed), encoding="utf-8")
    problems: list[str] = []
    from playwright.sync_api import expect

    with chromium() as browser:
        page = open_report(browser, path, problems)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        rows = page.locator(".row.change")
        expect(rows).to_have_count(len(changed.changes))
        page.check("#f-moved")
        expect(rows).to_have_count(sum(1 for c in changed.changes if c.delta))
        page.uncheck("#f-moved")
        page.fill("#f-q", "copy.cuh")
        expect(rows).to_have_count(sum(1 for c in changed.changes if c.gate.file.endswith("copy.cuh")))
        rows.first.click()
        assert "before" in page.locator("#detail table").inner_text()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "diff-fixture.png"))
    assert problems == []
