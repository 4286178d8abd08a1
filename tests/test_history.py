"""``archaudit history``: releases chosen from the index, engines, the join and its reports.

The three releases of ``fixtures/history`` are written to answer known questions: in 1.1
``is_sm120f_supported`` widens from ``minor == 0`` to the whole major (its call site lets 12.1
in, the definition the cause), 1.2 narrows it back (a regression for 12.1) and widens the
kernel's ``__CUDA_ARCH__ < 1200`` guard to every 12.x target.
"""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from auditor import diff, pipeline
from auditor.cli import main
from auditor.history import engines, releases, timeline
from auditor.history.releases import Release, SpecError
from auditor.model import Verdict
from auditor.render import counts
from auditor.render import history as render
from tests.conftest import FIXTURES

HISTORY = FIXTURES / "history"
LABELS = ("1.0", "1.1", "1.2")
SPECS = [str(HISTORY / v) for v in LABELS]


def _index(*files: tuple[str, str, bool]) -> dict:
    """A project's JSON document: (version, packagetype, yanked) per file."""
    out: dict[str, list] = {}
    for version, kind, yanked in files:
        out.setdefault(version, []).append({"packagetype": kind, "yanked": yanked, "filename": f"p-{version}"})
    return {"releases": out}


INDEX = _index(
    ("0.5.3", "bdist_wheel", False),
    ("0.6.0rc1", "bdist_wheel", False),
    ("0.6.0", "bdist_wheel", False),
    ("0.6.0", "sdist", False),
    ("0.6.1", "sdist", False),  # no wheel: cannot be fetched without a build
    ("0.6.2", "bdist_wheel", True),  # yanked
    ("0.6.3", "bdist_wheel", False),
    ("0.6.3.post1", "bdist_wheel", False),
    ("0.7.0", "bdist_wheel", False),
)


def _fetch(seen: list[str]):
    def fetch(url: str) -> dict:
        seen.append(url)
        if "/no-such/" in url:
            raise SpecError(f"{url}: no such project on the package index")
        return INDEX

    return fetch


def test_versions_from_the_index_by_specifier_and_last_n():
    seen: list[str] = []
    got = releases.releases(["Flash_Infer.Python"], ">=0.6.0,<=0.7.0", "https://index.test/pypi", _fetch(seen))
    assert seen == ["https://index.test/pypi/flash-infer-python/json"]
    assert [r.label for r in got] == ["0.6.0", "0.6.3", "0.6.3.post1", "0.7.0"]
    assert got[0].spec == "Flash_Infer.Python==0.6.0"
    assert [r.label for r in releases.releases(["p"], "last:2", fetch=_fetch([]))] == ["0.6.3.post1", "0.7.0"]
    assert [r.label for r in releases.releases(["p"], ">=0.6.0rc1,<0.6.1", fetch=_fetch([]))] == ["0.6.0rc1", "0.6.0"]
    assert releases.wheel_versions(INDEX) == [
        Version(v) for v in ("0.5.3", "0.6.0rc1", "0.6.0", "0.6.3", "0.6.3.post1", "0.7.0")
    ]


def test_pinned_specs_files_and_folders_keep_their_order(tmp_path):
    wheel = tmp_path / "flashinfer_python-0.6.7-py3-none-any.whl"
    wheel.write_bytes(b"")
    got = releases.releases(["x==2.0", str(wheel), str(HISTORY / "1.0")], fetch=_fetch([]))
    assert got == [Release("x==2.0", "2.0"), Release(str(wheel), "0.6.7"), Release(str(HISTORY / "1.0"), "1.0")]
    # one version of two projects: each release is named in full
    assert [r.label for r in releases.releases(["a==1.0", "b==1.0"])] == ["a==1.0", "b==1.0"]


@pytest.mark.parametrize(
    "specs, versions, message",
    [
        (["flashinfer-python"], None, "flashinfer-python: give --versions"),
        (["flashinfer-python"], "=>0.6", "not a PEP 440 specifier"),
        (["flashinfer-python"], "last:0", "N must be at least 1"),
        (["x==1.0"], ">=1", "--versions applies to a bare project name"),
        (["no-such"], ">=1", "no such project"),
        (["p"], ">=9", "no release with a wheel matches"),
        (["/nonexistent/x.whl"], None, "not name==version, a project name"),
        (["x==1.0", "x==1.0"], None, "x==1.0: named twice"),
    ],
)
def test_specs_that_name_no_release(specs, versions, message):
    with pytest.raises(SpecError, match=message):
        releases.releases(specs, versions, fetch=_fetch([]))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["history", "flashinfer-python"], "flashinfer-python: give --versions"),
        (["history", "flashinfer-python", "--versions", "=>0.6"], "not a PEP 440 specifier"),
        (["history", "not a spec!"], "not name==version"),
        (["history", *SPECS, "-o", "out.sarif"], "not sarif"),
        (["history", *SPECS, "--ray-address", "auto"], "--ray-address needs --engine ray"),
        (["history", *SPECS, "--engine", "ray", "--parallel", "2"], "--parallel is the local engine's"),
        (["history", *SPECS, "--select", "ARCH999"], "unknown rule id ARCH999"),
    ],
)
def test_cli_bad_specs_are_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _settings() -> engines.Settings:
    return engines.Settings(jobs=1)


@pytest.fixture(scope="module")
def scans() -> list[engines.Scanned]:
    return engines.run_local(releases.releases(SPECS), _settings(), parallel=1)


@pytest.fixture(scope="module")
def history(scans) -> timeline.History:
    return timeline.build(scans, _settings().targets)


def _gate(h: timeline.History, file: str) -> timeline.GateHistory:
    (found,) = [g for d in h.decisions for g in d.gates if g.file == file]
    return found


def test_predicate_call_site_opens_and_regresses_with_its_definition_as_cause(history):
    call = _gate(history, "pkg/gemm.py")
    assert call.row("12.0") == (Verdict.ADMITS,) * 3
    assert call.row("12.1") == (Verdict.EXCLUDES, Verdict.ADMITS, Verdict.EXCLUDES)
    assert call.first_admits("12.1") == 1 and call.opened("12.1") == (1,) and call.regressions("12.1") == (2,)
    assert [(s.release, s.since, s.delta) for s in call.steps] == [
        (1, 0, ("now admits 12.1",)),
        (2, 1, ("newly excludes 12.1",)),
    ]
    for s in call.steps:
        assert [(c.name, c.file) for c in s.causes] == [("is_sm120f_supported", "pkg/utils.py")]


def test_definition_body_is_followed_through_its_rewrites(history):
    body = _gate(history, "pkg/utils.py")
    assert body.context == "is_sm120f_supported"
    assert [(s.how, s.was) for s in body.steps] == [
        ("rewritten", "major == 12 and minor == 0"),
        ("rewritten", "major == 12"),
    ]
    assert body.steps[0].resolved == ("ARCH003",) and body.steps[1].findings == ("ARCH003",)


def test_moved_kernel_gate_is_one_line_of_history(history):
    kernel = _gate(history, "pkg/allreduce.cuh")
    # 1.1 moved it a line down (unchanged: no step); 1.2 widened it to every 12.x target
    assert kernel.row("12.1") == (Verdict.EXCLUDES, Verdict.EXCLUDES, Verdict.ADMITS)
    assert [(s.release, s.delta) for s in kernel.steps] == [(2, ("now admits 12.0", "now admits 12.1"))]
    assert kernel.first_admits("12.0") == 2 and kernel.regressions("12.0") == ()
    assert history.followed == 3 and len(history.decisions) == 3


def test_release_summaries_state_the_scan_and_diff_headlines(scans, history):
    results = [s.result for s in scans]
    for k, (r, summary) in enumerate(zip(results, history.releases)):
        assert r is not None
        h = counts.headline(r)
        assert (summary.gates, summary.findings, summary.decisions, summary.errors) == (
            h.gates,
            h.findings,
            h.decisions,
            h.errors,
        )
        if k:
            previous = results[k - 1]
            assert previous is not None
            d = counts.diff_headline(diff.compare(previous, r))
            assert summary.new_findings == d.new_findings and summary.resolved_findings == d.resolved_findings
    assert history.releases[0].new_findings is None
    assert dict(history.releases[1].opened) == {"12.0": 0, "12.1": 2}
    assert dict(history.releases[2].routed) == {"12.0": 0, "12.1": 1}


def test_matches_follow_every_gate_compare_matches():
    old, new = (pipeline.audit([s], pipeline.Options(jobs=1)) for s in SPECS[:2])
    pairs = diff.matches(old, new)
    d = diff.compare(old, new)
    assert len(pairs) == d.unchanged + sum(1 for c in d.changes if c.old is not None and c.new is not None)


def test_one_failing_release_does_not_stop_the_others(tmp_path, capsys):
    broken = tmp_path / "broken-1.0.5-py3-none-any.whl"
    broken.write_bytes(b"PK\x03\x04 not a zip")
    out = tmp_path / "h.json"
    code = main(["history", SPECS[0], str(broken), SPECS[1], SPECS[2], "--no-cache", "--parallel", "2", "-o", str(out)])
    assert code == 2
    doc = json.loads(out.read_text())
    assert [(r["label"], r["status"]) for r in doc["releases"]] == [
        ("1.0", "scanned"),
        ("1.0.5", "failed"),
        ("1.1", "scanned"),
        ("1.2", "scanned"),
    ]
    assert "not a readable zip archive" in doc["releases"][1]["error"]
    (call,) = [g for d in doc["decisions"] for g in d["gates"] if g["file"] == "pkg/gemm.py"]
    assert call["verdicts"]["12.1"] == ["excludes", None, "admits", "excludes"]
    assert call["changes"][0]["since"] == "1.0" and call["changes"][0]["release"] == "1.1"
    err = capsys.readouterr().err
    assert "archaudit: 1.0.5 failed: " in err and "Traceback" not in err


def test_worker_failure_is_reported_not_raised(monkeypatch):
    def explode(*_):
        raise RuntimeError("disk full")

    monkeypatch.setattr(engines, "audit", explode)
    (s,) = engines.run_local([Release("x==1.0", "1.0")], _settings(), parallel=1)
    assert s.result is None and s.error == "disk full"


def test_process_pool_and_in_process_scans_agree(history):
    pooled = engines.run_local(releases.releases(SPECS), _settings(), parallel=2)
    assert render.render_json(timeline.build(pooled, _settings().targets)) == render.render_json(history)


def test_json_document(history):
    doc = json.loads(render.render_json(history))
    assert doc["schema"] == "archaudit-history/1" and doc["targets"] == ["12.0", "12.1"]
    assert [r["label"] for r in doc["releases"]] == list(LABELS)
    assert doc["releases"][0]["summary"]["new_findings"] is None
    assert doc["releases"][1]["summary"]["resolved_findings"] == {"high": 1, "medium": 0, "low": 0, "info": 0}
    (call,) = [g for d in doc["decisions"] for g in d["gates"] if g["file"] == "pkg/gemm.py"]
    assert call["first_admits"] == {"12.0": "1.0", "12.1": "1.1"}
    assert call["regressions"] == {"12.0": [], "12.1": ["1.2"]}
    assert call["changes"][0]["definitions"][0]["name"] == "is_sm120f_supported"
    assert call["changes"][0]["verdicts"]["12.1"] == {"before": "excludes", "after": "admits"}


def test_text_and_markdown_name_the_release_and_the_cause(history):
    text = render.render_text(history)
    assert "12.1: excludes 1.0; admits 1.1; excludes 1.2; first admitted in 1.1; turned away again in 1.2" in text
    assert "1.1 (vs 1.0): now admits 12.1; definition `is_sm120f_supported` (pkg/utils.py:4)" in text
    md = render.render_markdown(history)
    assert md.startswith("### archaudit history: 1.0 … 1.2: 3 release(s)")
    assert "| `1.1` | 1 | 1 ✅ +2 |" in md


def test_hostile_file_name_is_escaped(tmp_path):
    hostile = "<img src=x onerror=alert(1)>.py"
    for v, compare in (("1", "== 9"), ("2", ">= 9")):
        (tmp_path / v).mkdir()
        (tmp_path / v / hostile).write_text(
            f"import torch\n\n\ndef f():\n    if torch.cuda.get_device_capability()[0] {compare}:\n"
            "        return 1\n    return 0\n"
        )
    scanned = engines.run_local(releases.releases([str(tmp_path / "1"), str(tmp_path / "2")]), _settings(), 1)
    h = timeline.build(scanned, _settings().targets)
    assert [g.file for d in h.decisions for g in d.gates] == [hostile]
    page = render.render_html(h)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;.py" in page
    assert "- `<img src=x onerror=alert(1)>.py:5` " in render.render_markdown(h)  # a code span: shown as text


def test_html_matrix_and_timelines_in_chromium(history, tmp_path):
    from tests.render.render_support import chromium, open_report

    path = tmp_path / "history.html"
    path.write_text(render.render_html(history), encoding="utf-8")
    problems: list[str] = []
    with chromium() as browser:
        page = open_report(browser, path, problems)
        assert page.locator("#matrix tbody tr").count() == 3
        assert page.locator("section.decision").count() == 3
        row = page.locator("section.decision", has_text="pkg/gemm.py").locator("tr", has_text="12.1")
        assert [c.get_attribute("class") for c in row.locator("td").all()][:3] == [
            "excludes",
            "admits changed",
            "excludes changed",
        ]
        page.fill("#filter", "allreduce")
        assert page.locator("section.decision:visible").count() == 1
    assert problems == []
