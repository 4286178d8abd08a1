"""Rules as data: load ``rules/*.yaml``, check them against ``rules/schema.json``, run their examples.

A rule file carries its own docs (rationale, remediation, references) and its own tests
(``examples``): every ``invalid`` example must be reported by the rule, every ``valid`` one
must not (:func:`verify`). Mistakes in a rule file are reported as ``file:line: reason``,
so the YAML is read with a loader that keeps where each node came from.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import jsonschema
import yaml
from jsonschema.exceptions import best_match

from auditor.model import SEVERITIES, FileError, Finding, Gate, GateKind, Language, Severity, SourceFile
from auditor.rules.vocabulary import FIELDS, PARAMETRIC, PARAMETRIC_VALUES, PREDICATES, Predicate

SCHEMA_COMMENT = "# yaml-language-server: $schema=schema.json"


class RuleError(ValueError):
    """A rule file that cannot be used; the message is one ``file:line: reason`` line."""


@dataclass(frozen=True, slots=True)
class Example:
    """Code that must (``invalid``) or must not (``valid``) trigger its rule."""

    language: str
    filename: str
    code: str
    line: int
    """Where the example starts in its rule file."""
    binaries: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Shared objects scanned with it, as (path, embedded targets): see :meth:`sources`."""

    def source(self) -> SourceFile:
        """The example as a scanned file."""
        return SourceFile(path=self.filename, data=self.code.encode("utf-8"), language=self.language, input="example")

    def sources(self) -> list[SourceFile]:
        """The example and its binaries; a binary is a ``binary-listing`` file (JSON list of
        embedded targets) that the pipeline reads in place of an ELF file's fatbinary."""
        return [self.source()] + [
            SourceFile(
                path=path, data=json.dumps(list(targets)).encode("utf-8"), language="binary-listing", input="example"
            )
            for path, targets in self.binaries
        ]


@dataclass(frozen=True, slots=True)
class Rule:
    """One loaded rule; ``when`` is its compiled condition."""

    id: str
    name: str
    severity: Severity
    languages: tuple[Language, ...]
    """Empty: every language."""
    kinds: tuple[GateKind, ...]
    """Empty: every gate kind."""
    when: Predicate
    condition: str
    """The ``when`` as written (YAML), for ``rules show`` and the docs."""
    yields_to: tuple[str, ...]
    """Rules that say the same and more: this one is dropped on a gate where one of them fires."""
    routes_away: bool
    """A finding means its decision routes a target away from a fast path (the headline counts them)."""
    opt_in: bool
    message: str
    rationale: str
    remediation: str
    references: tuple[str, ...]
    invalid: tuple[Example, ...]
    valid: tuple[Example, ...]
    source: str
    """The rule file."""

    def applies(self, gate: Gate) -> bool:
        """Whether the gate is of a language and kind this rule looks at."""
        return (not self.languages or gate.language in self.languages) and (not self.kinds or gate.kind in self.kinds)


@cache
def schema() -> dict:
    """The rule schema, with its closed vocabularies (severities, languages, gate kinds, the
    predicates and the values they take) filled in from the code, so that a rule naming a kind
    that does not exist fails to load (and ``archaudit rules test`` with it) instead of silently
    matching nothing. ``rules/schema.json`` is this schema written out for editors
    (``scripts/gen_rule_docs.py``); a test keeps the two equal."""
    text = resources.files("auditor.rules.pack").joinpath("schema.json").read_text("utf-8")
    return with_vocabulary(json.loads(text))


def with_vocabulary(base: dict) -> dict:
    """``base`` (the schema's structure and descriptions) with every enum taken from the code."""
    out = json.loads(json.dumps(base))
    props = out["properties"]
    props["severity"]["enum"] = [s.value for s in reversed(SEVERITIES)]
    applies = props["applies_to"]["properties"]
    applies["languages"]["items"] = {"enum": [lang.value for lang in Language]}
    applies["kinds"]["items"] = {"enum": [k.value for k in GateKind]}
    out["$defs"]["example"]["properties"]["language"]["enum"] = [lang.value for lang in Language]
    condition = out["$defs"]["condition"]["oneOf"]
    condition[0]["enum"] = list(PREDICATES)
    keyed = [c for c in condition[1:] if next(iter(c["properties"])) in ("all", "any", "not")]
    condition[1:] = keyed + [_parametric(name, values) for name, values in PARAMETRIC_VALUES.items()]
    return out


def _parametric(name: str, values: tuple[str, ...]) -> dict:
    """``name: value`` or ``name: [value, ...]`` in a ``when``."""
    one = {"enum": list(values)}
    many = {"type": "array", "items": one, "minItems": 1, "uniqueItems": True}
    return {
        "type": "object",
        "properties": {name: {"oneOf": [one, many]}},
        "required": [name],
        "additionalProperties": False,
    }


def _compile(node: object) -> Predicate:
    """A ``when`` value (already schema-checked) as a function of a :class:`GateView`."""
    if isinstance(node, str):
        return PREDICATES[node]
    assert isinstance(node, dict) and len(node) == 1, node
    ((key, value),) = node.items()
    if key == "all":
        parts = [_compile(x) for x in value]
        return lambda v: all(p(v) for p in parts)
    if key == "any":
        parts = [_compile(x) for x in value]
        return lambda v: any(p(v) for p in parts)
    if key == "not":
        inner = _compile(value)
        return lambda v: not inner(v)
    test = PARAMETRIC[key]
    return lambda v: test(v, value)


def _duplicate_key(node: yaml.Node) -> tuple[int, str] | None:
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for k, _v in node.value:
            if k.value in seen:
                return k.start_mark.line + 1, f"duplicate key {k.value!r}"
            seen.add(k.value)
        children: Iterable[yaml.Node] = (v for _, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        return None
    return next((d for d in map(_duplicate_key, children) if d), None)


def _node_at(node: yaml.Node, path: Iterable) -> yaml.Node:
    for key in path:
        if isinstance(node, yaml.MappingNode):
            node = next(v for k, v in node.value if k.value == key)
        elif isinstance(node, yaml.SequenceNode):
            node = node.value[key]
    return node


def _key_line(node: yaml.Node, key: str) -> int:
    return next(k.start_mark.line + 1 for k, _ in node.value if k.value == key)


def _schema_problem(error: jsonschema.ValidationError, root: yaml.Node) -> tuple[int, str]:
    """Line and wording of the most relevant schema error."""
    node = _node_at(root, error.absolute_path)
    line = node.start_mark.line + 1
    where = ".".join(str(p) for p in error.absolute_path)
    inside = f" in {where}" if where else ""
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = sorted(k for k in error.instance if k not in known)
        return _key_line(node, extra[0]), f"unknown key {extra[0]!r}{inside}"
    if error.validator == "required":
        return line, f"{error.message.removesuffix(' is a required property')} is missing{inside}"
    if error.validator == "oneOf" and "when" in error.absolute_path:
        shown = next(iter(error.instance), error.instance) if isinstance(error.instance, dict) else error.instance
        known = ", ".join(sorted(PREDICATES) + sorted(PARAMETRIC) + ["all", "any", "not"])
        return line, f"unknown or malformed condition {shown!r}{inside} (known: {known})"
    return line, f"{where or 'rule'}: {error.message}"


def _examples(raw: list, node: yaml.Node) -> tuple[Example, ...]:
    return tuple(
        Example(
            e["language"],
            e["filename"],
            e["code"],
            n.start_mark.line + 1,
            tuple((path, tuple(t)) for path, t in sorted(e.get("binaries", {}).items())),
        )
        for e, n in zip(raw, node.value)
    )


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader where PyYAML was built with it: the same nodes and marks, ten times faster
(the rule pack is read on every run)."""


def parse(text: str, path: str) -> Rule:
    """One rule from its file text; :class:`RuleError` names the line of the first problem."""
    try:
        loader = _LOADER(text)
        try:
            root = loader.get_single_node()
            if root is None:
                raise RuleError(f"{path}:1: empty rule file")
            dup = _duplicate_key(root)
            if dup:
                raise RuleError(f"{path}:{dup[0]}: {dup[1]}")
            data = loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise RuleError(f"{path}:{mark.line + 1 if mark else 1}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RuleError(f"{path}:1: invalid YAML: {exc}") from None
    error = best_match(jsonschema.Draft202012Validator(schema()).iter_errors(data))
    if error is not None:
        line, reason = _schema_problem(error, root)
        raise RuleError(f"{path}:{line}: {reason}")
    stem = Path(path).stem
    if stem != f"{data['id']}-{data['name']}":
        raise RuleError(f"{path}:1: file should be named {data['id']}-{data['name']}.yaml")
    for field in (f for _, f, _, _ in string.Formatter().parse(data["message"]) if f is not None):
        if field not in FIELDS:
            line = _key_line(root, "message")
            raise RuleError(f"{path}:{line}: unknown message field {{{field}}} (known: {', '.join(sorted(FIELDS))})")
    applies = data["applies_to"]
    examples = _node_at(root, ["examples"])
    return Rule(
        id=data["id"],
        name=data["name"],
        severity=Severity(data["severity"]),
        languages=tuple(Language(x) for x in applies.get("languages", ())),
        kinds=tuple(GateKind(x) for x in applies.get("kinds", ())),
        when=_compile(data["when"]),
        condition=yaml.safe_dump(data["when"], sort_keys=False, default_flow_style=False).strip(),
        yields_to=tuple(data.get("yields_to", ())),
        routes_away=bool(data.get("routes_away", False)),
        opt_in=bool(data.get("opt_in", False)),
        message=data["message"].strip(),
        rationale=data["rationale"].strip(),
        remediation=data["remediation"].strip(),
        references=tuple(data["references"]),
        invalid=_examples(data["examples"]["invalid"], _node_at(examples, ["invalid"])),
        valid=_examples(data["examples"]["valid"], _node_at(examples, ["valid"])),
        source=path,
    )


def describe(rule: Rule) -> str:
    """A rule as text, for ``archaudit rules show``."""
    scope = ", ".join(rule.languages + rule.kinds) or "all gates"
    indent = lambda text: "\n".join("  " + ln if ln else "" for ln in text.splitlines())  # noqa: E731
    parts = [
        f"{rule.id} {rule.name}  [{rule.severity}]  ({rule.source})",
        f"applies to: {scope}",
        "when:\n" + indent(rule.condition),
        "message:\n" + indent(rule.message),
        "why:\n" + indent(rule.rationale),
        "what to do:\n" + indent(rule.remediation),
        "references:\n" + "\n".join(f"  {r}" for r in rule.references),
        f"examples: {len(rule.invalid)} invalid, {len(rule.valid)} valid (archaudit rules test)",
    ]
    return "\n\n".join(parts) + "\n"


def _unique(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    seen: dict[str, Rule] = {}
    for r in rules:
        if r.id in seen:
            raise RuleError(f"{r.source}:1: rule id {r.id} is also defined in {seen[r.id].source}")
        seen[r.id] = r
    return tuple(sorted(seen.values(), key=lambda r: r.id))


@cache
def builtin() -> tuple[Rule, ...]:
    """The rules shipped in the ``auditor.rules.pack`` package."""
    folder = resources.files("auditor.rules.pack")
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return _unique(parse(f.read_text("utf-8"), f"rules/{f.name}") for f in files)


def load_dir(path: Path) -> tuple[Rule, ...]:
    """User rules from a directory of ``*.yaml`` files."""
    if not path.is_dir():
        raise RuleError(f"{path}: not a rules directory")
    rules = []
    for f in sorted(path.glob("*.yaml")):
        try:
            text = f.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RuleError(f"{f}:1: cannot read rule file ({exc})") from None
        rules.append(parse(text, str(f)))
    return tuple(rules)


def combine(*packs: Sequence[Rule]) -> tuple[Rule, ...]:
    """Several rule packs as one, refusing an id defined twice."""
    return _unique(r for pack in packs for r in pack)


# Examples ------------------------------------------------------------------------------

OUTCOMES = ("reported", "missing", "validated", "noisy")
"""``invalid`` examples are reported or missing; ``valid`` ones validated or noisy."""

Scan = Callable[[Sequence[SourceFile], Rule], tuple[Sequence[Finding], Sequence[FileError]]]
"""Runs files through the pipeline with one rule; returns its findings and file errors."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """How one example fared."""

    rule: str
    case: str
    """``invalid`` or ``valid``."""
    example: Example
    outcome: str
    detail: str = ""

    @property
    def passed(self) -> bool:
        """Reported or validated."""
        return self.outcome in ("reported", "validated")


def verify(rule: Rule, scan: Scan) -> tuple[CaseResult, ...]:
    """Run every example of ``rule`` through ``scan``; file errors fail the example."""
    out = []
    for case, examples in (("invalid", rule.invalid), ("valid", rule.valid)):
        for ex in examples:
            findings, errors = scan(ex.sources(), rule)
            hits = [f for f in findings if f.rule == rule.id]
            if errors:
                outcome, detail = ("missing" if case == "invalid" else "noisy"), "; ".join(e.reason for e in errors)
            elif case == "invalid":
                outcome, detail = ("reported", hits[0].message) if hits else ("missing", "no finding")
            else:
                outcome, detail = ("noisy", hits[0].message) if hits else ("validated", "")
            out.append(CaseResult(rule.id, case, ex, outcome, detail))
    return tuple(out)
