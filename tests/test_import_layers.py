"""The package's imports agree with DESIGN.md's layer table and close no cycle.

Every `import tfpack...` / `from tfpack... import` in the package counts:
at module level, inside a function, or under `if TYPE_CHECKING:`. The
table's rows are in import order, so a package may import only the rows
above it; its "imports" column must list exactly what it imports (so the
table cannot drift from the code); and no two modules may import each
other, directly or around a loop.
"""

import ast
import re

import pytest

from package_tree import ROOT, package_modules

DESIGN = ROOT / "docs" / "DESIGN.md"


def _resolve(name, modules):
    """The longest module of the package `name` names (a module, or a name
    inside one)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def imports_of(module, path, modules):
    """The package's modules that `module` imports, every kind."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name, modules) for a in node.names
                         if a.name.split(".")[0] == "tfpack")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.split(".")[0] != "tfpack":
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else _resolve(base, modules))
    found.discard(module)
    return found


@pytest.fixture(scope="module")
def graph():
    modules = package_modules()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def layer_table():
    """`[(packages, imports)]`: the rows of DESIGN.md's layer table, in order."""
    text = DESIGN.read_text()
    section = text[text.index("## Layers of the system"):]
    section = section[:section.index("\n\n", section.index("| --- |"))]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "---"):
            continue
        rows.append((re.findall(r"`(tfpack[\w.]*)`", cells[1]),
                     set(re.findall(r"`(tfpack[\w.]*)`", cells[2]))))
    return rows


def owner(module, packages):
    """The table's package that `module` belongs to (the longest prefix)."""
    matches = [p for p in packages if module == p or module.startswith(p + ".")]
    return max(matches, key=len) if matches else None


def test_every_module_has_a_row():
    packages = [p for row, _ in layer_table() for p in row]
    orphans = sorted(m for m in package_modules() if owner(m, packages) is None)
    assert not orphans, f"modules in no row of DESIGN.md's layer table: {orphans}"


def test_the_table_lists_exactly_the_imports(graph):
    rows = layer_table()
    packages = [p for row, _ in rows for p in row]
    for row, listed in rows:
        actual = set()
        for module, targets in graph.items():
            if owner(module, packages) in row:
                actual |= {owner(t, packages) for t in targets}
        actual -= set(row)
        assert actual == listed, (
            f"DESIGN.md's row {row} lists imports {sorted(listed)}; the code "
            f"imports {sorted(actual)}")


def test_no_import_climbs_to_a_row_below(graph):
    rows = layer_table()
    packages = [p for row, _ in rows for p in row]
    rank = {p: i for i, (row, _) in enumerate(rows) for p in row}
    climbs = sorted(
        f"{module} -> {target}" for module, targets in graph.items()
        for target in targets
        if rank[owner(target, packages)] > rank[owner(module, packages)])
    assert not climbs, f"imports of a row below (DESIGN.md): {climbs}"


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan).

    A package's `__init__` importing its own submodules is not an edge here:
    a submodule importing a sibling through the package is what counts.
    """
    edges = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle(graph):
    assert cycles(graph) == []


def test_cycle_finder_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"p": {"p.x"}, "p.x": set()}) == []
