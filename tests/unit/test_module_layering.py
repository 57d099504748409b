"""The package's module graph, read from the sources (ast, nothing imported): no import cycle among the modules'
top-level imports, and the layering the architecture states (docs/architecture.md):

- `engine/` and `protocol/` import, at module level, none of the adapters, the local runtime (`local/`), the
  embedded AWS (`embedded_aws/`), the local jobs (`local_jobs/`), the composition root (`wiring`) or the AWS SDK;
- `stack_client` (a client of any stack, cloud or local) imports nothing of the local runtime, at any level.

An import under `if TYPE_CHECKING:` is no import at run time and is left out; one inside a function runs only when
the function does (the lazy imports that keep a Lambda's cold start small), so only the stack client's are read.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "layers" / "engine"
PACKAGE = "npa_workflow"
PURE = ("engine", "protocol")
OUTSIDE_THE_ENGINE = tuple(f"{PACKAGE}.{name}" for name in ("adapters", "local", "embedded_aws", "local_jobs",
                                                              "wiring"))
SDKS = ("boto3", "botocore", "moto")
LOCAL_ROOMS = tuple(f"{PACKAGE}.{name}" for name in ("local", "embedded_aws", "local_jobs"))


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((PACKAGE_ROOT / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(PACKAGE_ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its body's, and those of its `if`/`try` blocks, not those
    under `if TYPE_CHECKING:` nor inside functions or classes."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _top_level(block)


def _every_import(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """The absolute names an import statement of `module` loads (`from a import b` loads `a.b` when that is a
    module, else `a`)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if MODULES.get(module, Path()).name == "__init__.py" else module.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base


def _ours(name: str) -> str | None:
    """The package module `name` is, or is inside (an imported function's module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _with_parents(name: str) -> Iterator[str]:
    """Importing `a.b.c` runs `a` and `a.b` first."""
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        yield ".".join(parts[:end])


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges: set[str] = set()
        for node in _top_level(ast.parse(path.read_text(encoding="utf-8")).body):
            for name in _imported(module, node):
                target = _ours(name)
                if target is None:
                    continue
                # A module's own packages are already importing when it runs: no edge back to them.
                edges.update(p for p in _with_parents(target) if p != module and not module.startswith(p + "."))
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read_from_every_module_of_the_package() -> None:
    graph = _graph()
    assert {"npa_workflow.engine.watch", "npa_workflow.protocol.errors", "npa_workflow.ledger.dynamodb"} <= set(graph)
    assert "npa_workflow.protocol.errors" in graph["npa_workflow.engine.cleanup"]  # an edge the walk must see
    assert "npa_workflow.engine" in graph["npa_workflow.wiring"]  # a module's package comes with it


def test_the_package_has_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import cycles among top-level imports (break each: move what both need to a third module)"


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("room", PURE)
def test_the_pure_rooms_import_no_adapter_no_local_room_and_no_sdk(room: str) -> None:
    graph = _graph()
    crossings = []
    for module in sorted(m for m in MODULES if m == f"{PACKAGE}.{room}" or m.startswith(f"{PACKAGE}.{room}.")):
        crossings += [f"{module} → {t}" for t in sorted(graph[module]) if t.startswith(OUTSIDE_THE_ENGINE)]
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        sdk = {n for node in _top_level(tree.body) for n in _imported(module, node) if n.split(".")[0] in SDKS}
        crossings += [f"{module} → {n}" for n in sorted(sdk)]
    assert crossings == [], f"{room}/ must reach adapters and the SDK through its ports (engine.ports)"


def test_the_stack_client_imports_nothing_of_the_local_rooms() -> None:
    module = f"{PACKAGE}.stack_client"
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    local = sorted({n for node in _every_import(tree) for n in _imported(module, node) if n.startswith(LOCAL_ROOMS)})
    assert local == [], "a client of any stack needs none of the local runtime: what both use belongs elsewhere"
