"""Entry points: read a spec (and its tool catalog) from a file or text and validate it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from npa_workflow.spec.catalog import EMPTY_CATALOG, Catalog, find_catalog, load_catalog_file
from npa_workflow.spec.loader import load_yaml_file, load_yaml_text
from npa_workflow.spec.validate import LoadedSpec, validate_document


def resolve_catalog(explicit: str | Path | Catalog | None, spec_path: str | Path | None) -> Catalog:
    if isinstance(explicit, Catalog):
        return explicit
    path = find_catalog(explicit, spec_path)
    return load_catalog_file(path) if path else EMPTY_CATALOG


def load_spec(
    path: str | Path,
    *,
    catalog: str | Path | Catalog | None = None,
    overrides: Mapping[str, str] | None = None,
    strict: bool = False,
    allow_unknown_keys: bool = False,
) -> LoadedSpec:
    raw = load_yaml_file(path)
    cat = resolve_catalog(catalog, path)
    return validate_document(raw, file=str(path), catalog=cat, overrides=overrides, strict=strict,
                             allow_unknown_keys=allow_unknown_keys)


def load_spec_text(
    text: str,
    *,
    file: str = "<spec>",
    catalog: Catalog = EMPTY_CATALOG,
    overrides: Mapping[str, str] | None = None,
    strict: bool = False,
    allow_unknown_keys: bool = False,
) -> LoadedSpec:
    raw = load_yaml_text(text, file)
    return validate_document(raw, file=file, catalog=catalog, overrides=overrides, strict=strict,
                             allow_unknown_keys=allow_unknown_keys)
