"""What a gate means for a target: the toolkit notes that C/CUDA gates carry when toolkits disagree."""

from __future__ import annotations

import pytest

from auditor import arch, verdicts
from auditor.cuda.macros import Axis, MacroTable
from auditor.model import Domain, Gate, GateKind, Language

TARGETS = arch.parse_targets("12.0,12.1,sm_120a")


def _gate(condition: str) -> Gate:
    reach, _, _, toolkits = Axis(MacroTable()).effective([(condition, True)])
    admits = tuple(t for t, r in zip(arch.target_order(), reach) if r is not False)
    return Gate(
        "x", "k.cuh", 1, 1, Language.CUDA, GateKind.PREPROCESSOR, condition, Domain.TARGET, admits, toolkits=toolkits
    )


@pytest.mark.parametrize(
    ("condition", "notes"),
    [
        # a toolkit test: 12.x takes the other branch
        (
            "__CUDACC_VER_MAJOR__ >= 13 && __CUDA_ARCH__ >= 1200",
            {"12.0": "CUDA ≥ 13.0", "12.1": "CUDA ≥ 13.0", "sm_120a": "CUDA ≥ 13.0"},
        ),
        # the family macros arrive with 12.9; sm_121 itself does, so 12.1 is not noted
        (
            "defined(__CUDA_ARCH_FAMILY_SPECIFIC__) && __CUDA_ARCH_FAMILY_SPECIFIC__ >= 1200",
            {"12.0": "CUDA ≥ 12.9", "sm_120a": "CUDA ≥ 12.9"},
        ),
        # every toolkit that has sm_121 admits it: nothing to say
        (
            "(__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 9 || __CUDACC_VER_MAJOR__ >= 13) && __CUDA_ARCH__ == 1210",
            {},
        ),
        ("__CUDA_ARCH__ >= 900", {}),
        # only 12.8's sm_120a differs, and portable sm_120 is admitted by every toolkit: 12.0 is
        # admitted whatever the toolkit, so nothing is said for it (sm_120a asked alone is noted)
        (
            "__CUDA_ARCH__ == 1200 && (!defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_SPECIFIC__))",
            {"sm_120a": "CUDA ≥ 12.9"},
        ),
    ],
)
def test_toolkit_notes(condition, notes):
    assert verdicts.toolkit_notes(_gate(condition), TARGETS) == notes


def test_the_verdict_is_the_newest_toolkits():
    """12.9's sm_120 takes the branch, 13.x's does not: 12.0 is excluded, with the note saying where it is not."""
    g = _gate("__CUDACC_VER_MAJOR__ == 12 && __CUDA_ARCH__ >= 1200")
    assert verdicts.verdicts(g, TARGETS)["12.0"] == "excludes"
    assert verdicts.toolkit_notes(g, TARGETS)["12.0"] == "CUDA ≤ 12.9"
