"""The evaluator: expressions and function bodies, one device capability at a time.

*Call* mode runs a definition to learn what it returns (following only live paths,
tainting what a tainted branch decides). *Scan* mode (:mod:`auditor.python.scan`) walks a
scope to find gates with this evaluator's expressions and simple statements, recording every
evaluated node's value.

The evaluator notes when it reads the capability (``dep``): a result that did not read it
is the same on every capability, so it is cached once, not once per capability, and a scan
evaluates such a statement once for all of them.
"""

from __future__ import annotations

from collections.abc import Callable

from tree_sitter import Node

from auditor.python.calls import Calls
from auditor.python.core import Frame
from auditor.python.expressions import Expressions
from auditor.python.externals import Externals
from auditor.python.resolve import Names
from auditor.python.statements import Statements
from auditor.python.values import ANY, Val


class Interp(Expressions, Names, Calls, Externals, Statements):
    """The Python evaluator, its concerns combined. Outside it, code uses: :meth:`on`,
    :meth:`observe`, :meth:`scanning` and :meth:`quiet` (modes); :meth:`eval`,
    :meth:`global_value`, :meth:`instance_attr`, :meth:`call_func` and :meth:`admits`
    (values); :meth:`bind_params`, :meth:`class_of`, :meth:`simple`, :meth:`test`,
    :meth:`with_items`, :meth:`loop_entry`, :meth:`loop_exit`, :meth:`handler_entry` and
    :meth:`join_states` (the statement steps a scan shares); and it reads ``relevant``,
    ``conditions`` and ``globals_read``."""

    def eval(self, node: Node, fr: Frame) -> Val:
        """The value of an expression in a frame; in scan mode also recorded."""
        fn = _DISPATCH.get(node.type)
        v = fn(self, node, fr) if fn is not None else ANY
        if self.recording:
            self.recorded.append((node, v))
        return v


_DISPATCH: dict[str, Callable[[Interp, Node, Frame], Val]] = {
    "identifier": Interp.e_identifier,
    "attribute": Interp.e_attribute,
    "call": Interp.e_call,
    "integer": Interp.e_integer,
    "float": Interp.e_float,
    "true": Interp.e_true,
    "false": Interp.e_false,
    "none": Interp.e_none,
    "string": Interp.e_string,
    "concatenated_string": Interp.e_concat,
    "tuple": Interp.e_tuple,
    "expression_list": Interp.e_tuple,
    "list": Interp.e_tuple,
    "set": Interp.e_set,
    "dictionary": Interp.e_dict,
    "parenthesized_expression": Interp.e_paren,
    "boolean_operator": Interp.e_bool,
    "not_operator": Interp.e_not,
    "comparison_operator": Interp.e_compare,
    "binary_operator": Interp.e_binary,
    "unary_operator": Interp.e_unary,
    "conditional_expression": Interp.e_conditional,
    "subscript": Interp.e_subscript,
    "lambda": Interp.e_lambda,
    "named_expression": Interp.e_walrus,
    "await": Interp.e_await,
    "list_comprehension": Interp.e_comprehension,
    "generator_expression": Interp.e_comprehension,
    "set_comprehension": Interp.e_comprehension,
}
