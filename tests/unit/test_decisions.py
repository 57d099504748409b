"""The decision contract (docs/decisions.md): normalization, predicates, artifact bodies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npa_workflow import decisions
from npa_workflow.decisions import LOOP_BACK, PROMOTE, DecisionError, decision_from_body, normalize, predicate

URI = "s3://bk/run/decision.json"


# --- normalize ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("promote", PROMOTE),
        ("promote_checkpoint", PROMOTE),
        ("loop_back", LOOP_BACK),
        ("loop_back_to_inner_loop", LOOP_BACK),
        ("  promote\n", PROMOTE),  # whitespace-trimmed
        ("\tloop_back ", LOOP_BACK),
        ("PROMOTE", "PROMOTE"),  # case-sensitive: unknown, passes through
        ("Loop_Back", "Loop_Back"),
        ("reject", "reject"),
        (" reject ", "reject"),
        ("", ""),
        (None, ""),
    ],
)
def test_normalize(raw, expected):
    assert normalize(raw) == expected


def test_canonical_values():
    assert PROMOTE == "promote_checkpoint"
    assert LOOP_BACK == "loop_back_to_inner_loop"


@given(st.text())
def test_normalize_is_idempotent(text):
    once = normalize(text)
    assert normalize(once) == once


# --- predicates -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "decision", "expected"),
    [
        ("promote_checkpoint", PROMOTE, True),
        ("promote_checkpoint", LOOP_BACK, False),
        ("promote_checkpoint", "", False),
        ("promote_checkpoint", "promote", False),  # predicates see normalized values only
        ("loop_back", LOOP_BACK, True),
        ("loop_back", "loop_back", False),
        ("loop_back", PROMOTE, False),
        ("loop_back", "", False),
        ("loop_back", "reject", False),
    ],
)
def test_predicate(name, decision, expected):
    assert predicate(name, decision) is expected


def test_predicate_on_normalized_raw_values():
    assert predicate("promote_checkpoint", normalize("promote"))
    assert predicate("loop_back", normalize("loop_back"))
    assert not predicate("promote_checkpoint", normalize("PROMOTE"))


def test_unknown_predicate_raises():
    with pytest.raises(ValueError, match="unknown predicate"):
        predicate("always", PROMOTE)


# --- resolve_assumption ---------------------------------------------------------------------------


def test_resolve_assumption_precedence():
    config = {"plan_assume_decision": "promote"}
    assert decisions.resolve_assumption("loop_back", config, True) == LOOP_BACK
    assert decisions.resolve_assumption(None, config, True) == PROMOTE
    assert decisions.resolve_assumption("", config, False) == PROMOTE
    assert decisions.resolve_assumption(None, {}, True) == LOOP_BACK
    assert decisions.resolve_assumption(None, {}, False) == ""
    assert decisions.resolve_assumption(None, {"plan_assume_decision": ""}, True) == LOOP_BACK
    assert decisions.resolve_assumption("foo", {}, True) == "foo"


# --- decision_from_body ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "raw", "normalized"),
    [
        ('{"decision": "promote"}', "promote", PROMOTE),
        ('{"decision": "promote_checkpoint", "score": 0.9}', "promote_checkpoint", PROMOTE),
        ('{"last_decision": "loop_back"}', "loop_back", LOOP_BACK),
        ('{"action": "loop_back_to_inner_loop"}', "loop_back_to_inner_loop", LOOP_BACK),
        ('{"decision": "reject"}', "reject", "reject"),
        ('{"decision": " promote "}', " promote ", PROMOTE),
        ('{"decision": ""}', "", ""),
    ],
)
def test_decision_from_body(body, raw, normalized):
    assert decision_from_body(body, URI) == (raw, normalized)


def test_decision_from_bytes():
    assert decision_from_body(b'{"decision": "promote"}', URI) == ("promote", PROMOTE)
    assert decision_from_body('{"decision": "promote"}'.encode("utf-16"), URI) == ("promote", PROMOTE)


def test_decision_key_precedence():
    body = json.dumps({"action": "a", "last_decision": "l", "decision": "d"})
    assert decision_from_body(body, URI)[0] == "d"
    body = json.dumps({"action": "a", "last_decision": "l"})
    assert decision_from_body(body, URI)[0] == "l"
    body = json.dumps({"other": "x", "action": "a"})
    assert decision_from_body(body, URI)[0] == "a"


def test_present_key_wins_even_when_empty_or_null():
    # The first *present* key is used, as in the contract, even if a later key has a value.
    assert decision_from_body('{"decision": "", "action": "promote"}', URI) == ("", "")
    assert decision_from_body('{"decision": null, "action": "promote"}', URI)[1] == "null"


@pytest.mark.parametrize(
    ("value", "text"),
    [(True, "true"), (False, "false"), (None, "null"), (3, "3"), (0.5, "0.5"), (["promote"], '["promote"]'),
     ({"v": 1}, '{"v": 1}')],
)
def test_non_string_values_render_as_json_and_match_nothing(value, text):
    raw, normalized = decision_from_body(json.dumps({"decision": value}), URI)
    assert raw == text
    assert normalized == text
    assert not predicate("promote_checkpoint", normalized)
    assert not predicate("loop_back", normalized)


def test_missing_decision_field():
    with pytest.raises(DecisionError) as err:
        decision_from_body('{"score": 0.9}', URI)
    message = str(err.value)
    assert URI in message
    assert "missing a decision field" in message
    assert "decision, last_decision, action" in message


@pytest.mark.parametrize("body", ["not json", "", b"", "{", b"\xff\xfe\xfa", "{'decision': 'promote'}"])
def test_not_json(body):
    with pytest.raises(DecisionError, match="is not valid JSON") as err:
        decision_from_body(body, URI)
    assert URI in str(err.value)


def test_deeply_nested_json_is_a_decision_error():
    with pytest.raises(DecisionError):
        decision_from_body("[" * 100_000 + "]" * 100_000, URI)


@pytest.mark.parametrize(
    ("body", "kind"),
    [('["promote"]', "list"), ('"promote"', "str"), ("3", "int"), ("null", "NoneType"), ("true", "bool")],
)
def test_not_an_object(body, kind):
    with pytest.raises(DecisionError, match="must be a JSON object") as err:
        decision_from_body(body, URI)
    assert URI in str(err.value)
    assert kind in str(err.value)


def test_decision_error_is_a_value_error():
    assert issubclass(DecisionError, ValueError)


@given(st.dictionaries(st.text(), st.text() | st.integers() | st.none() | st.booleans()))
def test_any_object_either_decides_or_names_the_missing_field(payload):
    body = json.dumps(payload)
    if any(k in payload for k in decisions.DECISION_KEYS):
        raw, normalized = decision_from_body(body, URI)
        assert normalized == normalize(raw)
    else:
        with pytest.raises(DecisionError, match="missing a decision field"):
            decision_from_body(body, URI)
