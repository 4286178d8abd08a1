"""The headline: decisions routed away, counted once and stated alike by every format."""

from __future__ import annotations

import json
import re

from auditor.render import html, markdown, sarif, text
from auditor.render import json as json_render
from auditor.render.counts import headline
from tests.render.render_support import REPORTS, scan


def test_every_format_states_the_same_counts():
    result = scan(REPORTS)
    h = headline(result)
    assert h.decisions > 0 and 0 < h.runnable <= h.decisions < h.findings + 1
    routed = {(f.input, f.decision) for f in result.findings if f.decision}
    assert h.decisions == len(routed)  # one per decision, however many findings it carries
    phrase = f"{h.decisions} decisions route 12.0, 12.1 away from a fast path ({h.runnable} of them"
    assert phrase in text.render(result)
    assert markdown.render(result).startswith(f"### archaudit: {phrase}")
    page = html.render(result)
    assert re.search(rf"<h1><strong>{h.decisions}</strong> decisions route 12.0, 12.1 away from a fast path", page)
    doc = json.loads(json_render.render(result))["summary"]
    assert (doc["decisions_routed_away"], doc["decisions_runnable"], doc["findings"]) == (
        h.decisions,
        h.runnable,
        h.findings,
    )
    props = json.loads(sarif.render(result))["runs"][0]["properties"]
    assert (props["decisions_routed_away"], props["decisions_runnable"]) == (h.decisions, h.runnable)
    assert len(json.loads(sarif.render(result))["runs"][0]["results"]) == h.findings
