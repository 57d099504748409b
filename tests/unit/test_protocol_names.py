"""A protocol constant (`npa_workflow.protocol`: error names, function slots, payload keys, environment variable
names, stack names...) is written once and used by its own name: no module outside `protocol/` re-binds one under
a second name (`FOO_ENV = environment.FOO`, `from ...protocol.errors import X as Y`) or copies its value
(`"NPA_WORKFLOW_BUCKET"` written again). A second name drifts: a reader greps for one and misses the other, and a
rename in `protocol/` leaves the copy behind. Read from the sources (ast); nothing is imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "engine" / "npa_workflow"
PROTOCOL = PACKAGE / "protocol"
PROTOCOL_MODULE = "npa_workflow.protocol"
CONSTANT = re.compile(r"_?[A-Z][A-Z0-9_]*")
# Values distinctive enough that a copy is a copy, not a coincidence: variable-shaped (`NPA_WORKFLOW_BUCKET`),
# dotted error names (`NpaWorkflow.WaveFailed`, `States.Timeout`), and paths/prefixes (`catalog/serve.json`).
DISTINCTIVE = re.compile(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)+|[A-Z]\w+\.\w+|.*/.*")


def _assigned(body: list[ast.stmt]) -> Iterator[tuple[str, ast.expr, int]]:
    for node in body:
        if isinstance(node, ast.Assign) and node.value is not None:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value, node.lineno
        elif isinstance(node, ast.AnnAssign) and node.value is not None and isinstance(node.target, ast.Name):
            yield node.target.id, node.value, node.lineno


def protocol_constants() -> dict[str, dict[str, ast.expr]]:
    """Protocol module (`npa_workflow.protocol.errors`) → its constants (module-level UPPER_CASE names)."""
    found = {}
    for path in sorted(PROTOCOL.glob("*.py")):
        module = PROTOCOL_MODULE if path.stem == "__init__" else f"{PROTOCOL_MODULE}.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found[module] = {name: value for name, value, _ in _assigned(tree.body) if CONSTANT.fullmatch(name)}
    return found


def distinctive_values(constants: dict[str, dict[str, ast.expr]]) -> dict[str, str]:
    values = {}
    for module, names in constants.items():
        for name, value in names.items():
            if isinstance(value, ast.Constant) and isinstance(value.value, str) and DISTINCTIVE.fullmatch(value.value):
                values[value.value] = f"{module.rpartition('.')[2]}.{name}"
    return values


def second_names(source: str, constants: dict[str, dict[str, ast.expr]], values: dict[str, str]) -> list[str]:
    """Where `source` (a module outside `protocol/`) re-binds or copies a protocol constant: `line: what`."""
    tree = ast.parse(source)
    modules: dict[str, str] = {}  # a local name bound to a protocol module → that module
    imported: dict[str, str] = {}  # a local name bound to a protocol constant → `module.NAME`
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PROTOCOL_MODULE) and alias.asname:
                    modules[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PROTOCOL_MODULE):
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{node.module}.{alias.name}" in constants:
                    modules[local] = f"{node.module}.{alias.name}"
                elif alias.name in constants.get(node.module or "", {}):
                    imported[local] = f"{node.module}.{alias.name}"
                    if local != alias.name:
                        found.append(f"{node.lineno}: imports {alias.name} as {local}")

    def constant_of(value: ast.expr) -> str | None:
        if isinstance(value, ast.Name):
            return imported.get(value.id)
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in modules:
            module = modules[value.value.id]
            return f"{module}.{value.attr}" if value.attr in constants.get(module, {}) else None
        return None

    scopes = [tree.body] + [n.body for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    for body in scopes:
        for name, value, line in _assigned(body):
            target = constant_of(value)
            if target is not None:
                found.append(f"{line}: {name} = {target}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values:
            found.append(f"{node.lineno}: {node.value!r} copies {values[node.value]}")
    return found


def _sources() -> Iterator[Path]:
    for folder in (PACKAGE, REPO / "functions", REPO / "infra"):
        for path in sorted(folder.rglob("*.py")):
            if PROTOCOL not in path.parents:
                yield path


def test_no_module_gives_a_protocol_constant_a_second_name() -> None:
    constants = protocol_constants()
    values = distinctive_values(constants)
    offences = [f"{path.relative_to(REPO)}:{where}" for path in _sources()
                for where in second_names(path.read_text(encoding="utf-8"), constants, values)]
    assert offences == [], "use the protocol constant by its own name (e.g. `environment.BUCKET`), import it " \
                           "without `as`, and never copy its value"


def test_the_rule_sees_every_kind_of_second_name() -> None:
    constants = protocol_constants()
    values = distinctive_values(constants)
    assert values["NPA_WORKFLOW_BUCKET"] == "environment.BUCKET"
    source = "\n".join([
        "from npa_workflow.protocol import environment as env_names",
        "from npa_workflow.protocol import errors",
        "from npa_workflow.protocol.errors import WAVE_FAILED as FAILED",
        "from npa_workflow.protocol.errors import WAVE_LOST",
        "BUCKET_ENV = env_names.BUCKET",
        "LOST = WAVE_LOST",
        "class Names:",
        "    TIMEOUTS = errors.TIMEOUTS",
        "def f(env):",
        "    return env.get('NPA_WORKFLOW_BUCKET')",
        "USED = env_names.BUCKET + errors.WAVE_FAILED",  # using a constant by its own name is fine
        "def g(env):",
        "    bucket = env_names.BUCKET",  # a function's local is a use, not a second module-level name
        "    return bucket",
    ])
    assert second_names(source, constants, values) == [
        "3: imports WAVE_FAILED as FAILED",
        "5: BUCKET_ENV = npa_workflow.protocol.environment.BUCKET",
        "6: LOST = npa_workflow.protocol.errors.WAVE_LOST",
        "8: TIMEOUTS = npa_workflow.protocol.errors.TIMEOUTS",
        "10: 'NPA_WORKFLOW_BUCKET' copies environment.BUCKET",
    ]
