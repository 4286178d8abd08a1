"""First screens of real reports in Chromium, saved under tests/artifacts/ (slow: real wheels).

What a user sees when a report opens: for a scan, the root causes that turn 12.x away, worst
first; for a release diff, the summary, then the changes with the worst new findings first.
"""

from __future__ import annotations

import json
import re

import pytest

from auditor import diff
from auditor.render import diff as render_diff
from auditor.render import html
from tests.conftest import wheel
from tests.render.render_support import ARTIFACTS, chromium, open_report, scan

pytestmark = pytest.mark.slow
VIEWPORT = {"width": 1280, "height": 800}
RANK = {"high": 3, "medium": 2, "low": 1, "info": 0}


def _open(browser, path, problems):
    return open_report(browser, path, problems, VIEWPORT["width"], VIEWPORT["height"], timeout=120_000)


@pytest.mark.parametrize("requirement", ["sglang==0.5.15", "vllm==0.33.0"])
def test_scan_report_first_screen(tmp_path, requirement):
    result = scan(wheel(requirement))
    path = tmp_path / "report.html"
    path.write_text(html.render(result), encoding="utf-8")
    high = {(f.input, f.root or f.decision or f.gate) for f in result.findings if f.severity == "high" and f.gate}
    problems: list[str] = []
    with chromium() as browser:
        page = _open(browser, path, problems)
        assert page.locator('.tabs button[data-domain="findings"]').get_attribute("aria-selected") == "true"
        rows = page.locator(".row.root, .row.sep")
        shown = [r for r in rows.all() if r.bounding_box()["y"] < VIEWPORT["height"]]
        kinds = ["sep" if "sep" in (r.get_attribute("class") or "") else "root" for r in shown]
        own = shown[: kinds.index("sep")] if "sep" in kinds else shown
        on_screen = [r for r, k in zip(shown, kinds) if k == "root"]
        assert on_screen, "findings on the first screen"
        ranks = [RANK[r.get_attribute("data-sev")] for r in own]
        assert ranks == sorted(ranks, reverse=True), "worst first in the package's own code, vendored trees after"
        assert all(r.locator(".away").inner_text() != "" for r in on_screen)
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
        name = requirement.replace("==", "-")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{name}-first-screen.png"))
        print(f"\n{requirement}: {len(high)} high root causes; first screen: {len(on_screen)} rows")
    assert problems == []


def test_flashinfer_release_diff_first_screen(tmp_path):
    d = diff.compare(
        scan(wheel("flashinfer-python==0.6.7"), formats=()), scan(wheel("flashinfer-python==0.7.4"), formats=())
    )
    s = render_diff.summary(d)
    path = tmp_path / "diff.html"
    path.write_text(render_diff.render_html(d), encoding="utf-8")
    problems: list[str] = []
    with chromium() as browser:
        page = _open(browser, path, problems)
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"], "fits 1,280 px"
        assert page.locator(".row.change").count() < 200, "rows are drawn lazily"
        shown = page.locator("#shown").inner_text()
        assert shown == f"{len(d.changes):,} of {len(d.changes):,} changes"
        cards = page.locator(".cards").inner_text()
        for sev, n in s["new_findings"].items():
            assert re.search(rf"{n:,}\s+{sev}", cards), (sev, n)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "flashinfer-0.6.7-0.7.4-diff.png"))
        page.locator('.chips[data-filter="sev"] button[data-value="high"]').click()
        expect_rows = sum(1 for c in d.changes if any(f.severity == "high" for f in c.findings))
        assert page.locator("#shown").inner_text().startswith(f"{expect_rows:,} of")
        print(f"\nflashinfer 0.6.7 -> 0.7.4: {json.dumps(s)}")
    assert problems == []
