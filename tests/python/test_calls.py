"""Calls into the input's definitions: arguments bound, bodies run on one capability, results
cached by whether they read it, predicates known by name when their bodies say nothing."""

from __future__ import annotations

from auditor import arch
from auditor.model import ResolvedBy
from auditor.python.values import Func, capability, val
from tests.python.program import interp, program, value

PREDICATES = """
import torch
from functools import lru_cache, partial

def at_least(major, minor=0):
    return torch.cuda.get_device_capability() >= (major, minor)

@lru_cache(maxsize=1)
def is_hopper():
    return at_least(9) and not at_least(10)

def opaque():
    return 1

is_sm90_supported = partial(at_least, 9)
HOPPER = is_hopper()
SM100 = at_least(minor=0, major=10)
WRAPPED = is_sm90_supported()
"""


def test_arguments_bind_to_parameters_by_position_keyword_and_default():
    prog = program(**{"p.py": PREDICATES})
    it = interp(prog)
    mod = prog.by_path["p.py"]
    assert value(it, mod, "SM100", cap="9.0").only() is False
    assert value(it, mod, "SM100", cap="10.0").only() is True
    assert value(it, mod, "WRAPPED", cap="9.0").only() is True  # through functools.partial


def test_a_predicate_is_true_where_its_body_says():
    prog = program(**{"p.py": PREDICATES})
    it = interp(prog)
    mod = prog.by_path["p.py"]
    answers = {label: value(it, mod, "HOPPER", cap=label).only() for label in ("8.0", "9.0", "10.0")}
    assert answers == {"8.0": False, "9.0": True, "10.0": False}


def test_admits_lists_where_a_resolved_predicate_can_be_true():
    prog = program(**{"p.py": PREDICATES})
    it = interp(prog)
    assert it.admits(("g", "p", "HOPPER"), arch.capabilities()) == {"9.0"}


def test_admits_answers_with_the_newest_toolkit_whichever_evaluation_asks():
    # asked first while an older toolkit is evaluated, the answer must not be that toolkit's
    prog = program(
        **{
            "t.py": """
            import torch
            from .cpp_ext import version_at_least
            def is_sm120f_supported():
                return torch.cuda.get_device_capability()[0] == 12 and version_at_least(torch.version.cuda, "12.9")
            """
        }
    )
    it = interp(prog)
    it.toolkit = arch.toolkits()[0].release  # 12.8: too old for this predicate
    assert it.admits(("g", "t", "is_sm120f_supported"), arch.capabilities()) == {"12.0", "12.1"}
    assert it.toolkit == arch.toolkits()[0].release


def test_a_result_that_did_not_read_the_capability_is_cached_once():
    prog = program(**{"p.py": PREDICATES})
    it = interp(prog)
    mod = prog.by_path["p.py"]
    opaque = value(it, mod, "opaque").only()
    assert isinstance(opaque, Func)
    it.on(capability("9.0"))
    assert it.call_func(opaque, [], {}).only() == 1
    assert not it.per_cap
    it.call_func(value(it, mod, "at_least").only(), [val(9)], {})
    assert it.per_cap  # this one read it


def test_a_body_that_says_nothing_is_read_by_the_predicate_name():
    prog = program(
        **{
            "q.py": """
            from somewhere import current_platform
            def is_sm90_supported():
                return check()
            OK = is_sm90_supported()
            BW = current_platform.is_blackwell()
            """
        }
    )
    it = interp(prog)
    mod = prog.by_path["q.py"]
    ok = value(it, mod, "OK", cap="8.0")
    assert ok.elems == {False}  # the name promises 9.0
    assert ok.taint is not None and ResolvedBy.NAME in ok.taint.via
    assert value(it, mod, "BW", cap="9.0").elems == {False}
    assert value(it, mod, "BW", cap="10.0").elems == {True, False}  # a name promises, it does not decide


def test_a_method_called_on_an_unknown_receiver_is_found_by_name():
    prog = program(
        **{
            "plat.py": """
            import torch
            class Platform:
                def is_big(self):
                    return torch.cuda.get_device_capability()[0] == 10
            """,
            "use.py": "OK = get_platform().is_big()\n",
        }
    )
    it = interp(prog)
    use = prog.by_path["use.py"]
    assert value(it, use, "OK", cap="10.0").only() is True
    assert value(it, use, "OK", cap="9.0").only() is False


def test_a_method_found_by_name_is_not_run_again_inside_itself():
    # a compiled module's ``plan`` called from each wrapper's ``plan``: guessed by name, each
    # guess would lead back into the others (with new arguments each time) until the fuel ran out
    prog = program(
        **{
            "w.py": """
            import torch
            class Prefill:
                def plan(self, n):
                    self._info = self._module.plan(n + 1)
                    return torch.cuda.get_device_capability()[0] == 9
            class Decode:
                def plan(self, n):
                    self._info = self._module.plan(n + 1)
                    return torch.cuda.get_device_capability()[0] == 10
            """,
            "use.py": "OK = get_wrapper().plan(1)\n",
        }
    )
    it = interp(prog)
    runs: list[int] = []
    run = it._run
    it._run = lambda mod, node, *rest: runs.append(node.start_byte) or run(mod, node, *rest)  # type: ignore[method-assign]
    use = prog.by_path["use.py"]
    assert value(it, use, "OK", cap="8.0").elems == {False}
    assert len(runs) == 4  # Prefill.plan(1) runs Decode.plan(2); Decode.plan(1) runs Prefill.plan(2)
    assert value(it, use, "OK", cap="9.0").elems == {True, False}
    assert not it.active  # no definition is left running


def test_a_platform_api_test_compares_the_capability_number():
    prog = program(**{"r.py": "from vllm.platforms import current_platform as p\nOK = p.has_device_capability(90)\n"})
    it = interp(prog)
    mod = prog.by_path["r.py"]
    assert value(it, mod, "OK", cap="8.9").only() is False
    assert value(it, mod, "OK", cap="12.0").only() is True
