"""The Ray engine for real: a local Ray instance of 2 CPUs scans three cached releases and the
history it joins is the local engine's, byte for byte (slow: real wheels)."""

from __future__ import annotations

import json

import pytest

from auditor.history import engines, releases, timeline
from auditor.render import history as render
from tests.conftest import wheel

pytestmark = pytest.mark.slow

RELEASES = ("flashinfer-python==0.5.3", "flashinfer-python==0.6.0", "flashinfer-python==0.6.7")


def test_ray_engine_gives_the_local_engines_history(tmp_path):
    pytest.importorskip("ray", reason="the dev extra installs ray")
    specs = [str(wheel(r)) for r in RELEASES]
    chosen = releases.releases(specs)
    settings = engines.Settings(jobs=1, cache_dir=tmp_path / "cache")
    seen: list[str] = []
    by_ray = engines.run_ray(chosen, settings, done=lambda s: seen.append(s.release.label))
    assert sorted(seen) == ["0.5.3", "0.6.0", "0.6.7"]
    assert all(s.result is not None and not s.error for s in by_ray)
    local = engines.run_local(chosen, engines.Settings(jobs=1), parallel=2)  # no cache: scanned again
    ray_json = render.render_json(timeline.build(by_ray, settings.targets))
    assert ray_json == render.render_json(timeline.build(local, settings.targets))
    doc = json.loads(ray_json)
    assert [r["label"] for r in doc["releases"]] == ["0.5.3", "0.6.0", "0.6.7"]
    assert doc["decisions"], "three flashinfer releases change some decision"


def test_ray_engine_reports_a_failing_release_and_goes_on(tmp_path):
    pytest.importorskip("ray", reason="the dev extra installs ray")
    broken = tmp_path / "flashinfer_python-0.6.1-py3-none-any.whl"
    broken.write_bytes(b"not a wheel")
    chosen = releases.releases([str(wheel(RELEASES[0])), str(broken), str(wheel(RELEASES[2]))])
    scans = engines.run_ray(chosen, engines.Settings(jobs=1, cache_dir=tmp_path / "cache"))
    assert [bool(s.result) for s in scans] == [True, False, True]
    assert "not a readable zip archive" in scans[1].error
    h = timeline.build(scans, engines.Settings().targets)
    assert [r.failed for r in h.releases] == [False, True, False]
