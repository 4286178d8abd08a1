"""Small in-memory programs for the evaluator's unit tests."""

from __future__ import annotations

import textwrap

from auditor.model import SourceFile
from auditor.python.core import Frame
from auditor.python.interp import Interp
from auditor.python.symbols import Module, Program
from auditor.python.values import Val, capability


def program(**sources: str) -> Program:
    """``program(**{"pkg/a.py": "..."})``: every file parsed, none dropped."""
    files = [SourceFile(path, textwrap.dedent(text).encode(), "python") for path, text in sources.items()]
    prog = Program(files)
    for f in files:
        assert prog.load(f) is not None
    assert not prog.errors, prog.errors
    return prog


class Everything:
    """Every definition may matter."""

    def __call__(self, mod: Module, node) -> bool:
        return True

    def within(self, mod: Module, start: int, end: int) -> bool:
        return True


def interp(prog: Program) -> Interp:
    """An evaluator to which every definition may matter."""
    return Interp(prog, Everything())


def value(it: Interp, mod: Module, name: str, cap: str = "9.0") -> Val:
    """A module global's value on one capability."""
    it.on(capability(cap))
    return it.global_value(mod, name)


def expression(text: str, cap: str = "9.0", prelude: str = "") -> Val:
    """The value of one expression (its module may define names in ``prelude``)."""
    prog = program(**{"m.py": f"{textwrap.dedent(prelude)}\n_ = {text}\n"})
    mod = prog.by_path["m.py"]
    it = interp(prog)
    it.on(capability(cap))
    node = mod.bindings["_"][-1].node
    assert node is not None
    return it.eval(node, Frame(mod, None))
