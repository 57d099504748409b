"""The tool catalog is data (a YAML file): its shape, its errors and how it is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.spec.catalog import CATALOG_ENV, find_catalog, load_catalog_file, load_catalog_text
from npa_workflow.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[2]
HEAD = "apiVersion: npa.workflow.tools/v1\n"


def catalog_problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        load_catalog_text(text, "tools.yaml")
    assert all(p.file == "tools.yaml" for p in info.value.problems)
    return [(p.path, p.message) for p in info.value.problems]


def test_entry_fields(catalog):
    tool = catalog.get("demo.train")
    assert tool.argv == ["python", "train.py", "--epochs", "{{config.epochs}}"]
    assert tool.config_defaults == {"epochs": "3"}
    assert tool.multi_node_mode == "forbidden"
    assert catalog.get("demo.shard").multi_node_mode == "sharded"
    assert catalog.get("nope") is None


def test_full_entry():
    catalog = load_catalog_text(HEAD + """\
        tools:
          t:
            description: d
            argv: [run, --flag, "{{config.v}}"]
            image: python:3.11-slim
            setup: pip install x
            env: {A: "1"}
            multi_node_mode: sharded
            config_defaults: {v: "x"}
            omitFlagsWhenEmpty: [--flag]
        """.replace("        ", ""))
    tool = catalog.get("t")
    assert (tool.image, tool.setup, tool.env, tool.omit_flags_when_empty) == (
        "python:3.11-slim", "pip install x", {"A": "1"}, ["--flag"]
    )


def test_close_names(catalog):
    assert catalog.close_names("demo.trian") == ["demo.train"]
    assert catalog.close_names("something.else") == []


def test_catalog_must_be_a_mapping():
    assert catalog_problems("- a\n") == [("$", "tool catalog must be a mapping")]


@pytest.mark.parametrize("version", ["", "apiVersion: v2\n"])
def test_catalog_api_version(version):
    shown = "'v2'" if version else "None"
    assert catalog_problems(version + "tools: {}\n") == [("apiVersion", f"unsupported catalog apiVersion {shown}")]


def test_tools_must_be_a_mapping():
    assert catalog_problems(HEAD + "tools: [a]\n") == [("tools", "must be a mapping of tool name to entry")]


def test_entry_errors():
    assert catalog_problems(HEAD + """\
tools:
  a: {argv: []}
  b: {argv: [x], imgae: y}
  c: {argv: [x], multiNodeMode: ranked}
  d: {argv: x}
  e: run
""") == [
        ("tools.a.argv", "must not be empty"),
        ("tools.b.imgae", "unknown field 'imgae'"),
        ("tools.c.multiNodeMode", "must be 'forbidden' or 'sharded', got 'ranked'"),
        ("tools.d.argv", "must be a list, got 'x'"),
        ("tools.e", "must be a mapping, got 'run'"),
    ]


def test_unknown_entry_field_suggests_the_closest():
    with pytest.raises(SpecError) as info:
        load_catalog_text(HEAD + "tools:\n  b: {argv: [x], imgae: y, confDefaults: {}}\n", "tools.yaml")
    assert [(p.path, p.hint) for p in info.value.problems] == [
        ("tools.b.imgae", "did you mean 'image'?"), ("tools.b.confDefaults", "did you mean 'configDefaults'?")]


def test_find_catalog_precedence(tmp_path, monkeypatch):
    spec = tmp_path / "spec.yaml"
    beside = tmp_path / "tools.yaml"
    monkeypatch.delenv(CATALOG_ENV, raising=False)
    assert find_catalog(None, spec) is None
    beside.write_text(HEAD + "tools: {}\n")
    assert find_catalog(None, spec) == beside
    monkeypatch.setenv(CATALOG_ENV, "/env/tools.yaml")
    assert find_catalog(None, spec) == Path("/env/tools.yaml")
    assert find_catalog("/explicit.yaml", spec) == Path("/explicit.yaml")


def test_spec_finds_the_catalog_next_to_it(tmp_path, monkeypatch):
    monkeypatch.delenv(CATALOG_ENV, raising=False)
    (tmp_path / "tools.yaml").write_text(HEAD + "tools:\n  hello: {argv: [echo, '{{config.who}}']}\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text("apiVersion: npa.workflow/v0.0.1\nkind: Workflow\nconfig: {who: me}\n"
                    "states:\n  a: {toolRef: hello, terminal: true}\n")
    loaded = load_spec(spec)
    assert loaded.catalog.source == str(tmp_path / "tools.yaml")


def test_catalog_errors_name_the_catalog_file(tmp_path):
    path = tmp_path / "tools.yaml"
    path.write_text("tools: {}\n")
    with pytest.raises(SpecError) as info:
        load_catalog_file(path)
    assert info.value.problems[0].format() == (
        f"{path}: apiVersion: unsupported catalog apiVersion None (fix: use npa.workflow.tools/v1)"
    )


@pytest.mark.parametrize("name", ["gate-loop.yaml", "fanout.yaml"])
def test_example_specs_load_with_the_shipped_catalog(name):
    loaded = load_spec(ROOT / "specs" / name, catalog=ROOT / "specs" / "tools.yaml")
    assert loaded.warnings == []


def test_a_catalog_file_is_parsed_once_until_it_changes(tmp_path, monkeypatch):
    import os

    from npa_workflow.spec import catalog as catalog_module

    path = tmp_path / "tools.yaml"
    path.write_text(HEAD + "tools:\n  a: {argv: [x]}\n")
    calls = []
    real = catalog_module.parse_catalog
    monkeypatch.setattr(catalog_module, "parse_catalog", lambda raw, file="": calls.append(file) or real(raw, file))
    first = load_catalog_file(path)
    assert load_catalog_file(path) is first and len(calls) == 1
    path.write_text(HEAD + "tools:\n  a: {argv: [x]}\n  b: {argv: [y]}\n")
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    assert set(load_catalog_file(path).tools) == {"a", "b"} and len(calls) == 2
