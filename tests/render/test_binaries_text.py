"""The text report's binaries section: what a target cannot load, per package."""

from __future__ import annotations

from auditor import __version__, arch
from auditor.model import AuditResult, Binary, EmbeddedCode, Loadability
from auditor.render import text

TARGETS = arch.parse_targets("12.0,12.1")


def binary(path: str, *targets: str) -> Binary:
    native = {
        t: Loadability.NATIVE
        if any(arch.runs_on("sass", x, arch.Capability.parse(t)) for x in targets)
        else Loadability.NONE
        for t in ("12.0", "12.1")
    }
    return Binary(path, "pkg", "in", tuple(EmbeddedCode("sass", x, False) for x in targets), tuple(native.items()))


def section(*binaries: Binary) -> list[str]:
    return text.binaries_section(AuditResult(__version__, TARGETS, (), (), binaries=binaries))


def test_a_binary_built_for_one_part_of_a_generation_is_named_for_the_other():
    lines = section(binary("pkg/ops.so", "sm_90a", "sm_120a"), binary("pkg/all.so", "sm_120f"))
    assert "  pkg: 12.0:native  12.1:native" in lines[1]  # the best over the package hides ops.so
    assert lines[2] == "    12.1 cannot load these, built for 12.0 only: pkg/ops.so (sm_120a)"


def test_a_binary_with_no_code_for_the_generation_is_no_sibling_build():
    lines = section(binary("pkg/fa3.so", "sm_80", "sm_90a"))
    assert not any("cannot load these" in line for line in lines)
