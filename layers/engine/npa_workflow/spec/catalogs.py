"""Several tool catalogs as one: a stack deploys teams' specs against the catalogs they keep in their own
repositories (`-c catalogs=[…]`), and its inbox reads one published catalog.

The merged catalog holds every catalog's tools and image families. A tool (or image family) defined by two of
them is an error naming both files: which one a `toolRef` means must not depend on the order of a list. A
catalog's `workdir` names a folder next to that catalog, for `submit` to stage code from; the stack never reads
it (code comes staged with each run), so the merged catalog has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.catalog import CATALOG_API_VERSION, Catalog, load_catalog_file, parse_catalog
from npa_workflow.spec.loader import load_yaml_file

__all__ = ["merge_catalogs"]


def merge_catalogs(paths: Sequence[Path]) -> tuple[Catalog, str]:
    """(the merged catalog, its YAML text to publish). One catalog is itself, its text as written."""
    if len(paths) == 1:
        return load_catalog_file(paths[0]), Path(paths[0]).read_text(encoding="utf-8")
    tools: dict[str, Any] = {}
    images: dict[str, Any] = {}
    owner: dict[tuple[str, str], Path] = {}
    problems: list[Problem] = []
    for path in paths:
        load_catalog_file(path)  # each is valid on its own: its errors at its own paths, in its own file
        raw = load_yaml_file(path)
        for section, merged in (("tools", tools), ("images", images)):
            for name, body in (raw.get(section) or {}).items():
                first = owner.setdefault((section, str(name)), Path(path))
                if first != Path(path):
                    problems.append(Problem(f"{section}.{name}", f"{section[:-1]} {name!r} is defined in {first} too",
                                            "rename it in one catalog (a toolRef must mean one tool)", file=str(path)))
                    continue
                merged[str(name)] = body
    if problems:
        raise SpecError(problems)
    import yaml

    doc: dict[str, Any] = {"apiVersion": CATALOG_API_VERSION, "tools": tools}
    if images:
        doc["images"] = images
    text = (f"# The tool catalogs {', '.join(str(p) for p in paths)}, merged by the stack's deploy.\n"
            + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return parse_catalog(doc, "+".join(str(p) for p in paths)), text
