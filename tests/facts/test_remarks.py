"""Comments beside a gate that name the part it turns away (``auditor/facts/remarks.py``)."""

from __future__ import annotations

from dataclasses import replace

from auditor import arch
from auditor.facts.remarks import with_remarks
from auditor.model import Domain, Gate, GateKind, Guards, Language, Resolution, SourceFile

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


SCOPED = """\
def fused_ready(major):
    if major < 9:
        return False
    # The fused kernels exist for compute capability 9.x (SM90) and SM100 only.
    return major in (9, 10)


def tested_ready(major):
    # only tested on SM90 and SM100 so far
    return major in (9, 10)


def planned_ready(major):
    # TODO: the fused kernels are only built for SM90 and SM100
    return major in (9, 10)
"""


def _rejection(line: int, predicate: int) -> Gate:
    """``if not ready(): return False`` at ``line``, through the predicate defined at ``predicate``."""
    return replace(
        _gate(line),
        file="pkg/use.py",
        kind=GateKind.PREDICATE_CALL,
        expression="not ready()",
        admits=("7.0", "8.0", "12.0", "12.1"),
        guards=Guards.REJECT,
        surely=("7.0", "8.0", "12.0", "12.1"),
        resolutions=(Resolution("ready", "pkg/ready.py", predicate, "def ready(major):"),),
    )


def test_a_comment_in_a_predicate_body_that_states_what_exists_is_its_scope():
    uses = "def use(major):\n    if not a(major): return False\n    if not b(major): return False\n    if not c(major): return False\n"
    files = [
        SourceFile("pkg/ready.py", SCOPED.encode(), "python", "t"),
        SourceFile("pkg/use.py", uses.encode(), "python", "t"),
    ]
    gates = [_rejection(2, 1), _rejection(3, 8), _rejection(4, 13)]
    found = {g.line: g.scope for g in with_remarks(gates, files, arch.parse_targets("12.0,12.1"))}
    assert (
        found[2] == "The fused kernels exist for compute capability 9.x (SM90) and SM100 only."
    )  # a rejection lets 9.0 and 10.0 through
    assert found[3] == ""  # "tested" says nothing about what exists
    assert found[4] == ""  # a TODO leaves it open


REASONS = """\
def fa3_ok(major):
    if major != 9:
        return False, "FA3 is only supported on devices with compute capability 9.x"
    return True, None


def fa4_ok(major):
    if major not in (9, 10, 11):
        return False, "FA4 is only supported on devices with compute capability 9.x, 10.x, or 11.x"
    return True, None
"""

CHOOSE = """\
def choose(major):
    if fa3_ok(major)[0] or fa4_ok(major)[0]:
        return "flash"
    if major >= 9:
        log("this fast path is only supported on compute capability 9.x")
        return "fast"
"""


def test_the_reasons_of_the_predicates_a_branch_reads_state_its_scope():
    files = [
        SourceFile("pkg/ready.py", REASONS.encode(), "python", "t"),
        SourceFile("pkg/choose.py", CHOOSE.encode(), "python", "t"),
    ]
    both = replace(
        _gate(2),
        file="pkg/choose.py",
        kind=GateKind.PREDICATE_CALL,
        expression="fa3_ok(major)[0] or fa4_ok(major)[0]",
        admits=("9.0", "10.0", "11.0"),
        body_lines=(3, 3),
        resolutions=(
            Resolution("fa3_ok", "pkg/ready.py", 1, "def fa3_ok(major):"),
            Resolution("fa4_ok", "pkg/ready.py", 7, "def fa4_ok(major):"),
        ),
    )
    own = replace(_gate(4), file="pkg/choose.py", expression="major >= 9", admits=("9.0", "10.0"), body_lines=(5, 6))
    found = {g.line: g.scope for g in with_remarks([both, own], files, arch.parse_targets("12.0,12.1"))}
    assert found[2] == (
        "FA3 is only supported on devices with compute capability 9.x; "
        "FA4 is only supported on devices with compute capability 9.x, 10.x, or 11.x"
    )
    assert found[4] == ""  # a message in a branch that does the work is about other things


LIMITS = """\
def all_reduce_limits(x, tp_size, architecture):
    if tp_size not in (2, 4, 8) or architecture not in (9, 10):
        return None
    # Keep the existing collective above the measured one-shot crossover.
    return (32, 64) if architecture == 9 else (64, 64)
"""


def test_the_comment_that_opens_what_a_rejection_guards_explains_it():
    """What a rejection guards is what follows it: the comment right after its body is about that path."""
    files = [SourceFile("pkg/fuse.py", LIMITS.encode(), "python", "t")]
    off = tuple(c for c in arch.capabilities() if not c.startswith(("9.", "10.")))
    reject = replace(_gate(2), file="pkg/fuse.py", admits=off, surely=off, guards=Guards.REJECT, body_lines=(3, 3))
    (found,) = with_remarks([reject], files, arch.parse_targets("12.0,12.1"))
    assert found.measured == "Keep the existing collective above the measured one-shot crossover."
    # a branch guards its body, not what follows it
    branch = replace(reject, guards=Guards.TAKE, admits=("9.0", "10.0"), surely=())
    assert with_remarks([branch], files, arch.parse_targets("12.0,12.1"))[0].measured == ""
