"""Definition blocks: branches that only define macros decide nothing themselves; their uses do."""

from __future__ import annotations

from auditor.cuda.gates import scan_structure
from auditor.model import Guards
from auditor.pipeline import Options, audit
from tests.conftest import FIXTURES

DEFINES = FIXTURES / "cuda" / "defines"


def test_blocks_that_only_define_are_marked():
    text = (DEFINES / "config.h").read_text()
    marked = {b.line: b.defines for b in scan_structure(text).branches}
    # a comment in the body, a nested group of definitions, an #else that only #undefs: definitions
    assert marked == {4: True, 8: True, 13: True, 15: True, 18: True, 22: False, 27: True}
    # 22 includes a header: code; 27 defines a macro and a per-architecture constant (the
    # decisions are where the constant is used)


def test_findings_are_at_the_uses_and_name_the_definition():
    result = audit([str(DEFINES)], Options(jobs=1))
    guards = {(g.file, g.line): g.guards for g in result.gates}
    assert guards[("config.h", 4)] == Guards.DEFINE and guards[("config.h", 27)] == Guards.DEFINE
    assert guards[("config.h", 22)] == Guards.TAKE
    found = {(f.file, f.line, f.rule): f.message for f in result.findings}
    assert not [k for k in found if k[0] == "config.h" and k[2] in ("ARCH001", "ARCH002", "ARCH003", "ARCH007")]
    trap = found[("kernel.cu", 5, "ARCH003")]
    assert "`DEMO_SM120_MMA` at config.h:5" in trap
    assert "`DEMO_PDL` at config.h:14" in found[("kernel.cu", 8, "ARCH001")]
