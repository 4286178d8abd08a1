"""Comments beside a gate that name the part it turns away (``auditor/facts/remarks.py``)."""

from __future__ import annotations

from dataclasses import replace

from auditor import arch
from auditor.facts.remarks import with_remarks
from auditor.model import Domain, Gate, GateKind, Language, Resolution, SourceFile

SOURCE = """\
def select(major, minor):
    # Do not widen it to every SM12x device: it corrupts long decodes on SM121/GB10.
    if major == 12 and minor == 0:
        return "sparse"
    # TODO: enable on sm_121 once tested
    if major == 12 and minor == 0:
        return "fused"
    use_b12x = major == 12 and minor == 0

    # SM121 (GB10) is excluded on purpose: cutlass is faster there.
    label = "sm_100 # not a comment"
    if major == 12 and minor == 0:  # sm_121 has its own kernel
        return "own"
"""


def _gate(line: int) -> Gate:
    return Gate(
        id=str(line),
        file="pkg/select.py",
        line=line,
        end_line=line,
        language=Language.PYTHON,
        kind=GateKind.CAPABILITY_COMPARE,
        expression="major == 12 and minor == 0",
        domain=Domain.DEVICE,
        admits=("12.0",),
    )


def test_comments_that_close_the_question_name_their_parts():
    files = [SourceFile("pkg/select.py", SOURCE.encode(), "python", "t")]
    found = {
        g.line: g.remarks
        for g in with_remarks([_gate(n) for n in (3, 6, 8, 12)], files, arch.parse_targets("12.0,12.1"))
    }
    assert found[3] == ("12.0", "12.1")  # the block above: SM12x and SM121/GB10
    assert found[6] == ()  # a TODO leaves it open
    assert found[8] == ("12.1",)  # the block right below a flag's definition
    assert found[12] == ("12.1",)  # a comment on the gate's own line (the block above ends at code)
    use = replace(_gate(13), resolutions=(Resolution("use_b12x", "pkg/select.py", 8, "use_b12x = ..."),))
    assert with_remarks([use], files, arch.parse_targets("12.1"))[0].remarks == ("12.1",)  # its flag's definition
