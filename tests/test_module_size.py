"""Issue 32's limits on the package's size, read from its files: no module over
600 lines, no function over 80 lines of code (its docstring, blank lines and
comment lines not counted)."""

import ast

from package_tree import package_modules

MAX_MODULE_LINES = 600
MAX_FUNCTION_CODE_LINES = 80


def code_lines(function: ast.AST, lines: list[str]) -> int:
    """Lines of ``function``'s body that hold code (not its docstring, blank
    lines or comments).

    >>> source = 'def f():\\n    \"\"\"Doc.\\n\\n    More.\"\"\"\\n    # note\\n\\n    return 1\\n'
    >>> code_lines(ast.parse(source).body[0], source.splitlines())
    1
    """
    body = function.body
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        body = body[1:]
    if not body:
        return 0
    first, last = body[0].lineno, function.end_lineno
    return sum(1 for line in lines[first - 1:last]
               if line.strip() and not line.strip().startswith("#"))


def test_no_module_over_600_lines():
    long = {name: n for name, path in package_modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_no_function_over_80_code_lines():
    long = {}
    for name, path in package_modules().items():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := code_lines(node, lines)) > MAX_FUNCTION_CODE_LINES:
                    long[f"{name}.{node.name}"] = n
    assert not long, long


def test_examples():
    import doctest
    import sys
    assert doctest.testmod(sys.modules[__name__]).failed == 0
