"""The head finder's filter as users write it ("layer >= 6 and sink_rate > 0.5"): parsed, never
evaluated, into a function of a metrics row; anything but comparisons of metric names and numbers
is refused by name.

A module of its own: it is a grammar, the same one js/views/finder_plot.js reads in the page
(tests/data/filter_cases.json holds the two equal), and it needs nothing of the finder but the
names of its columns.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ..errors import InputError


def safe_filter(expression: str, columns: Sequence[str]):
    """A filter as users write it ("layer >= 6 and sink_rate > 0.5"): comparisons of metric names and
    numbers, joined by and / or / not and parentheses (nothing: every head). → a function of a row
    (dict). Anything else (calls, attributes, names that are no metric) is refused by name."""
    if not expression.strip():
        return lambda row: True
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise InputError(f"The filter {expression!r} does not read as a condition: {error.msg}.") from None
    compare = {ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b, ast.Lt: lambda a, b: a < b,
               ast.LtE: lambda a, b: a <= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}

    def build(node):
        if isinstance(node, ast.BoolOp):
            parts = [build(v) for v in node.values]
            if isinstance(node.op, ast.And):
                return lambda row: all(p(row) for p in parts)
            return lambda row: any(p(row) for p in parts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = build(node.operand)
            return lambda row: not inner(row)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            value = -node.operand.value
            return lambda row: value
        if isinstance(node, ast.Compare):
            ops = []
            for op in node.ops:
                if type(op) not in compare:
                    raise InputError(f"The filter {expression!r} uses {type(op).__name__}: use <, <=, >, >=, == or !=.")
                ops.append(compare[type(op)])
            items = [build(node.left)] + [build(c) for c in node.comparators]
            return lambda row: all(op(items[i](row), items[i + 1](row)) for i, op in enumerate(ops))
        if isinstance(node, ast.Name):
            if node.id not in columns:
                raise InputError(f"The filter names {node.id!r}, which is no metric: use {', '.join(columns)}.")
            return lambda row: row[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return lambda row: node.value
        raise InputError(f"The filter {expression!r} may only compare metrics with numbers (and, or, not, parentheses).")

    return build(tree.body)
