"""Fixtures for the spec tests (loader, tokens, config, validation, catalog).

Specs are YAML text; `HEADER` supplies apiVersion/kind/metadata so a test shows only what it
is about. `errors(...)` returns the (path, message) pairs of the SpecError a spec must raise.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.spec.catalog import Catalog, load_catalog_text
from npa_workflow.spec.load import load_spec_text
from npa_workflow.spec.validate import LoadedSpec

HEADER = "apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nmetadata: {name: t}\n"

CATALOG = """\
apiVersion: npa.workflow.tools/v1
tools:
  demo.caption:
    argv: [python, caption.py, --in, "{{config.images_uri}}", --out, "{{config.captions_uri}}"]
  demo.train:
    argv: [python, train.py, --epochs, "{{config.epochs}}"]
    configDefaults: {epochs: "3"}
  demo.shard:
    argv: [python, shard.py]
    multiNodeMode: sharded
"""


def _text(body: str, header: bool) -> str:
    body = textwrap.dedent(body)
    return HEADER + body if header else body


@pytest.fixture
def catalog() -> Catalog:
    return load_catalog_text(CATALOG, "tools.yaml")


@pytest.fixture
def load(catalog: Catalog) -> Callable[..., LoadedSpec]:
    def run(body: str, *, header: bool = True, **kwargs) -> LoadedSpec:
        kwargs.setdefault("catalog", catalog)
        return load_spec_text(_text(body, header), file="spec.yaml", **kwargs)

    return run


@pytest.fixture
def spec_error(catalog: Catalog) -> Callable[..., SpecError]:
    def run(body: str, *, header: bool = True, **kwargs) -> SpecError:
        kwargs.setdefault("catalog", catalog)
        with pytest.raises(SpecError) as info:
            load_spec_text(_text(body, header), file="spec.yaml", **kwargs)
        return info.value

    return run


@pytest.fixture
def errors(spec_error: Callable[..., SpecError]) -> Callable[..., list[tuple[str, str]]]:
    def run(body: str, **kwargs) -> list[tuple[str, str]]:
        return [(p.path, p.message) for p in spec_error(body, **kwargs).problems]

    return run
