"""Expressions of the scripting SMTs (Filter, ContentBasedRouter), parsed safely and evaluated per
block over the Arrow columns.

Two languages. Debezium's Groovy and JavaScript (`jsr223.groovy`, `jsr223.graal.js`, `jsr223.js`,
`jsr223.javascript`), as far as an expression is plain data access and logic: variables `key`,
`value`, `topic`, `headers`, `keySchema`, `valueSchema`; property access `value.after.id`,
`value?.after`, `value.get('op')`, `value['op']`, `headers.h.value`, `valueSchema.name`; literals
(numbers, 'strings', "strings", true, false, null); `==` `!=` `===` `!==` `<` `<=` `>` `>=`, `&&` `||`
`!`, `+` (string concatenation when either side is a string) `-` `*` `/` `%`, `a ? b : c`, and the
string methods `equals`, `startsWith`, `endsWith`, `contains`, `matches`, `length`. And Python
(`python`): the same variables, `value.after.id` or `value['after']['id']`, `and` `or` `not`, the
comparisons (chained too), `is None`, `is not None`, `in` a literal list or tuple, arithmetic,
`a if c else b`, and `startswith`, `endswith`. Anything else (another call, a name that is not a
variable, an assignment, a lambda) is refused when the transformation is configured. Nothing is
handed to `eval`: the text is parsed into `Node`s (Python's by `ast.parse` and a whitelist).

Evaluation is column-wise with pyarrow.compute: a field is a struct child (null where a struct above
it is null, as Groovy's `?.`), literals and `topic` are scalars, comparisons and logic are compute
kernels. A null compares equal only to null, and is false in a condition.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_array, bool_values, lit
from headwater.events.typed import TypedBlock, physical_int
from headwater.transforms.blocks import header_values, struct_field

GROOVY = ("jsr223.groovy", "jsr223.graal.js", "jsr223.js", "jsr223.javascript")
PYTHON = "python"
LANGUAGES = (*GROOVY, PYTHON)
VARIABLES = ("key", "value", "topic", "headers", "keySchema", "valueSchema")


class ExpressionError(ValueError):
    """An expression that cannot be parsed or uses what is not supported."""


@dataclass(frozen=True)
class Node:
    """An expression node: `kind` and its parts (a literal's value, a variable's or property's name,
    an operator's operands)."""

    kind: str  # lit | var | attr | call | not | neg | op | cond
    parts: tuple[Any, ...]


# ------------------------------------------------------------------------------------------ Groovy/JS

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<number>\d+\.\d+|\d+)
  | (?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<name>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op>===|!==|==|!=|<=|>=|&&|\|\||\?\.|[!<>+\-*/%?:.()\[\],])
""", re.VERBOSE)
_BINARY = {"||": 2, "&&": 3, "==": 4, "!=": 4, "===": 4, "!==": 4, "<": 5, "<=": 5, ">": 5, ">=": 5,
           "+": 6, "-": 6, "*": 7, "/": 7, "%": 7}
_SAME = {"===": "==", "!==": "!=", "&&": "and", "||": "or"}
_METHODS = ("get", "equals", "startsWith", "endsWith", "contains", "matches", "length", "size")
_KEYWORDS = {"true": True, "false": False, "null": None, "undefined": None}


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ExpressionError(f"unexpected {text[pos]!r} at position {pos}")
        pos = m.end()
        if m.lastgroup != "space":
            out.append((m.lastgroup or "", m.group()))
    return out


class _Parser:
    """A Pratt parser of the Groovy/JavaScript subset."""

    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (value is not None and t[1] != value):
            raise ExpressionError(f"expected {value or 'more'}, found {t[1] if t else 'the end'}")
        self.i += 1
        return t

    def parse(self) -> Node:
        node = self.expression(0)
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return node

    def expression(self, floor: int) -> Node:
        left = self.unary()
        while True:
            t = self.peek()
            if t is None or t[0] != "op":
                return left
            if t[1] == "?" and floor <= 1:
                self.take()
                yes = self.expression(1)
                self.take(":")
                left = Node("cond", (left, yes, self.expression(1)))
                continue
            power = _BINARY.get(t[1])
            if power is None or power < floor:
                return left
            self.take()
            right = self.expression(power + 1)
            left = Node("op", (_SAME.get(t[1], t[1]), left, right))

    def unary(self) -> Node:
        t = self.peek()
        if t == ("op", "!"):
            self.take()
            return Node("not", (self.unary(),))
        if t == ("op", "-"):
            self.take()
            return Node("neg", (self.unary(),))
        return self.postfix(self.primary())

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "number":
            return Node("lit", (float(text) if "." in text else int(text),))
        if kind == "string":
            return Node("lit", (re.sub(r"\\(.)", r"\1", text[1:-1]),))
        if kind == "name":
            if text in _KEYWORDS:
                return Node("lit", (_KEYWORDS[text],))
            if text not in VARIABLES:
                raise ExpressionError(f"unknown name {text!r} (the variables are {', '.join(VARIABLES)})")
            return Node("var", (text,))
        if text == "(":
            node = self.expression(0)
            self.take(")")
            return node
        raise ExpressionError(f"unexpected {text!r}")

    def postfix(self, node: Node) -> Node:
        while True:
            t = self.peek()
            if t in (("op", "."), ("op", "?.")):
                self.take()
                name = self.take()
                if name[0] != "name":
                    raise ExpressionError(f"expected a property name after '.', found {name[1]!r}")
                if self.peek() == ("op", "("):
                    node = self.call(node, name[1])
                else:
                    node = Node("attr", (node, name[1]))
            elif t == ("op", "["):
                self.take()
                index = self.expression(0)
                self.take("]")
                if index.kind != "lit" or not isinstance(index.parts[0], str):
                    raise ExpressionError("only a string literal may index: value['after']")
                node = Node("attr", (node, index.parts[0]))
            else:
                return node

    def call(self, target: Node, method: str) -> Node:
        if method not in _METHODS:
            raise ExpressionError(f"unsupported method {method!r} (supported: {', '.join(_METHODS)})")
        self.take("(")
        args = []
        while self.peek() != ("op", ")"):
            args.append(self.expression(0))
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        if method == "get":
            if len(args) != 1 or args[0].kind != "lit" or not isinstance(args[0].parts[0], str):
                raise ExpressionError("get takes one string literal: value.get('after')")
            return Node("attr", (target, args[0].parts[0]))
        return Node("call", (method, target, *args))


# ------------------------------------------------------------------------------------------ Python

_PY_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "%"}
_PY_METHODS = {"startswith": "startsWith", "endswith": "endsWith", "get": "get"}


def _from_python(n: ast.AST) -> Node:
    if isinstance(n, ast.Constant) and (n.value is None or isinstance(n.value, (bool, int, float, str))):
        return Node("lit", (n.value,))
    if isinstance(n, ast.Name):
        if n.id not in VARIABLES:
            raise ExpressionError(f"unknown name {n.id!r} (the variables are {', '.join(VARIABLES)})")
        return Node("var", (n.id,))
    if isinstance(n, ast.Attribute):
        return Node("attr", (_from_python(n.value), n.attr))
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
        return Node("attr", (_from_python(n.value), n.slice.value))
    if isinstance(n, ast.BoolOp):
        op = "and" if isinstance(n.op, ast.And) else "or"
        out = _from_python(n.values[0])
        for v in n.values[1:]:
            out = Node("op", (op, out, _from_python(v)))
        return out
    if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.Not, ast.USub)):
        return Node("not" if isinstance(n.op, ast.Not) else "neg", (_from_python(n.operand),))
    if isinstance(n, ast.BinOp) and type(n.op) in _PY_OPS:
        return Node("op", (_PY_OPS[type(n.op)], _from_python(n.left), _from_python(n.right)))
    if isinstance(n, ast.IfExp):
        return Node("cond", (_from_python(n.test), _from_python(n.body), _from_python(n.orelse)))
    if isinstance(n, ast.Compare):
        parts, left = [], _from_python(n.left)
        for cmp, right_ast in zip(n.ops, n.comparators, strict=True):
            right = _from_python_compared(right_ast, cmp)
            if isinstance(cmp, (ast.Is, ast.IsNot)):
                if not (right.kind == "lit" and right.parts[0] is None):
                    raise ExpressionError("'is' compares with None only")
                parts.append(Node("op", ("==" if isinstance(cmp, ast.Is) else "!=", left, right)))
            elif isinstance(cmp, (ast.In, ast.NotIn)):
                test = Node("in", (left, right.parts))
                parts.append(test if isinstance(cmp, ast.In) else Node("not", (test,)))
            elif type(cmp) in _PY_OPS:
                parts.append(Node("op", (_PY_OPS[type(cmp)], left, right)))
            else:
                raise ExpressionError(f"unsupported comparison {type(cmp).__name__}")
            left = right
        out = parts[0]
        for p in parts[1:]:
            out = Node("op", ("and", out, p))
        return out
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _PY_METHODS and not n.keywords:
        target, args = _from_python(n.func.value), [_from_python(a) for a in n.args]
        if n.func.attr == "get":
            if len(args) != 1 or args[0].kind != "lit" or not isinstance(args[0].parts[0], str):
                raise ExpressionError("get takes one string literal: value.get('after')")
            return Node("attr", (target, args[0].parts[0]))
        return Node("call", (_PY_METHODS[n.func.attr], target, *args))
    raise ExpressionError(f"unsupported Python: {ast.unparse(n)!r}")


def _from_python_compared(n: ast.AST, op: ast.cmpop) -> Node:
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(n, (ast.List, ast.Tuple, ast.Set)) or not all(isinstance(e, ast.Constant) for e in n.elts):
            raise ExpressionError("'in' takes a literal list: value.op in ['c', 'u']")
        return Node("lit", tuple(e.value for e in n.elts))  # type: ignore[attr-defined]
    return _from_python(n)


def parse(text: str, language: str) -> Node:
    """`text` in `language` (one of `LANGUAGES`) as a `Node`; ExpressionError naming what is wrong."""
    if language == PYTHON:
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise ExpressionError(f"not a Python expression: {exc.msg}") from exc
        return _from_python(tree.body)
    return _Parser(text).parse()


# ------------------------------------------------------------------------------------------ evaluation

@dataclass(frozen=True)
class Value:
    """What a node gives for a block: a column (`data` an Arrow array) or one value for every row
    (`data` a Python value), with its Connect schema when it is a record's part."""

    data: Any
    schema: dict | None = None
    header: str | None = None  # `headers.<name>`, before `.value` or `.schema`

    @property
    def column(self) -> bool:
        return isinstance(self.data, (pa.Array, pa.ChunkedArray))


def evaluate(node: Node, block: TypedBlock) -> Value:
    """The value of `node` for every row of `block`."""
    kind, parts = node.kind, node.parts
    if kind == "lit":
        return Value(parts[0])
    if kind == "var":
        return _variable(parts[0], block)
    if kind == "attr":
        return _attribute(evaluate(parts[0], block), parts[1], block)
    if kind == "not":
        return _bools(_not(truth(evaluate(parts[0], block), len(block))))
    if kind == "neg":
        v = evaluate(parts[0], block)
        return Value(pc.negate(v.data) if v.column else -v.data)
    if kind == "cond":
        test = truth(evaluate(parts[0], block), len(block))
        yes, no = evaluate(parts[1], block), evaluate(parts[2], block)
        if not isinstance(test, np.ndarray):
            return yes if test else no
        return Value(pc.if_else(bool_array(test), _array(yes, len(block)), _array(no, len(block))))
    if kind == "in":
        v = evaluate(parts[0], block)
        options = list(parts[1])
        if not v.column:
            return Value(v.data in options)
        return Value(pc.fill_null(pc.is_in(v.data, value_set=pa.array(options)), False))
    if kind == "call":
        return _call(parts[0], evaluate(parts[1], block), [evaluate(a, block) for a in parts[2:]], len(block))
    op, left, right = parts
    if op in ("and", "or"):
        a, b = truth(evaluate(left, block), len(block)), truth(evaluate(right, block), len(block))
        return _bools(a & b if op == "and" else a | b)
    return _binary(op, evaluate(left, block), evaluate(right, block), len(block))


def _variable(name: str, block: TypedBlock) -> Value:
    if name == "topic":
        return Value(block.topic)
    if name in ("key", "value"):
        return Value(block.batch.column(name), getattr(block, f"{name}_schema"))
    if name == "keySchema":
        return Value(block.key_schema)
    if name == "valueSchema":
        return Value(block.value_schema)
    return Value(None, None, "")  # headers


def _attribute(target: Value, name: str, block: TypedBlock) -> Value:
    if target.header == "":  # headers.<name>
        return Value(None, None, name)
    if target.header:  # headers.<name>.value / .schema
        found = header_values(block, target.header)
        if name == "value":
            return Value(found[0] if found else pa.nulls(len(block)), found[1] if found else None)
        if name == "schema":
            return Value(found[1] if found else None)
        raise ExpressionError(f"a header has .value and .schema, not .{name}")
    if target.column:
        found_field = struct_field(target.data, target.schema, name)
        if found_field is None:
            raise ExpressionError(f"no field {name!r} in {(target.schema or {}).get('name') or 'the struct'}")
        column, schema = found_field
        if pa.types.is_temporal(column.type):  # a Connect Date, Time or Timestamp is its number, as in Java
            column = column.view(physical_int(column.type))
        return Value(column, schema)
    if isinstance(target.data, dict):  # a schema: keySchema.name, valueSchema.type, ...
        return Value(target.data.get(name))
    if target.data is None:
        return Value(None)
    raise ExpressionError(f"{target.data!r} has no property {name!r}")


def _array(v: Value, n: int) -> pa.Array:
    if v.column:
        return v.data
    return pa.array([v.data] * n) if v.data is not None else pa.nulls(n)


def truth(v: Value, n: int) -> np.ndarray | bool:
    """A condition's value: booleans (null is false)."""
    if not v.column:
        if v.data is not None and not isinstance(v.data, bool):
            raise ExpressionError(f"expected a boolean, got {v.data!r}")
        return bool(v.data)
    data = v.data
    if not pa.types.is_boolean(data.type) and not pa.types.is_null(data.type):
        raise ExpressionError(f"expected a boolean, got a column of {data.type}")
    return bool_values(pc.fill_null(data.cast(pa.bool_()), False))


def _bools(t: np.ndarray | bool) -> Value:
    """A condition's result as a value: a boolean column, or one boolean for the block."""
    return Value(bool_array(t) if isinstance(t, np.ndarray) else t)


def _not(t: np.ndarray | bool) -> np.ndarray | bool:
    return ~t if isinstance(t, np.ndarray) else not t


_COMPARE = {"==": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}
_ARITHMETIC = {"+": "add", "-": "subtract", "*": "multiply"}


def _is_text(v: Value) -> bool:
    return pa.types.is_string(v.data.type) if v.column else isinstance(v.data, str)


def _binary(op: str, a: Value, b: Value, n: int) -> Value:
    if not a.column and not b.column:  # one value for the block: Python's own operators
        return Value(_scalar(op, a.data, b.data))
    if op in _COMPARE:
        if a.data is None or b.data is None:  # == null, != null
            other = b if a.data is None else a
            isnull = pc.is_null(other.data)
            return Value(isnull if op == "==" else pc.invert(isnull)) if op in ("==", "!=") else Value(pa.nulls(n, pa.bool_()))
        if _kind(a) != _kind(b) and "other" not in (_kind(a), _kind(b)):  # a string and a number are never equal
            if op not in ("==", "!="):
                raise ExpressionError(f"cannot compare a {_kind(a)} with a {_kind(b)}")
            return Value(pa.repeat(lit(op == "!="), n))
        left, right = _operand(a), _operand(b)
        if a.column and b.column:
            left, right = _comparable(left, right)
        elif isinstance(a.data, float) or isinstance(b.data, float):  # a decimal column against a float
            left, right = (pc.cast(x, pa.float64()) if isinstance(x, pa.Array) else x for x in (left, right))
        result = getattr(pc, _COMPARE[op])(left, right)
        if op == "==" and a.column and b.column:  # null == null
            result = pc.if_else(pc.and_(pc.is_null(a.data), pc.is_null(b.data)), True, result)
        return Value(pc.fill_null(result, op == "!="))
    if op == "+" and (_is_text(a) or _is_text(b)):  # Java's string concatenation: null is "null"
        parts = [pc.fill_null(v.data.cast(pa.string()), "null") if v.column else lit("null" if v.data is None else
                                                                                       _java_text(v.data)) for v in (a, b)]
        return Value(pc.binary_join_element_wise(*parts, lit("")))
    left, right = _operand(a), _operand(b)
    if op == "/":  # Groovy, JavaScript and Python divide integers exactly
        return Value(pc.divide(pc.cast(left, pa.float64()), pc.cast(right, pa.float64())))
    if op == "%":
        return Value(pc.subtract(left, pc.multiply(pc.floor(pc.divide(left, right)).cast(pa.int64()), right)))
    return Value(getattr(pc, _ARITHMETIC[op])(left, right))


def _operand(v: Value) -> Any:
    """A value as a compute function's argument."""
    if v.column:
        return v.data
    return pa.scalar(v.data, pa.float64()) if isinstance(v.data, float) else lit(v.data)


def _kind(v: Value) -> str:
    """string, number, boolean or other: what may be compared with what."""
    if v.column:
        t = v.data.type
        return ("string" if pa.types.is_string(t) else "boolean" if pa.types.is_boolean(t) else
                "number" if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) else "other")
    d = v.data
    return ("string" if isinstance(d, str) else "boolean" if isinstance(d, bool) else
            "number" if isinstance(d, (int, float)) else "other")


def _comparable(a: pa.Array, b: pa.Array) -> tuple[pa.Array, pa.Array]:
    if a.type == b.type:
        return a, b
    if (pa.types.is_integer(a.type) or pa.types.is_floating(a.type)) and \
            (pa.types.is_integer(b.type) or pa.types.is_floating(b.type)):
        return a.cast(pa.float64()), b.cast(pa.float64())
    return a.cast(pa.string()), b.cast(pa.string())


def _java_text(v: Any) -> str:
    return "true" if v is True else "false" if v is False else str(v)


def _scalar(op: str, a: Any, b: Any) -> Any:
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if op == "+" and (isinstance(a, str) or isinstance(b, str)):
        return ("null" if a is None else _java_text(a)) + ("null" if b is None else _java_text(b))
    if a is None or b is None:
        return None
    return {"<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b,
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
            "%": lambda: a % b}[op]()


def _call(method: str, target: Value, args: list[Value], n: int) -> Value:
    if method in ("length", "size"):
        return Value(pc.utf8_length(target.data) if target.column else (None if target.data is None else
                                                                          len(target.data)))
    if len(args) != 1 or args[0].column or not isinstance(args[0].data, str):
        raise ExpressionError(f"{method} takes one string literal")
    arg = args[0].data
    if not target.column:
        s = target.data
        if s is None:
            return Value(None)
        return Value({"equals": s == arg, "startsWith": s.startswith(arg), "endsWith": s.endswith(arg),
                      "contains": arg in s, "matches": re.fullmatch(arg, s) is not None}[method])
    col = target.data
    if method == "equals":
        return Value(pc.equal(col, lit(arg)))
    if method == "matches":
        return Value(pc.match_substring_regex(col, pattern=f"^(?:{arg})$"))
    kernel = {"startsWith": pc.starts_with, "endsWith": pc.ends_with, "contains": pc.match_substring}[method]
    return Value(kernel(col, pattern=arg))
