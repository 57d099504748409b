"""Entry points: read a spec (and its tool catalog) from a file or text and validate it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.catalog import CATALOG_API_VERSION, EMPTY_CATALOG, Catalog, find_catalog, load_catalog_file
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
    if isinstance(raw, dict) and raw.get("apiVersion") == CATALOG_API_VERSION:
        # One line for the whole mistake, not a line per workflow field the catalog lacks.
        raise SpecError.single("apiVersion", f"this is a tool catalog ({CATALOG_API_VERSION}), not a workflow spec",
                               "name a workflow spec (apiVersion: npa.workflow/v0.0.1); give a catalog with "
                               "--catalog FILE", str(path))
    try:
        cat = resolve_catalog(catalog, path)
    except SpecError as exc:
        # The catalog's errors, then the spec's own: one round of fixes, not two.
        raise SpecError(exc.problems + _without_catalog(raw, str(path), strict, allow_unknown_keys),
                        exc.warnings) from None
    return validate_document(raw, file=str(path), catalog=cat, overrides=overrides, strict=strict,
                             allow_unknown_keys=allow_unknown_keys)


def _without_catalog(raw: object, file: str, strict: bool, allow_unknown_keys: bool) -> list[Problem]:
    """The spec's errors that do not depend on its catalog (which could not be read): every toolRef would be
    unknown and every `--var` a tool reads unread, so those are left out."""
    try:
        validate_document(raw, file=file, strict=strict, allow_unknown_keys=allow_unknown_keys)
    except SpecError as exc:
        return [p for p in exc.problems if not p.path.endswith(".toolRef") and not p.path.startswith("--var")]
    return []


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
