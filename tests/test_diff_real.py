"""``archaudit diff`` on real releases from PyPI (cached wheels; slow)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from auditor.cli import main
from tests.conftest import wheel

pytestmark = pytest.mark.slow

OLD, NEW = "flashinfer-python==0.6.7", "flashinfer-python==0.7.4"
UTILS = "flashinfer/utils.py"
INDEXER = "flashinfer/experimental/sm120_dsa_indexer/_api.py"
ALLREDUCE = "flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"


def seed_downloads(cache: Path, *requirements: str) -> None:
    """Put the cached wheels where ``name==version`` downloads are kept, so no download runs."""
    for req in requirements:
        slot = cache / "downloads" / req
        slot.mkdir(parents=True, exist_ok=True)
        src = wheel(req)
        shutil.copy(src, slot / src.name)


@pytest.fixture(scope="module")
def flashinfer_diff(tmp_path_factory) -> dict:
    """The whole 0.6.7 -> 0.7.4 diff as JSON, both sides named ``name==version``."""
    cache = tmp_path_factory.mktemp("cache")
    seed_downloads(cache, OLD, NEW)
    out = cache / "diff.json"
    md = cache / "diff.md"
    assert main(["diff", OLD, NEW, "--cache-dir", str(cache), "--no-cache", "-o", str(out), "-o", str(md)]) == 0
    doc = json.loads(out.read_text())
    doc["_markdown"] = md.read_text()
    return doc


def test_real_diff_lists_real_changes(flashinfer_diff):
    doc = flashinfer_diff
    assert doc["schema"] == "archaudit-diff/1"
    assert doc["old"]["inputs"] == [{"path": OLD, "kind": "wheel"}]
    assert doc["new"]["inputs"] == [{"path": NEW, "kind": "wheel"}]
    s = doc["summary"]
    assert s["added"] > 0 and s["removed"] > 0 and s["unchanged"] > 1000
    added = {(c["file"], c["line"]) for c in doc["changes"] if c["status"] == "added"}
    # 0.7.4 adds the SM120 DSA indexer, whose device check rejects every other GPU.
    assert (INDEXER, 79) in added
    check = next(c for c in doc["changes"] if (c["file"], c["line"]) == (INDEXER, 79))
    assert check["new"]["expression"] == "not is_sm120f_supported(dev)" and check["new"]["guards"] == "reject"
    # 0.7.4 drops the `__CUDA_ARCH__ < 1200` bound around the allreduce's grid-dependency sync.
    widened = [
        c
        for c in doc["changes"]
        if c["file"] == ALLREDUCE
        and c["how"] == "rewritten"
        and "__CUDA_ARCH__ < 1200" in c["old"]["expression"]
        and "1200" not in c["new"]["expression"]
    ]
    assert widened and all(c["delta"] == ["now admits 12.0", "now admits 12.1"] for c in widened)
    # Every change carries both sides' documents as the scan contract spells them.
    for c in doc["changes"]:
        assert (c["old"] is None) == (c["status"] == "added") and (c["new"] is None) == (c["status"] == "removed")
        assert set(c["verdicts"]) == {"12.0", "12.1"}


def test_real_diff_reports_is_sm120f_supported_as_the_root_cause(flashinfer_diff):
    doc = flashinfer_diff
    [pred] = [d for d in doc["definitions"] if d["name"] == "is_sm120f_supported"]
    assert pred["file"] == UTILS and pred["new_line"] == 750
    # Read both wheels' flashinfer/utils.py: 0.6.7 returns `major == 12 and minor == 0 and ...`,
    # 0.7.4 `major == 12 and ...` -- minor 0 required before, not after.
    [inside] = pred["body"]
    assert inside["status"] == "changed" and inside["expression"] == "major == 12"
    old_body = next(c for c in doc["changes"] if c["definition"] == f"is_sm120f_supported@{UTILS}")
    assert old_body["old"]["expression"] == "major == 12 and minor == 0" and old_body["old"]["line"] == 564
    assert old_body["old"]["admits"] == ["12.0"] and old_body["new"]["admits"] == ["12.0", "12.1"]
    assert inside["delta"] == ["now admits 12.1"]
    sites = {(c["file"], c["line"], c["status"]) for c in pred["call_sites"]}
    assert (INDEXER, 79, "added") in sites
    assert {f for f, _, _ in sites} == {INDEXER}
    md = doc["_markdown"]
    assert md.count("#### Definition changed: `is_sm120f_supported`") == 1
    assert "`major == 12 and minor == 0` admits 12.0 → `major == 12` admits 12.0, 12.1" in md


def test_scan_and_diff_take_name_version_from_the_download_cache(tmp_path, capsys):
    seed_downloads(tmp_path, OLD)
    args = ["--cache-dir", str(tmp_path), "--no-cache", "--include", UTILS, "--format", "json"]
    assert main(["scan", OLD, *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["inputs"] == [{"path": OLD, "kind": "wheel"}]
    assert {g["file"] for g in doc["gates"]} == {UTILS}
    assert any(g["context"] == "is_sm120f_supported" for g in doc["gates"])
    assert main(["diff", OLD, OLD, *args]) == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []


@pytest.mark.skipif(os.environ.get("ARCHAUDIT_OFFLINE") == "1", reason="asks PyPI")
def test_a_version_the_registry_does_not_have_is_a_one_line_error(tmp_path, capsys):
    assert main(["diff", "flashinfer-python==0.0.0.999", OLD, "--cache-dir", str(tmp_path), "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "archaudit: error: flashinfer-python==0.0.0.999: no wheel could be downloaded "
        "(No matching distribution found for flashinfer-python==0.0.0.999)"
    )


def test_real_diff_keeps_enable_pdl_to_the_units_that_define_it(flashinfer_diff):
    """``xqa/mha.cu`` includes ``defines.h``; 0.7.4's generated kernels that ``#define ENABLE_PDL 0``
    are other translation units, so its ``#if ENABLE_PDL`` keeps its meaning (issue 15, cause 7)."""
    doc = flashinfer_diff
    mha = "flashinfer/data/csrc/xqa/mha.cu"
    assert not [
        d for d in doc["definitions"] if d["name"] == "ENABLE_PDL" and any(c["file"] == mha for c in d["call_sites"])
    ]
    assert not [c for c in doc["changes"] if c["file"] == mha and "ENABLE_PDL" in (c["new"] or c["old"])["expression"]]
