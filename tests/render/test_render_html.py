"""The HTML report: self-contained, escaped, and working in a real browser.

The browser tests open the report of ``fixtures/reports`` in headless Chromium, because
filters, the matrix and the drill-down are drawn by the page's script: only a browser
shows that they work and that hostile scanned text stays text.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from auditor.model import excerpt_windows
from auditor.render import html
from tests.conftest import wheel
from tests.render.render_support import ARTIFACTS, REPORTS, chromium, open_report, scan

HOSTILE = "</script><img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def page_text() -> str:
    return html.render(scan(REPORTS))


def test_data_is_escaped_json_and_nothing_loads_from_elsewhere(page_text):
    assert "<img" not in page_text, "scanned text must never appear as markup"
    assert page_text.count("</script>") == 3, "only the page's own script elements end"
    assert not re.search(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=", page_text)
    assert "default-src 'none'" in page_text
    raw = re.search(r'<script type="application/json" id="archaudit-data">(.*?)</script>', page_text, re.S).group(1)
    data = json.loads(raw)
    code = json.loads(
        re.search(r'<script type="application/json" id="archaudit-code">(.*?)</script>', page_text, re.S)[1]
    )
    code_lines = ["".join(line[1::2]) for runs in code.values() for _, lines in runs for line in lines]
    assert any(HOSTILE in line for line in code_lines), "the hostile source line survives, as data"
    assert any(f[1] == "gemm/<img src=x onerror=alert(1)>.cuh" for f in data["files"])


def test_excerpts_cover_the_condition_its_region_and_features():
    result = scan(REPORTS)
    gate = next(g for g in result.gates if g.file == "comm/allreduce.cuh" and g.line == 8)
    shown = {n for a, b in excerpt_windows(gate) for n in range(a, b + 1)}
    assert {7, 8, 9, 10, 11} <= shown, "context, condition, region and its end"
    lines = next(dict(e.lines) for e in result.excerpts if (e.input, e.file) == (str(REPORTS), "comm/allreduce.cuh"))
    assert lines[10].strip() == "cudaGridDependencySynchronize();"


def test_without_excerpts_the_page_still_renders(page_text):
    result = scan(REPORTS, formats=("json",))
    assert not result.excerpts
    assert 'id="archaudit-data"' in html.render(result)


@pytest.mark.slow
def test_report_in_chromium(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(html.render(scan(REPORTS)), encoding="utf-8")
    problems: list[str] = []
    from playwright.sync_api import expect

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
        page.on("request", lambda r: problems.append(f"request: {r.url}") if not r.url.startswith("file:") else None)
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready=true]")
        page.locator('.tabs button[data-domain="target"]').click()  # the full matrix, one click away

        # The upper-bound gate's 12.0 cells read excluded, in the verdict and in the arch columns.
        row = page.locator(".row.gate[data-gate]").filter(has_text="__CUDA_ARCH__ < 1200").filter(has_not_text=">= 900")
        assert row.count() == 1
        verdict = row.locator('[data-col="12.0"]')
        assert verdict.get_attribute("data-state") == "excluded"
        assert verdict.get_attribute("title") == "12.0: excluded"
        assert verdict.inner_text() == "✗"
        for col in ("sm_120", "sm_120a", "sm_120f"):
            assert row.locator(f'.c[data-col="{col}"]').get_attribute("title") == f"{col}: excluded"
        assert row.locator('.c[data-col="sm_110f"]').get_attribute("data-state") == "admitted"

        # The hostile file name is a row's text, not an element.
        assert page.locator(".row.file", has_text="gemm/<img src=x onerror=alert(1)>.cuh").count() == 1
        assert page.locator("img").count() == 0

        # Drill-down: the code around the gate, with the hostile string as text.
        page.locator(".row.gate", has_text="!(defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)").click()
        detail = page.locator("#detail")
        assert detail.is_visible()
        assert HOSTILE in detail.locator(".code").inner_text()
        assert page.locator("img").count() == 0
        assert detail.locator(".code .l.guard").first.inner_text().startswith("28")
        page.keyboard.press("Escape")

        page.locator(".row.gate", has_text="(__CUDA_ARCH__ < 1200))").click()
        text = detail.inner_text()
        assert "ARCH001" in text and "upper-bound-cuts-target" in text
        assert "cudaGridDependencySynchronize" in detail.locator("table").last.inner_text()
        colours = detail.locator(".code .src span").evaluate_all("s => s.map(x => getComputedStyle(x).color)")
        assert len(set(colours)) >= 3, "syntax highlighted"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-detail.png"))
        page.keyboard.press("Escape")

        # A severity filter keeps only its rows.
        all_rows = page.locator(".row.gate").count()
        page.locator('.chips[data-filter="sev"] button[data-value="high"]').click()
        sev = page.locator(".row.gate").evaluate_all("rows => rows.map(r => r.dataset.sev)")
        assert sev and set(sev) == {"high"} and len(sev) < all_rows

        # Text search and the excludes-only switch narrow further; the Python tab has its own matrix.
        page.locator('.chips[data-filter="sev"] button[data-value="high"]').click()
        page.fill("#f-q", "GEMM_SM")
        expect(page.locator(".row.gate")).to_have_count(3)
        page.check("#f-excl")
        expect(page.locator(".row.gate")).to_have_count(2)
        page.fill("#f-q", "")
        page.uncheck("#f-excl")
        page.locator('.tabs button[data-domain="device"]').click()
        py = page.locator(".row.gate", has_text="major >= 9")
        # The search box is debounced and rows are drawn on the next frame: wait, do not sample.
        expect(page.locator(".row.gate")).to_have_count(2)
        assert py.locator('.c[data-col="12.0"]').get_attribute("data-state") == "excluded"
        assert py.locator('.c[data-col="11.0"]').get_attribute("data-state") == "admitted"
        page.locator('.tabs button[data-domain="target"]').click()

        # Collapsing a file hides its rows.
        expect(page.locator(".row.gate")).to_have_count(all_rows)
        page.locator(".row.file", has_text="comm/allreduce.cuh").click()
        expect(page.locator(".row.gate")).to_have_count(all_rows - 4)
        page.locator(".row.file", has_text="comm/allreduce.cuh").click()
        page.screenshot(path=str(ARTIFACTS / "report.png"))
    assert problems == []


@pytest.mark.slow
def test_deep_link_opens_the_gate(tmp_path):
    result = scan(REPORTS)
    gate = next(g for g in result.gates if g.language == "python")
    path = tmp_path / "report.html"
    path.write_text(html.render(result), encoding="utf-8")
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{path.as_uri()}#gate={gate.id}")
        page.wait_for_selector("body[data-ready=true]")
        assert page.locator("#detail h2").inner_text() == f"{gate.file}:{gate.line}"
        assert page.locator('.tabs button[data-domain="device"]').get_attribute("aria-selected") == "true"


@pytest.mark.slow
def test_real_wheel_report_stays_small_and_quick(tmp_path):
    """A full scan of a real wheel (thousands of gates) opens quickly and draws only what is on screen."""
    result = scan(wheel("flashinfer-python==0.6.0"))
    assert len(result.gates) > 2000
    path = tmp_path / "report.html"
    path.write_text(html.render(result), encoding="utf-8")
    size = path.stat().st_size
    assert size < 2_000 * len(result.gates), f"{size / 1e6:.1f} MB for {len(result.gates)} gates"
    problems: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        start = time.monotonic()
        page.goto(path.as_uri())
        page.wait_for_selector("body[data-ready=true]", timeout=60_000)
        interactive = time.monotonic() - start
        assert page.locator(".row").count() < 200, "rows are drawn lazily"
        page.locator('.chips[data-filter="sev"] button[data-value="high"]').click()
        page.locator(".row.root").first.click()
        assert page.locator("#detail .code .l.guard").count() >= 1
    print(f"\n{len(result.gates)} gates: {size / 1e6:.1f} MB, interactive after {interactive:.2f} s")
    assert interactive < 15
    assert problems == []


def test_control_characters_are_page_text_and_excerpt_tabs_stay(tmp_path):
    source = "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n\tint x; // \u2066\n#endif\n"
    (tmp_path / "a\x1b[31m\u202ec.cu").write_text(source, "utf-8")
    page = html.render(scan(tmp_path))
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", page)
    data = json.loads(re.search(r'<script type="application/json" id="archaudit-data">(.*?)</script>', page, re.S)[1])
    assert [f[1] for f in data["files"]] == ["a\\x1b[31m\\u202ec.cu"], "the escapes are the text the page shows"
    code = json.loads(re.search(r'<script type="application/json" id="archaudit-code">(.*?)</script>', page, re.S)[1])
    lines = ["".join(line[1::2]) for runs in code.values() for _, rows in runs for line in rows]
    assert "\tint x; // \\u2066" in lines


@pytest.mark.slow
def test_first_screen_lists_root_causes_worst_first_own_code_before_vendored(tmp_path):
    """The page opens on the findings, one line per root cause: worst first, the package's own
    code before vendored trees, device and Python findings alike, each saying what it turns away
    and where. Drill-downs show no escape sequence; a rejection guard's cells follow its verdict."""
    result = scan(REPORTS)
    path = tmp_path / "report.html"
    path.write_text(html.render(result), encoding="utf-8")
    problems: list[str] = []
    from playwright.sync_api import expect

    with chromium() as browser:
        page = open_report(browser, path, problems)
        assert page.locator('.tabs button[data-domain="findings"]').get_attribute("aria-selected") == "true"
        rows = page.locator(".row.root")
        expect(rows).to_have_count(len({(f.input, f.root or f.decision or f.gate) for f in result.findings}))
        first_screen = [r for r in rows.all() if r.bounding_box()["y"] + 24 <= 800]
        assert len(first_screen) == rows.count(), "every root cause of the fixture is on the first screen"
        order = [(r.get_attribute("data-sev"), r.locator(".where").inner_text()) for r in rows.all()]
        ranks = [["high", "medium", "low", "info"].index(s) for s, _ in order]
        vendored_at = next(i for i, (_, where) in enumerate(order) if "third_party/" in where)
        assert vendored_at == len(order) - 1, "the vendored tree's finding comes last, after an info one"
        assert ranks[:vendored_at] == sorted(ranks[:vendored_at]), "own code worst first"
        assert page.locator(".row.sep").count() == 1
        wheres = " ".join(w for _, w in order)
        assert "pkg/fusion.py:8" in wheres and "comm/allreduce.cuh:8" in wheres, "Python and device findings"
        fusion = rows.filter(has_text="pkg/fusion.py:8")
        assert fusion.locator(".away").inner_text() == "12.0, 12.1"
        assert fusion.locator(".rule").inner_text() == "ARCH001"
        for r in rows.all():
            r.click()
            text = page.locator("#detail").evaluate(
                "d => { const c = d.cloneNode(true); c.querySelectorAll('.code').forEach(x => x.remove()); "
                "return c.innerText; }"
            )  # the source excerpt may hold a "\\n" of its own
            assert "\\n" not in text and "\\x" not in text, text
            page.keyboard.press("Escape")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report-first-screen.png"))

        # The rejection guard turns 12.0 away: its verdict and its 12.0 matrix cell say so.
        page.locator('.tabs button[data-domain="device"]').click()
        reject = page.locator(".row.gate", has_text="major not in (9, 10)")
        expect(reject).to_have_count(1)
        assert reject.locator('.v[data-col="12.0"]').get_attribute("data-state") == "excluded"
        assert reject.locator('.c[data-col="12.0"]').get_attribute("data-state") == "excluded"
        assert reject.locator('.c[data-col="9.0"]').get_attribute("data-state") == "admitted"
    assert problems == []
