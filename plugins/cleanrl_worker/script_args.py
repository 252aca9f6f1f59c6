"""Read a CleanRL script's ``Args`` dataclass without importing it, and check an argv against it.

The script is parsed with :mod:`ast`, never executed, so a dry run needs neither torch nor
the script's dependencies. For each field: its name, annotation text, default (the literal
value, :data:`COMPUTED` when it is an expression such as ``os.path.basename(__file__)``, or
:data:`REQUIRED`) and docstring. :func:`validate_argv` then mirrors tyro's rules: flags are
``--field-name`` (``--field_name`` also works); a bool is ``--flag`` / ``--no-flag`` and takes
no value; ``None`` is accepted for Optional fields and for fields whose default is None
(tyro treats those as Optional too); lists take any number of values.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleanrl_worker.flags import flag_name
from cleanrl_worker.ranges import range_problem
from mosaic_core import UsageError

SCALARS = {"bool", "int", "float", "str"}
SEQUENCES = {"list", "List", "tuple", "Tuple", "Sequence"}


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


COMPUTED = _Marker("computed")  # the default is an expression evaluated when the script runs
REQUIRED = _Marker("required")  # no default: tyro makes the flag required


class NoArgsClassError(UsageError):
    """The script defines no ``Args`` class, so its flags cannot be checked."""


@dataclass(frozen=True)
class ArgField:
    """One field of a script's ``Args``; ``kind`` is bool/int/float/str/list/literal/other."""

    name: str
    annotation: str
    default: Any
    default_text: str | None
    help: str
    kind: str
    optional: bool = False
    item_kind: str | None = None  # element kind of a list field
    choices: tuple | None = None  # values of a Literal field

    @property
    def flag(self) -> str:
        return flag_name(self.name)

    def to_dict(self) -> dict[str, Any]:
        default = self.default if self.default not in (COMPUTED, REQUIRED) else repr(self.default)
        return {
            "name": self.name,
            "flag": self.flag,
            "annotation": self.annotation,
            "default": default,
            "default_text": self.default_text,
            "kind": self.kind,
            "optional": self.optional,
            "help": self.help,
        }


@dataclass(frozen=True)
class ScriptArgs:
    script: Path
    fields: dict[str, ArgField]


# --------------------------------------------------------------------------- reading
def _type_of(node: ast.expr | None) -> tuple[str, bool, str | None, tuple | None]:
    """(kind, optional, item_kind, choices) of an annotation node."""
    if node is None:
        return "other", False, None, None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "int" (string annotation)
        try:
            return _type_of(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return "other", False, None, None
    if isinstance(node, ast.Constant) and node.value is None:
        return "none", True, None, None
    name = _name(node)
    if name in SCALARS:
        return name, False, None, None
    if name in SEQUENCES:
        return "list", False, "str" if name in ("list", "List") else None, None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right])
    if isinstance(node, ast.Subscript):
        outer = _name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer == "Optional":
            kind, _, item, choices = _type_of(args[0])
            return kind, True, item, choices
        if outer == "Union":
            return _union(args)
        if outer in SEQUENCES:
            item = _type_of(args[0])[0]
            return "list", False, item if item in SCALARS else None, None
        if outer == "Literal":
            try:
                return "literal", False, None, tuple(ast.literal_eval(a) for a in args)
            except ValueError:
                return "other", False, None, None
        if outer == "Annotated":
            return _type_of(args[0])
    return "other", False, None, None


def _union(members: Iterable[ast.expr]) -> tuple[str, bool, str | None, tuple | None]:
    parts = [_type_of(m) for m in members]
    optional = any(p[0] == "none" or p[1] for p in parts)
    rest = [p for p in parts if p[0] != "none"]
    if len(rest) == 1:
        return rest[0][0], optional, rest[0][2], rest[0][3]
    return "other", optional, None, None


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.Optional, tyro.conf.X
        return node.attr
    return None


def _default(node: ast.expr | None) -> tuple[Any, str | None]:
    if node is None:
        return REQUIRED, None
    text = ast.unparse(node)
    if isinstance(node, ast.Call) and _name(node.func) == "field":
        keywords = {k.arg: k.value for k in node.keywords}
        if "default" in keywords:
            return _default(keywords["default"])
        factory = keywords.get("default_factory")
        if isinstance(factory, ast.Lambda):
            return _default(factory.body)[0], text
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "tuple"):
            return {"list": [], "dict": {}, "tuple": ()}[factory.id], text
        return (COMPUTED if factory is not None else REQUIRED), text
    try:
        return ast.literal_eval(node), text
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return COMPUTED, text


def _class_fields(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], seen: set[str]) -> dict[str, ArgField]:
    fields: dict[str, ArgField] = {}
    for base in cls.bases:  # fields of base classes defined in the same file come first
        base_name = _name(base)
        if base_name in classes and base_name not in seen:
            fields.update(_class_fields(classes[base_name], classes, seen | {base_name}))
    body = cls.body
    for index, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        annotation = ast.unparse(stmt.annotation)
        if _name(stmt.annotation) == "ClassVar" or annotation.startswith(("ClassVar", "typing.ClassVar")):
            continue
        after = body[index + 1] if index + 1 < len(body) else None
        doc = (
            after.value.value
            if (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            )
            else ""
        )
        default, default_text = _default(stmt.value)
        kind, optional, item, choices = _type_of(stmt.annotation)
        name = stmt.target.id
        fields[name] = ArgField(
            name,
            annotation,
            default,
            default_text,
            " ".join(doc.split()),
            kind,
            optional or default is None,
            item,
            choices,
        )
    return fields


def read_script_args(script: str | Path, class_name: str = "Args") -> ScriptArgs:
    """Parse ``script`` (never run it) and return its ``Args`` fields in definition order."""
    path = Path(script)
    try:
        source = path.read_bytes()
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read script {path!s:.200}: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = f" at line {lineno}" if (lineno := getattr(exc, "lineno", None)) else ""
        raise UsageError(f"script {path} is not valid Python{line}: {getattr(exc, 'msg', exc)}") from exc
    top = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    cls = top.get(class_name) or next(
        (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name), None
    )
    if cls is None:
        raise NoArgsClassError(
            f"script {path} defines no `{class_name}` class (CleanRL's tyro dataclass), "
            "so its flags cannot be checked before it runs"
        )
    return ScriptArgs(path, _class_fields(cls, top, {class_name}))


# --------------------------------------------------------------------------- validating
def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_flag(token: str) -> bool:
    return len(token) > 1 and token.startswith("-") and not _is_number(token)


def _flag_table(fields: Mapping[str, ArgField]) -> dict[str, tuple[ArgField, bool]]:
    """Every accepted spelling -> (field, negated)."""
    table: dict[str, tuple[ArgField, bool]] = {}
    for f in fields.values():
        for spelling in {f.flag[2:], f.name}:
            table["--" + spelling] = (f, False)
            if f.kind == "bool" and not f.optional:
                table["--no-" + spelling] = (f, True)
    return table


def _check_value(f: ArgField, kind: str, value: str, ranges: bool = True) -> str | None:
    if value == "None" and f.optional and kind == f.kind:
        return None
    if kind == "int":
        try:
            int(value)
        except ValueError:
            return f"expects an integer, got {value!r}"
        return range_problem(f.name, kind, value) if ranges else None
    elif kind == "float":
        if not _is_number(value):
            return f"expects a number, got {value!r}"
        return range_problem(f.name, kind, value) if ranges else None
    elif kind == "bool" and value not in ("True", "False"):
        return f"expects True or False, got {value!r}"
    elif kind == "literal" and value not in [str(c) for c in f.choices or ()]:
        return f"expects one of {', '.join(str(c) for c in f.choices or ())}, got {value!r}"
    return None


def _check_flag(
    flag: str, f: ArgField, negated: bool, values: list[str], glued: bool, ranges: bool = True
) -> list[str]:
    if f.kind == "bool" and not f.optional:
        if values:
            shown = f"{flag}={values[0]}" if glued else f"{flag} {' '.join(values)}"
            return [f"{flag} is a bool flag and takes no value (write {f.flag} or --no-{f.flag[2:]}), got {shown!r}"]
        return []
    if f.kind == "list":
        if f.optional and values == ["None"]:
            return []
        problems = [_check_value(f, f.item_kind or "str", v, ranges) for v in values]
        return [f"{flag} {p}" for p in problems if p]
    if not values:
        return [f"{flag} needs a value"]
    if len(values) > 1:
        return [f"{flag} takes one value, got {len(values)}: {' '.join(values)}"]
    problem = _check_value(f, f.kind, values[0], ranges)
    return [f"{flag} {problem}"] if problem else []


def validate_argv(argv: list[str], fields: Mapping[str, ArgField] | ScriptArgs, ranges: bool = True) -> list[str]:
    """Problems of ``argv`` against a script's ``Args`` fields, each naming the flag (empty = fine).
    With ``ranges`` (the default) values are also checked against :mod:`cleanrl_worker.ranges`
    (finite floats, int64, counts >= 1…), which is stricter than tyro's own parsing."""
    if isinstance(fields, ScriptArgs):
        fields = fields.fields
    table = _flag_table(fields)
    canonical = sorted(
        {f.flag for f in fields.values()}
        | {"--no-" + f.flag[2:] for f in fields.values() if f.kind == "bool" and not f.optional}
    )
    problems: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not _is_flag(token):
            problems.append(f"unexpected argument {token!r} (no flag before it takes a value)")
            continue
        flag, glued, value = token.partition("=")
        values = [value] if glued else []
        while not glued and i < len(argv) and not _is_flag(argv[i]):
            values.append(argv[i])
            i += 1
        if flag not in table:
            nested = table.get(flag.split(".", 1)[0])
            if "." in flag and nested and nested[0].kind == "other":
                continue  # a field of a nested dataclass (``--outer.inner``): tyro checks those
            close = difflib.get_close_matches(flag.replace("_", "-"), canonical, n=1, cutoff=0.6)
            problems.append(f"unknown flag {flag}" + (f" (did you mean {close[0]}?)" if close else ""))
            continue
        problems += _check_flag(flag, *table[flag], values, bool(glued), ranges)
    return problems


def check_script_argv(script: str | Path, argv: list[str]) -> list[str]:
    """Validate ``argv`` against ``script``'s ``Args``; raise :class:`UsageError` naming every problem.

    Returns notes for the user: a script without an ``Args`` class (e.g. argparse-based) is not
    checked, and says so, rather than blocking the run.
    """
    try:
        args = read_script_args(script)
    except NoArgsClassError as exc:
        return [str(exc)]
    problems = validate_argv(argv, args)
    if problems:
        raise UsageError(f"flags rejected by {Path(script).name}'s Args: " + "; ".join(problems))
    return []


def resolved_value(script: str | Path, argv: list[str], name: str) -> Any:
    """The value ``name`` will take in the script: from ``argv`` when given, else its literal
    default (None when neither is known, e.g. a computed default or no ``Args``)."""
    flag = flag_name(name)
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith(flag + "="):
            return item.split("=", 1)[1]
    try:
        field = read_script_args(script).fields.get(name)
    except (UsageError, OSError, SyntaxError):
        return None
    return None if field is None or field.default in (COMPUTED, REQUIRED) else field.default
