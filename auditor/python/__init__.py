"""Python architecture gates: parse once, resolve predicates through their definitions,
evaluate every condition by enumeration over the device capabilities.

``extract`` is the entry point; ``auditor.facts.names`` reads the data table. The program:
``symbols`` (modules, bindings, imports) and ``syntax`` (reading the tree). The evaluator,
``interp.Interp``, is one object made of its concerns: ``values`` is the abstract domain,
``core`` the state they share, ``expressions``, ``resolve`` (names and attributes), ``calls``
(into definitions), ``externals`` (platform APIs, builtins, the name table) and ``statements``
(call mode). ``scan`` walks scopes for all capabilities at once, ``gates`` and ``lists``
turn what it recorded into :class:`auditor.model.Gate` records.
"""
