"""Python architecture gates: parse once, resolve predicates through their definitions,
evaluate every condition by enumeration over the device capabilities.

``extract`` is the entry point; ``auditor.facts.names`` reads the data table, ``values`` is the abstract value domain, ``symbols`` the
program (modules, bindings, imports), ``interp`` evaluates expressions and walks function
bodies once per capability, ``lists`` reads the list- and flag-shaped gates, ``gates``
turns what the walks recorded into :class:`auditor.model.Gate` records.
"""
