"""Every attribute of moto, botocore and werkzeug the embedded AWS replaces, listed from a running stack.

    .venv/bin/python scripts/list_moto_seams.py [--json]

Starts the twin's embedded AWS in this (fresh) process as `run` and `serve` start it (`start_moto_server`, then
`local.runtime.enter_embedded_aws`, plus the execution-end hook a run adds), lists what
`embedded_aws.patched_versions.replaced_attributes()` finds while it lives and again once it is closed (what stays
replaced for the life of the process), and prints the counts per package. Then the private attributes (a leading
underscore) of their objects the package's own code reads without replacing them, found in its source: an
attribute read that the package does not define, in a module that imports one of the three (and what a subclass
of one of their classes overrides or sets). `--json`: {"running": [...],
"closed": [...], "private_reads": [...]} only.
"""

from __future__ import annotations

import ast
import contextlib
import json
import sys
import tempfile
from pathlib import Path


def seams() -> dict[str, list[str]]:
    from npa_workflow.embedded_aws.execution_ends import execution_ends
    from npa_workflow.embedded_aws.moto_server import start_moto_server
    from npa_workflow.embedded_aws.patched_versions import replaced_attributes
    from npa_workflow.local.runtime import embedded_aws_env, enter_embedded_aws

    with tempfile.TemporaryDirectory() as home, contextlib.ExitStack() as stack:
        server = start_moto_server()
        enter_embedded_aws(stack, server, embedded_aws_env(server, Path(home), "local"), Path(home) / "lambdas.log",
                           Path(home) / "aws")
        stack.enter_context(execution_ends(lambda arn: None))
        running = replaced_attributes()
        stack.close()
        return {"running": running, "closed": replaced_attributes(), "private_reads": private_reads()}


PACKAGE = Path(__file__).resolve().parents[1] / "layers" / "engine" / "npa_workflow"
_PATCHED = ("moto", "botocore", "werkzeug")


def _imports_patched(tree: ast.Module) -> bool:
    return any((isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _PATCHED)
               or (isinstance(node, ast.Import) and any(a.name.split(".")[0] in _PATCHED for a in node.names))
               for node in ast.walk(tree))


def _single_underscore(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_reads() -> list[str]:
    """`module: attribute` for each private attribute of another package's object the package's code reads (and
    `module: Class.attribute` for each its subclasses of their classes override or set)."""
    trees = {path: ast.parse(path.read_text()) for path in sorted(PACKAGE.rglob("*.py"))}
    ours: set[str] = set()  # names the package defines itself (functions, classes, variables, its own attributes)
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                ours.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                ours.add(node.id)
            elif isinstance(node, ast.arg):
                ours.add(node.arg)
    found: set[str] = set()
    for path, tree in trees.items():
        if not _imports_patched(tree):
            continue
        module = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        own_attributes: set[str] = set()  # what this module's own classes set on themselves
        for klass in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            # a subclass of another package's class sets that class's attributes: not the package's own
            if any(isinstance(base, ast.Name) and base.id[0].isupper() and base.id not in ours for base in klass.bases):
                continue
            own_attributes.update(node.attr for node in ast.walk(klass)
                                  if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                    and _single_underscore(node.attr) and node.attr not in ours | own_attributes:
                found.add(f"{module}: {node.attr}")
        for klass in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            if not any(isinstance(base, ast.Name) and base.id[0].isupper() and base.id not in ours
                       for base in klass.bases):
                continue  # below: a subclass of another package's class, overriding or setting its private parts
            found.update(f"{module}: {klass.name}.{node.name} (overridden)" for node in klass.body
                         if isinstance(node, ast.FunctionDef) and _single_underscore(node.name))
            found.update(f"{module}: {klass.name}.{node.attr} (set)" for node in ast.walk(klass)
                         if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                         and _single_underscore(node.attr))
    return sorted(found)


def _private(seam: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in seam.split(" ")[0].split("."))


def main(args: list[str]) -> int:
    found = seams()
    if "--json" in args:
        print(json.dumps(found))
        return 0
    for seam in found["running"]:
        print(seam + ("  (stays for the process)" if seam in found["closed"] else ""))
    counts = {name: sum(seam.startswith(name + ".") for seam in found["running"])
              for name in ("moto", "botocore", "werkzeug")}
    print(f"{len(found['running'])} replaced while the stack runs: "
          + ", ".join(f"{count} of {name}" for name, count in counts.items())
          + f" ({sum(_private(seam) for seam in found['running'])} private: a leading underscore)"
          + f"; {len(found['closed'])} stay replaced after it closes")
    for read in found["private_reads"]:
        print(f"read: {read}")
    print(f"{len(found['private_reads'])} private attributes of theirs read, overridden or set (not replaced) by "
          "the package's code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
