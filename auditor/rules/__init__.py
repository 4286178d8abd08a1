"""Findings from gates: the rule pack's loader and schema (:mod:`.rulebook`), the words a rule's
``when`` and ``message`` may use (:mod:`.vocabulary`), and the engine that applies them
(:mod:`.engine`). The YAML pack itself is the top-level ``rules/`` folder, installed as
``auditor.rules.pack``.
"""
