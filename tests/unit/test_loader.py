"""Safe YAML loading (the first step of every spec read) and its limits against hostile files."""

from __future__ import annotations

import time

import pytest

from npa_workflow.errors import SpecError
from npa_workflow.spec.load import load_spec
from npa_workflow.spec.loader import DEFAULT_LIMITS, load_yaml_file, load_yaml_text


def only_problem(text: str, file: str = "spec.yaml") -> tuple[str, str, str]:
    with pytest.raises(SpecError) as info:
        load_yaml_text(text, file)
    [problem] = info.value.problems
    assert problem.file == file
    return problem.path, problem.message, problem.hint


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "---\n", "null\n"])
def test_empty_document_is_an_empty_mapping(text):
    assert load_yaml_text(text) == {}


def test_empty_file_then_fails_validation_on_required_fields(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert [(p.path, p.message) for p in info.value.problems][0] == (
        "apiVersion", "missing required field 'apiVersion'"
    )
    assert info.value.problems[0].file == str(path)


def test_non_mapping_root_is_reported_by_validation(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(info.value) == f"{path}: $: spec must be a mapping, got list (fix: start with 'apiVersion:')"


def test_syntax_error_names_the_line():
    path, message, _ = only_problem("a: 1\nb: [1, 2\nc: 3\n")
    assert path == "$"
    assert message.startswith("not valid YAML at line 3, column 2: ")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_a_control_character_is_one_line_naming_where(char):
    """PyYAML's ReaderError was printed as two lines (`…not allowed\\n  in "<unicode string>", position 11`)."""
    path, message, hint = only_problem(f"a: 1\nb: x{char}y\n")
    assert (path, message) == ("$", f"not valid YAML at line 2, column 5: control character U+{ord(char):04X}")
    assert "\n" not in message + hint and hint.startswith("remove it")


def test_bad_indentation_names_the_line():
    _, message, _ = only_problem("states:\n  a: 1\n b: 2\n")
    assert message.startswith("not valid YAML at line 3, column 2: ")


def test_several_documents_are_rejected():
    _, message, _ = only_problem("a: 1\n---\nb: 2\n")
    assert message.startswith("not valid YAML at line 2, column 1: ")


def test_duplicate_key_is_an_error():
    text = "states:\n  a: {terminal: true}\n  b: {next: a}\n  a: {next: b}\n"
    assert only_problem(text) == ("$", "not valid YAML at line 4, column 3: duplicate key 'a' (first at line 2)",
                                  "keep one of the two keys (the second would silently win)")


def test_duplicate_key_in_a_flow_mapping():
    message = only_problem("x: {a: 1, a: 2}\n")[1]
    assert message == "not valid YAML at line 1, column 11: duplicate key 'a' (first at line 1)"


def test_merge_keys_still_work():
    assert load_yaml_text("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n")["d"] == {"x": 1, "y": 3}


@pytest.mark.parametrize(("text", "shown"), [("1: a\n", "1"), ("on: a\n", "on"), ("~: a\n", "~")])
def test_keys_must_be_strings(text, shown):
    assert only_problem(text) == (
        "$", f"line 1, column 1: mapping key {shown} is not a string", f"quote the key: '{shown}'"
    )


def test_collection_keys_are_rejected():
    assert only_problem("? [a]\n: b\n") == (
        "$", "line 1, column 3: mapping key (a collection) is not a string", "use a string key"
    )


def test_quoted_keys_are_strings():
    assert load_yaml_text("'1': a\n'on': b\n") == {"1": "a", "on": "b"}


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_billion_laughs_is_rejected_quickly():
    start = time.perf_counter()
    path, message, hint = only_problem(BILLION_LAUGHS)
    assert time.perf_counter() - start < 1.0
    assert message == f"YAML rejected: expands to more than {DEFAULT_LIMITS.max_expanded_nodes} nodes"
    assert hint == "do not nest aliases that multiply the document"


def test_modest_aliases_are_fine():
    doc = load_yaml_text("p: &p {cpus: 4}\nq: [*p, *p, *p]\n")
    assert doc["q"] == [{"cpus": 4}] * 3


def test_self_referencing_alias_is_rejected():
    assert only_problem("a: &a [1, *a]\n")[1] == "YAML rejected: an alias refers to a node that contains it"


@pytest.mark.parametrize("text", ["[" * 1000 + "]" * 1000, "{a: " * 1000 + "1" + "}" * 1000,
                                  "".join("  " * i + "k:\n" for i in range(1000)) + "  " * 1000 + "k: 1\n"])
def test_deep_nesting_is_rejected(text):
    start = time.perf_counter()
    assert only_problem(text) == ("$", "YAML rejected: nesting deeper than 64 levels", "flatten the document")
    assert time.perf_counter() - start < 1.0


def test_nesting_through_aliases_is_bounded():
    levels = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [[[[*l{i - 1}]]]]" for i in range(1, 40)]
    message = only_problem("\n".join(levels) + "\n")[1]
    assert message == "YAML rejected: nesting deeper than 64 levels (counting aliases)"


def test_nesting_within_the_limit_loads():
    doc = load_yaml_text("a: " + "[" * 60 + "]" * 60)
    for _ in range(59):
        [doc] = doc["a"] if isinstance(doc, dict) else doc
    assert doc == []


def test_file_too_large(tmp_path):
    big = "x: '" + "a" * DEFAULT_LIMITS.max_bytes + "'\n"
    assert only_problem(big) == (
        "$", f"file is larger than {DEFAULT_LIMITS.max_bytes} bytes", "split the spec or trim it"
    )
    path = tmp_path / "big.yaml"
    path.write_text(big)
    with pytest.raises(SpecError, match="file is larger than 1048576 bytes"):
        load_yaml_file(path)


def test_file_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(SpecError) as info:
        load_yaml_file(path)
    [problem] = info.value.problems
    assert (problem.path, problem.message, problem.hint, problem.file) == (
        "$", "file is not UTF-8 text (byte 9)", "save it as UTF-8", str(path)
    )


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_yaml_file(tmp_path / "nope.yaml")
    assert info.value.problems[0].message == "file not found"


def test_control_characters_are_not_valid_yaml():
    assert only_problem("a: \x00\n")[1].startswith("not valid YAML")


def test_safe_loader_refuses_python_objects():
    assert only_problem("a: !!python/object/apply:os.system ['true']\n")[1].startswith("not valid YAML")
