"""Differential test: archaudit's admitted sets against g++'s preprocessor, branch by branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor import arch
from auditor.cuda.gates import decode, scan_file
from auditor.cuda.macros import Axis, MacroTable
from auditor.sources import DirectoryProvider, read_all
from tests.conftest import FIXTURES, wheel
from tests.cuda import oracle

pytestmark = pytest.mark.skipif(oracle.GXX is None, reason="needs g++ as the oracle")


def compare(files, tmp_path: Path) -> int:
    """Compare every arch-only branch; return how many were compared."""
    texts = {f.path: decode(f) for f in files if f.language == "cuda"}
    texts = {p: t for p, t in texts.items() if isinstance(t, str)}
    scans = [scan_file(f) for f in files if f.path in texts]
    scans = [s for s in scans if hasattr(s, "structure")]
    texts = {s.path: texts[s.path] for s in scans}
    table = MacroTable.build((s.path, s.structure) for s in scans)
    evaluator = Axis(table)
    truth = oracle.admitted(texts, tmp_path)
    targets = arch.target_order()
    compared = 0
    disagreements = []
    for s in scans:
        for b in oracle.comparable_branches(s.path, texts[s.path]):
            reach, unknowns, derived, _ = evaluator.effective(b.inherited + b.local)
            ours = {t for t, r in zip(targets, reach) if r is not False}
            assert not unknowns and not derived
            compared += 1
            if ours != truth[(s.path, b.line)]:
                disagreements.append((s.path, b.line, b.expression, sorted(ours ^ truth[(s.path, b.line)])))
    assert disagreements == []
    return compared


def test_fixtures_agree_with_gxx(tmp_path):
    files, errors = read_all(DirectoryProvider(str(FIXTURES / "cuda")))
    assert errors == []
    n = compare(files, tmp_path)
    assert n >= 25


@pytest.mark.slow
@pytest.mark.parametrize("version, at_least", [("0.6.0", 900), ("0.7.4", 25000)])
def test_flashinfer_wheel_agrees_with_gxx(tmp_path, capsys, version, at_least):
    from auditor.sources import ZipProvider

    files, _ = read_all(ZipProvider(str(wheel(f"flashinfer-python=={version}"))))
    n = compare(files, tmp_path)
    with capsys.disabled():
        print(f"\n[oracle] flashinfer-python {version}: {n} branches compared with g++, 0 disagreements")
    assert n > at_least
