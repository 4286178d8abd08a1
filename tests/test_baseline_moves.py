"""A baseline matches a finding after its file is moved or renamed (decision and context
unchanged), and still reports a finding whose decision changed."""

from __future__ import annotations

import json
import shutil

from auditor import cli
from tests.conftest import FIXTURES

SOURCE = FIXTURES / "reports" / "pkg" / "fusion.py"


def _scan_json(tmp_path, root, *extra):
    out = tmp_path / "out.json"
    assert cli.main(["scan", str(root), "--jobs", "1", "--no-cache", "-q", "-o", str(out), *extra]) == 0
    return json.loads(out.read_text("utf-8"))["findings"]


def test_moved_and_renamed_file_matches_the_baseline(tmp_path):
    old = tmp_path / "old"
    (old / "pkg").mkdir(parents=True)
    shutil.copy(SOURCE, old / "pkg" / "fusion.py")
    baseline = tmp_path / "baseline.json"
    assert cli.main(["scan", str(old), "--jobs", "1", "--no-cache", "-q", "--write-baseline", str(baseline)]) == 0
    assert any(r.get("site") for r in json.loads(baseline.read_text("utf-8"))["findings"])
    assert _scan_json(tmp_path, old), "the fixture has findings"

    moved = tmp_path / "moved"
    (moved / "kernels" / "comm").mkdir(parents=True)
    shutil.copy(SOURCE, moved / "kernels" / "comm" / "allreduce_fusion.py")
    assert _scan_json(tmp_path, moved, "--baseline", str(baseline)) == []

    changed = tmp_path / "changed"
    (changed / "pkg").mkdir(parents=True)
    text = SOURCE.read_text("utf-8").replace("major >= 9", "major >= 8")
    (changed / "pkg" / "fusion.py").write_text(text, "utf-8")
    assert [f["rule"] for f in _scan_json(tmp_path, changed, "--baseline", str(baseline))], "a new decision is new"
