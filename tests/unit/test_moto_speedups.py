"""`embedded_aws.moto_speedups`: each speed-up gives what moto's own path gives (the JSON it writes, the JSONPath it
parses, the program it runs), and is undone on exit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_workflow.embedded_aws import moto_speedups as speedups
from npa_workflow.embedded_aws.moto_speedups import (
    backends_found_once,
    conditions_parsed_once_per_request,
    conditions_tokenized_once,
    definition_parsed_once,
    fast_attribute_values,
    interpreter_clients_kept,
    jsonpath_parsed_once,
    method_names_listed_once,
    moto_speedups,
    partition_queries,
    projections_of_names,
    trees_copied_directly,
    update_checks_passed_once,
    update_expressions_parsed_once,
    walkers_built_once,
    walks_decided_per_type,
)


@pytest.fixture(autouse=True)
def _aws_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's `mock_aws` clients need credentials; none of the machine's own reach these tests."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")


ITEM = {
    "pk": {"S": "RUN#r1"}, "sk": {"S": "W#a#001"}, "empty": {"S": ""}, "n": {"N": "12.50"},
    "blob": {"B": b"\x00\x01bytes"}, "blobs": {"BS": [b"a", b"\xff"]}, "strings": {"SS": ["x", "y"]},
    "numbers": {"NS": ["1", "2.5"]}, "nothing": {"NULL": True}, "yes": {"BOOL": True}, "no": {"BOOL": False},
    "timeline": {"L": [{"M": {"status": {"S": "RUNNING"}, "at": {"S": "2026-01-01T00:00:00Z"}}},
                       {"L": [{"N": "1"}, {"NULL": True}]}, None]},
    "nested": {"M": {"deep": {"M": {"list": {"L": []}, "map": {"M": {}}}}, "gone": None}},
    "not_wire_form": {"S": "x", "snake_case_extra": "ignored by the walk"},
}


def serialize(operation: str, result: dict[str, Any]) -> dict[str, Any]:
    from moto.core.responses import ActionResult
    from moto.core.serialize import XFormedAttributePicker, get_serializer_class
    from moto.core.utils import get_service_model

    service = get_service_model("dynamodb")
    serializer = get_serializer_class("dynamodb", service.protocol)(
        operation_model=service.operation_model(operation), pretty_print=False, value_picker=XFormedAttributePicker())
    assert isinstance(ActionResult(result).result, dict)
    return json.loads(serializer.serialize(result)["body"])


@pytest.mark.parametrize(("operation", "result"), [
    ("Query", {"Items": [ITEM, {"pk": {"S": "RUN#r2"}}], "Count": 2, "ScannedCount": 2,
               "LastEvaluatedKey": {"pk": {"S": "RUN#r2"}, "sk": {"S": "RUN"}}}),
    ("GetItem", {"Item": ITEM}),
    ("GetItem", {}),
    ("UpdateItem", {"Attributes": {"status": {"S": "SUCCEEDED"}, "count": {"N": "3"}}}),
])
def test_same_json_as_moto_walk(operation: str, result: dict[str, Any]) -> None:
    generic = serialize(operation, result)
    with fast_attribute_values():
        fast = serialize(operation, result)
        with fast_attribute_values():  # nested activation is harmless
            assert serialize(operation, result) == fast
    assert fast == generic
    assert serialize(operation, result) == generic  # restored on exit
    if "Item" in result:
        assert fast["Item"]["blob"] == {"B": "AAFieXRlcw=="}  # the walk's base64, kept
        assert "gone" not in fast["Item"]["nested"]["M"]


def test_only_while_active() -> None:
    from moto.core.serialize import BaseJSONSerializer

    before = BaseJSONSerializer.__dict__["_serialize_type_structure"]
    with fast_attribute_values():
        assert BaseJSONSerializer.__dict__["_serialize_type_structure"] is not before
    assert BaseJSONSerializer.__dict__["_serialize_type_structure"] is before


def test_jsonpath_parsed_once_finds_the_same() -> None:
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    data = {"a": {"b": [{"c": 1}, {"c": 2}]}, "d": "x"}
    paths = ["$.a.b[1].c", "$.a.b[*].c", "$.d", "$"]
    before = [json_path.extract_json(p, data) for p in paths]
    originals = (json_path.parse, result_path.parse)
    with jsonpath_parsed_once():
        assert json_path.parse("$.d") is json_path.parse("$.d")  # one parse, shared
        assert [json_path.extract_json(p, data) for p in paths] == before
        assert result_path.parse("$.r").find({"r": 3})[0].value == 3
        with pytest.raises(Exception):  # noqa: B017 - a bad path still fails as jsonpath_ng fails it
            json_path.parse("$.[")
    assert (json_path.parse, result_path.parse) == originals


DEFINITION = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "Result": {"v": 1}, "End": True}}})


def test_definition_parsed_once_runs_the_validated_program() -> None:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    parses: list[str] = []
    original = AmazonStateLanguageParser.__dict__["parse"]

    def counting(definition: str) -> Any:
        parses.append(definition)
        return original.__func__(definition)

    AmazonStateLanguageParser.parse = staticmethod(counting)
    try:
        with definition_parsed_once():
            StepFunctionsParserBackend._validate_definition(definition=DEFINITION)

            class Worker:  # what `_get_evaluation_entrypoint` reads of an ExecutionWorker
                class _evaluation_details:  # noqa: N801
                    class state_machine_details:  # noqa: N801
                        definition = DEFINITION

            from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

            first = ExecutionWorker._get_evaluation_entrypoint(Worker())
            second = ExecutionWorker._get_evaluation_entrypoint(Worker())
            assert first is not second  # a program is used by one execution only
            assert type(first) is type(second)
            assert len(parses) == 2  # validation + the second execution; the first took the validated one
            with pytest.raises(Exception, match="InvalidDefinition|ASLParser|Error"):
                StepFunctionsParserBackend._validate_definition(definition="{not json")  # moto's own errors
    finally:
        AmazonStateLanguageParser.parse = original


def test_speedups_undone_on_exit() -> None:
    from moto.core.serialize import BaseJSONSerializer
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def seams() -> list[Any]:
        from moto.core import responses
        from moto.dynamodb.comparisons import ConditionExpressionParser
        from moto.dynamodb.models.table import Table
        from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
        from moto.dynamodb.parsing.validators import UpdateExpressionValidator, Validator
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
        from moto.stepfunctions.parser.asl.utils import json_path

        return [BaseJSONSerializer.__dict__["_serialize_type_structure"], AmazonStateLanguageParser.__dict__["parse"],
                StepFunctionsParserBackend.__dict__["_validate_definition"],
                ExecutionWorker.__dict__["_get_evaluation_entrypoint"], json_path.parse,
                lambda_eval_utils.boto_client_for, DomainDispatcherApplication.__dict__["get_backend_for_host"],
                ConditionExpressionParser.__dict__["_lex_condition_expression"], Table.__dict__["query"],
                Table.__dict__["all_items"], responses.method_names_from_class,
                DepthFirstTraverser.__dict__["nodes_to_be_processed"], DepthFirstTraverser.__dict__["process"],
                Validator.__dict__["__init__"], Validator.__dict__["validate"],
                UpdateExpressionValidator.__dict__["get_ast_processors"]]

    before = seams()
    with moto_speedups():
        assert all(a is not b for a, b in zip(seams(), before, strict=True))
        with moto_speedups():  # nested: nothing wrapped twice
            pass
        assert all(a is not b for a, b in zip(seams(), before, strict=True))
    assert seams() == before


def test_interpreter_clients_kept_per_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    original = lambda_eval_utils.boto_client_for
    with interpreter_clients_kept():
        monkeypatch.setenv("MOTO_PORT", "40001")
        first = lambda_eval_utils.boto_client_for(region="us-east-1", service="lambda", state_credentials=object())
        assert lambda_eval_utils.boto_client_for(region="us-east-1", service="lambda") is first
        assert first.meta.endpoint_url == "http://localhost:40001"  # what moto's own function makes
        assert first.meta.config.retries["total_max_attempts"] == 1
        monkeypatch.setenv("MOTO_PORT", "40002")
        other = lambda_eval_utils.boto_client_for(region="us-east-1", service="lambda")
        assert other is not first and other.meta.endpoint_url == "http://localhost:40002"
        assert lambda_eval_utils.boto_client_for(region="eu-west-1", service="lambda").meta.region_name == "eu-west-1"
    assert lambda_eval_utils.boto_client_for is original


UPDATES = [
    ("SET #s = :s, n = if_not_exists(n, :zero) + :one, tl = list_append(if_not_exists(tl, :empty), :tl)",
     {"#s": "status"}, {":s": {"S": "RUNNING"}, ":zero": {"N": "0"}, ":one": {"N": "1"}, ":empty": {"L": []},
                        ":tl": {"L": [{"S": "x"}]}}),
    ("SET #s = :s REMOVE gone ADD c :one", {"#s": "status"}, {":s": {"S": "DONE"}, ":one": {"N": "1"}}),
    ("SET m.deeper = :v", None, {":v": {"S": "deep"}}),
]


def _apply_updates(table: str) -> list[dict[str, Any]]:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                        BillingMode="PAY_PER_REQUEST")
    client.put_item(TableName=table, Item={"pk": {"S": "k"}, "gone": {"S": "x"}, "m": {"M": {}}})
    items = []
    for _ in range(2):
        for expression, names, values in UPDATES:
            extra = {"ExpressionAttributeNames": names} if names else {}
            client.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression=expression,
                               ExpressionAttributeValues=values, **extra)
            items.append(client.get_item(TableName=table, Key={"pk": {"S": "k"}})["Item"])
    with pytest.raises(Exception, match="ValidationException"):
        client.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression="SET = nonsense")
    return items


def test_update_expressions_parsed_once_apply_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    with mock_aws():
        plain = _apply_updates("plain")
        with update_expressions_parsed_once():
            ast = UpdateExpressionParser.make(UPDATES[0][0])
            shape = repr(ast)
            assert UpdateExpressionParser.make(UPDATES[0][0]) is ast  # parsed once
            fast = _apply_updates("fast")
            assert repr(ast) == shape  # its users left the shared AST as it was
    assert fast == plain
    assert UpdateExpressionParser.make(UPDATES[0][0]) is not UpdateExpressionParser.make(UPDATES[0][0])  # undone


def test_backends_found_once_are_moto_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import backends
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    from npa_workflow.embedded_aws.moto_server import start_moto_server

    hosts = ["dynamodb.us-east-1.amazonaws.com", "states.us-east-1.amazonaws.com", "lambda.eu-west-1.amazonaws.com",
             "s3.amazonaws.com", "bucket.s3.amazonaws.com", "moto_api", "sqs"]
    with start_moto_server() as server:
        app = server.wsgi_app
        plain = [DomainDispatcherApplication.get_backend_for_host(app, h) for h in hosts]
        listings = []
        real = backends.list_of_moto_modules
        monkeypatch.setattr(backends, "list_of_moto_modules", lambda: listings.append(1) or real())
        with backends_found_once():
            fast = [app.get_backend_for_host(h) for h in hosts]
            assert [app.get_backend_for_host(h) for h in hosts] == fast
            looked_up = len(listings)
            assert app.get_backend_for_host("dynamodb.us-east-1.amazonaws.com") == "dynamodb"
            assert len(listings) == looked_up  # found once: no listing of moto's folder again
            assert app.get_backend_for_host(None) is None
        assert fast == plain and "dynamodb" in plain and "stepfunctions" in plain


CONDITIONS = [
    ("attribute_exists(pk) AND NOT #status IN (:t1, :t2, :t3) AND (attribute_not_exists(job_id) OR job_id = :job_id)",
     {"#status": "status"}, {":t1": {"S": "SUCCEEDED"}, ":t2": {"S": "FAILED"}, ":t3": {"S": "CANCELLED"},
                             ":job_id": {"S": "local-1"}}),
    ("attribute_not_exists(pk)", None, None),
    ("begins_with(sk, :p) AND m.deeper = :v OR contains(tl, :x)", None,
     {":p": {"S": "WAVE#"}, ":v": {"S": "deep"}, ":x": {"S": "x"}}),
    ("#s BETWEEN :a AND :b", {"#s": "status"}, {":a": {"S": "A"}, ":b": {"S": "Z"}}),
]


def test_conditions_tokenized_once_decide_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    items = [Item(DynamoType({"S": "RUN#r1"}), DynamoType({"S": sk}), attrs) for sk, attrs in [
        ("WAVE#a#A1", {"pk": {"S": "RUN#r1"}, "sk": {"S": "WAVE#a#A1"}, "status": {"S": "RUNNING"}}),
        ("WAVE#b#A1", {"pk": {"S": "RUN#r1"}, "sk": {"S": "WAVE#b#A1"}, "status": {"S": "FAILED"},
                       "job_id": {"S": "local-1"}, "tl": {"L": [{"S": "x"}]}, "m": {"M": {"deeper": {"S": "deep"}}}}),
        ("RUN", {"pk": {"S": "RUN#r1"}, "sk": {"S": "RUN"}, "job_id": {"S": "local-2"}}),
    ]]

    def decide() -> list[list[bool]]:
        return [[ConditionExpressionParser(e, n, v).parse().expr(item) for item in items] for e, n, v in CONDITIONS]

    def tokens() -> list[Any]:
        return [list(ConditionExpressionParser(e, n, v)._lex_condition_expression()) for e, n, v in CONDITIONS]

    plain, plain_tokens = decide(), tokens()
    with conditions_tokenized_once():
        shared = ConditionExpressionParser(CONDITIONS[0][0], None, None)._lex_condition_expression()
        assert shared is not ConditionExpressionParser(CONDITIONS[0][0], None, None)._lex_condition_expression()
        fast, fast_tokens = decide(), tokens()
        lexed: list[str] = []
        lex_one = ConditionExpressionParser._lex_one_node
        monkeypatch.setattr(ConditionExpressionParser, "_lex_one_node",
                            lambda self, rest: lexed.append(rest) or lex_one(self, rest))
        assert decide() == fast  # a second use of the kept tokens decides the same
        assert lexed == []  # without tokenizing again
        monkeypatch.undo()
        with pytest.raises(ValueError, match="Cannot parse condition"):
            ConditionExpressionParser("a = :v ;", None, {":v": {"S": "x"}}).parse()
    assert fast == plain and fast_tokens == plain_tokens
    assert plain[0] == [True, False, False] and plain[1] == [False, False, False] and plain[2] == [False, True, False]


QUERIES = [
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "RUN#b"}}},
    {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)", "ScanIndexForward": False, "Limit": 1,
     "ConsistentRead": True, "ExpressionAttributeValues": {":p": {"S": "RUN#b"}, ":s": {"S": "WAVE#w01"}}},
    {"KeyConditionExpression": "pk = :p AND begins_with(sk, :s)", "Select": "COUNT", "FilterExpression": "#st = :st",
     "ExpressionAttributeNames": {"#st": "state"},
     "ExpressionAttributeValues": {":p": {"S": "RUN#a"}, ":s": {"S": "WAVE#w0"}, ":st": {"S": "w03"}}},
    {"KeyConditionExpression": "pk = :p AND sk BETWEEN :lo AND :hi", "Limit": 3,
     "ExpressionAttributeValues": {":p": {"S": "RUN#a"}, ":lo": {"S": "WAVE#w02"}, ":hi": {"S": "WAVE#w09"}}},
    {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "RUN#none"}}},
    {"IndexName": "active", "KeyConditionExpression": "active_pk = :p",
     "ExpressionAttributeValues": {":p": {"S": "A"}}},
]


def _run_queries(table: str) -> list[Any]:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk", "active_pk")],
        GlobalSecondaryIndexes=[{"IndexName": "active", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "active_pk", "KeyType": "HASH"},
                                               {"AttributeName": "sk", "KeyType": "RANGE"}]}])
    for run in ("a", "b", "c"):
        for i in range(12):
            item = {"pk": {"S": f"RUN#{run}"}, "sk": {"S": f"WAVE#w{i % 6:02d}#A{i // 6 + 1}"},
                    "state": {"S": f"w{i % 6:02d}"}, "tl": {"L": [{"S": "x" * i}]}}
            if i % 4 == 0:
                item["active_pk"] = {"S": "A"}
            client.put_item(TableName=table, Item=item)
    answers: list[Any] = []
    for query in QUERIES:
        pages, kwargs = [], dict(query)
        while True:  # every page, as the ledger follows them
            resp = client.query(TableName=table, **kwargs)
            pages.append({k: resp.get(k) for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")})
            if not resp.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
        answers.append(pages)
    return answers


def test_partition_queries_answer_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws
    from moto.dynamodb.models.table import Table

    with mock_aws():
        plain = _run_queries("plain")
        collected: list[int] = []  # how many items each query collected before its key condition
        with partition_queries():
            seam = Table.all_items
            fast = _run_queries("fast")
            monkeypatch.setattr(Table, "all_items", lambda self: collected.append(len(items := seam(self))) or items)
            assert _run_queries("again") == fast
            monkeypatch.undo()
    assert fast == plain
    assert plain[0][0]["Count"] == 12 and plain[2][0]["Count"] == 2 and plain[5][0]["Count"] == 9
    # key queries read their partition (12 items, none for a run without any), the index query the table (36)
    assert set(collected) == {12, 0, 36}


def test_method_names_listed_once_are_moto_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    from moto.core import responses
    from moto.core.utils import method_names_from_class
    from moto.dynamodb.responses import DynamoHandler
    from moto.stepfunctions.responses import StepFunctionResponse

    with method_names_listed_once():
        for clazz in (DynamoHandler, StepFunctionResponse):
            names = responses.method_names_from_class(clazz)
            assert names == method_names_from_class(clazz) and "get_item" in method_names_from_class(DynamoHandler)
            names.append("changed by a caller")  # a copy: the kept list is not changed
            assert responses.method_names_from_class(clazz) == method_names_from_class(clazz)
        listings: list[object] = []
        getmembers = inspect.getmembers
        monkeypatch.setattr(inspect, "getmembers", lambda *a, **k: listings.append(a[0]) or getmembers(*a, **k))
        responses.method_names_from_class(DynamoHandler)
        assert listings == []  # kept: the class tree is not walked again
        monkeypatch.undo()
    assert responses.method_names_from_class is method_names_from_class  # undone


def test_walkers_and_passed_checks_apply_and_refuse_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
    from moto.dynamodb.parsing.validators import ActionCountValidator


    def refusals(table: str) -> list[str]:
        client = boto3.client("dynamodb", region_name="us-east-1")
        out = []
        for expression, values in [("SET a = :v, a = :w", {":v": {"S": "1"}, ":w": {"S": "2"}}),  # duplicate path
                                   ("SET pk = :v", {":v": {"S": "other"}}),  # a key attribute
                                   ("SET a = gone + :n", {":n": {"N": "1"}})]:  # a path that does not exist
            try:
                client.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression=expression,
                                   ExpressionAttributeValues=values)
                out.append("applied")
            except client.exceptions.ClientError as exc:
                out.append(exc.response["Error"]["Message"])
        return out

    with mock_aws():
        plain = _apply_updates("plain"), refusals("plain")
        with walkers_built_once():
            fast = _apply_updates("fast"), refusals("fast")
        asked: list[object] = []  # the walkers' questions "which node types do you process?"
        kinds = DepthFirstTraverser.nodes_to_be_processed
        monkeypatch.setattr(DepthFirstTraverser, "nodes_to_be_processed",
                            lambda self: asked.append(self) or kinds(self))
        walked = _apply_updates("asked"), refusals("asked")
        per_node = len(asked)
        asked.clear()
        monkeypatch.setattr(speedups, "_DECIDED", {})  # as in a new process (another test may have filled it)
        monkeypatch.setattr(speedups, "_CHOSEN", {})
        with walks_decided_per_type():
            decided = _apply_updates("decided"), refusals("decided")
        assert 0 < len(asked) < per_node / 3  # asked once per node class of a walk, not at every node
        monkeypatch.undo()
        with walkers_built_once(), walks_decided_per_type():
            both = _apply_updates("both"), refusals("both")
        with update_expressions_parsed_once(), update_checks_passed_once():  # (5 shares the AST 11 keys on)
            checks: list[object] = []
            count = ActionCountValidator.verify_action_counts
            monkeypatch.setattr(ActionCountValidator, "verify_action_counts",
                                lambda self, node: checks.append(node) or count(self, node))
            passed_once = _apply_updates("passed"), refusals("passed"), refusals("passed")
            first_round = len(checks)
            _apply_updates("again")
            monkeypatch.undo()
    assert fast == plain == walked == decided == both
    assert passed_once == (*plain, plain[1])  # refused every time, by the same check
    assert all(message != "applied" for message in plain[1])
    # _apply_updates sends 3 texts twice (and one that does not parse): checked once each, then no more
    assert first_round > 0 and len(checks) == first_round


PROJECTIONS = [
    ({"ProjectionExpression": "pk, sk, #s, outputs, gone", "ExpressionAttributeNames": {"#s": "status"}}, True),
    ({"ProjectionExpression": "m, n, ss"}, True),  # a map, a number, a set; m absent from one item
    ({"ProjectionExpression": "outputs[1], sk"}, False),  # a list element: moto's own
    ({"ProjectionExpression": "m.deep.x, pk"}, False),  # a nested path: moto's own
    ({"ProjectionExpression": "Outputs, pk"}, True),  # names are case-sensitive: the item has `outputs` only
]


def _project(table: str) -> list[Any]:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": "S"} for n in ("pk", "sk")])
    for i in range(3):
        item = {"pk": {"S": "RUN#a"}, "sk": {"S": f"W#{i}"}, "status": {"S": "RUNNING"}, "n": {"N": "1.50"},
                "outputs": {"L": [{"S": "s3://b/x"}, {"S": f"s3://b/{i}"}]}, "ss": {"SS": ["b", "a"]},
                "m": {"M": {"deep": {"M": {"x": {"N": str(i)}, "y": {"NULL": True}}}, "flag": {"BOOL": True}}}}
        if i == 1:
            del item["m"]
        client.put_item(TableName=table, Item=item)
    answers = []
    for projection, _ in PROJECTIONS:
        answers.append(client.query(TableName=table, KeyConditionExpression="pk = :p",
                                    ExpressionAttributeValues={":p": {"S": "RUN#a"}}, **projection)["Items"])
        answers.append(client.get_item(TableName=table, Key={"pk": {"S": "RUN#a"}, "sk": {"S": "W#0"}},
                                       **projection).get("Item"))
    return answers


def test_projections_of_names_answer_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws
    from moto.dynamodb.models.dynamo_type import Item

    with mock_aws():
        plain = _project("plain")
        with projections_of_names():
            fast = _project("fast")
            whole: list[int] = []  # whole-item conversions, per projection
            convert = Item.to_regular_json
            monkeypatch.setattr(Item, "to_regular_json", lambda self: whole.append(1) or convert(self))
            for projection, names_only in PROJECTIONS:
                whole.clear()
                paths = projection["ProjectionExpression"].replace("#s", "status").split(", ")
                Item(None, None, {"pk": {"S": "k"}, "m": {"M": {}}}).project([path.split(".") for path in paths])
                assert (whole == []) == names_only, projection
            monkeypatch.undo()
    assert fast == plain
    assert plain[0][1] == {"pk": {"S": "RUN#a"}, "sk": {"S": "W#1"}, "status": {"S": "RUNNING"},
                           "outputs": {"L": [{"S": "s3://b/x"}, {"S": "s3://b/1"}]}}


def _tree_shape(value: Any) -> Any:
    """An update-expression tree's content, its parent links left out."""
    from moto.dynamodb.parsing.ast_nodes import Node

    if isinstance(value, Node):
        return type(value).__name__, {k: _tree_shape(v) for k, v in vars(value).items() if k != "parent"}
    if isinstance(value, list):
        return [_tree_shape(v) for v in value]
    return value


def test_trees_copied_directly_are_deep_copies() -> None:
    import copy

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    def nodes(tree: Any) -> list[Any]:
        found, todo = [], [tree]
        while todo:
            node = todo.pop()
            found.append(node)
            todo.extend(child for child in node.children or [] if isinstance(child, Node))
        return found

    shape = _tree_shape
    for expression, _, _ in UPDATES:
        tree = UpdateExpressionParser.make(expression)
        with trees_copied_directly():
            fast = validators.deepcopy(tree)
            assert validators.deepcopy({"x": [1]}) == {"x": [1]}  # anything else: copy.deepcopy
        plain = copy.deepcopy(tree)
        assert shape(fast) == shape(plain) == shape(tree)
        originals = {id(node) for node in nodes(tree)}
        copies = nodes(fast)
        assert [type(n) for n in copies] == [type(n) for n in nodes(plain)]
        assert not originals & {id(node) for node in copies}  # nothing shared with the original
        inside = {id(node) for node in copies}
        assert all(node.parent is None or id(node.parent) in inside for node in copies)  # parents: the copy's
        assert [vars(n).keys() for n in copies] == [vars(n).keys() for n in nodes(plain)]
    assert validators.deepcopy is copy.deepcopy  # undone


def test_trees_copied_directly_pickle_a_tree_once_and_copy_what_does_not_pickle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import pickle

    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    tree = UpdateExpressionParser.make(UPDATES[1][0])
    odd = UpdateExpressionParser.make(UPDATES[0][0])
    odd.children[0].hook = lambda: "not picklable"  # a tree `pickle` refuses: copied node by node instead
    dumped: list[object] = []
    dumps = pickle.dumps
    monkeypatch.setattr(pickle, "dumps", lambda obj, **kw: dumped.append(obj) or dumps(obj, **kw))
    with trees_copied_directly():
        first, second = validators.deepcopy(tree), validators.deepcopy(tree)
        odd_copies = validators.deepcopy(odd), validators.deepcopy(odd)
    assert dumped == [tree, odd]  # each tree pickled once, then only unpickled
    assert first is not second
    assert _tree_shape(first) == _tree_shape(second) == _tree_shape(copy.deepcopy(tree)) == _tree_shape(tree)
    for copied in odd_copies:
        assert copied is not odd and copied.children[0] is not odd.children[0]
        assert copied.children[0].hook is odd.children[0].hook  # as copy.deepcopy keeps a function


def test_trees_copied_directly_apply_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    with mock_aws():
        plain = _apply_updates("plain")
        with update_expressions_parsed_once(), trees_copied_directly():
            fast = _apply_updates("fast")
    assert fast == plain



def test_conditions_parsed_once_per_request_decide_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws
    from moto.dynamodb.comparisons import ConditionExpressionParser


    def writes(table: str) -> list[Any]:
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        out: list[Any] = []
        calls = [
            ("put", {"Item": {"pk": {"S": "k"}, "n": {"N": "1"}}, "ConditionExpression": "attribute_not_exists(pk)"}),
            ("put", {"Item": {"pk": {"S": "k"}}, "ConditionExpression": "attribute_not_exists(pk)"}),  # refused
            ("update", {"Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET n = :two",
                        "ConditionExpression": "n = :one", "ExpressionAttributeValues": {
                            ":one": {"N": "1"}, ":two": {"N": "2"}}}),
            ("update", {"Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET n = :two",  # same text, other values
                        "ConditionExpression": "n = :one", "ExpressionAttributeValues": {
                            ":one": {"N": "2"}, ":two": {"N": "3"}}}),  # applied: n is 2 now
            ("update", {"Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET #n = :v", "ConditionExpression": "#n = :v",
                        "ExpressionAttributeNames": {"#n": "n"}, "ExpressionAttributeValues": {":v": {"N": "2"}}}),
            # (refused: n is 3)
            ("update", {"Key": {"pk": {"S": "k"}}, "UpdateExpression": "SET n = :v",  # a value it does not use
                        "ConditionExpression": "n = :v", "ExpressionAttributeValues": {
                            ":v": {"N": "2"}, ":unused": {"N": "0"}}}),
            # no values: the same text with other names, then a text differing in a name's case only
            ("put", {"Item": {"pk": {"S": "k"}, "n": {"N": "3"}}, "ConditionExpression": "attribute_exists(#a)",
                     "ExpressionAttributeNames": {"#a": "n"}}),
            ("put", {"Item": {"pk": {"S": "k"}, "n": {"N": "3"}}, "ConditionExpression": "attribute_exists(#a)",
                     "ExpressionAttributeNames": {"#a": "gone"}}),  # refused
            ("put", {"Item": {"pk": {"S": "k"}, "n": {"N": "3"}}, "ConditionExpression": "attribute_exists(n)"}),
            ("put", {"Item": {"pk": {"S": "k"}, "n": {"N": "3"}}, "ConditionExpression": "attribute_exists(N)"}),
            # (refused: no attribute N)
        ]
        for op, kwargs in calls:
            try:
                if op == "put":
                    client.put_item(TableName=table, **kwargs)
                else:
                    client.update_item(TableName=table, **kwargs)
                out.append("applied")
            except client.exceptions.ClientError as exc:
                out.append(exc.response["Error"]["Message"])
            out.append(client.get_item(TableName=table, Key={"pk": {"S": "k"}}).get("Item"))
        return out

    with mock_aws():
        parses: list[object] = []
        parse = ConditionExpressionParser.parse
        monkeypatch.setattr(ConditionExpressionParser, "parse", lambda self: parses.append(1) or parse(self))
        plain = writes("plain")
        plain_parses = len(parses)
        parses.clear()
        with conditions_parsed_once_per_request():
            fast = writes("fast")
        monkeypatch.undo()
    assert fast == plain
    assert plain[0] == "applied" and "conditional" in plain[2].lower()
    assert plain[6] == "applied" and plain[7]["n"] == {"N": "3"} and "conditional" in plain[8].lower()
    assert "unused" in plain[10].lower()  # the names and values found still reach the handler's check
    assert [plain[i] == "applied" for i in (12, 14, 16, 18)] == [True, False, True, False]  # as marked
    assert 0 < len(parses) < plain_parses  # the backend's parse of a write reuses the handler's


# --- differential tests: what each cache must not ignore ----------------------------------------------------


def test_jsonpath_parsed_once_reads_each_datum_and_tells_names_by_case() -> None:
    """Speed-up 2 keeps the parse of a path, never what it found: the same path over other data finds that
    data's value; paths that differ in a name's case are different paths (JSON keys are case-sensitive)."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    paths = ["$.a", "$.A", "$.a.b[0]", "$.A.b[0]", "$.items[*].id", "$.Items[*].id"]
    data = [{"a": {"b": [1]}, "A": {"b": [2]}, "items": [{"id": "x"}], "Items": [{"id": "X"}]},
            {"a": {"b": [3]}, "A": {"b": [4]}, "items": [{"id": "y"}, {"id": "z"}], "Items": []}]

    def found() -> list[Any]:
        out: list[Any] = []
        for datum in data:
            for path in paths:
                out.append(json_path.extract_json(path, datum))
            # ResultPath writes into each datum afresh: the kept parse holds no datum of its own
            out.append(result_path.parse("$.r").update_or_create(json.loads(json.dumps(datum)), {"n": 1})["r"])
            out.append(result_path.parse("$.R").update_or_create({}, 2))
        return out

    plain = found()
    with jsonpath_parsed_once():
        fast, again = found(), found()
    assert fast == again == plain
    assert plain[0] != plain[1] and plain[0] != plain[len(paths) + 3]  # the cases and the data do differ


UPDATE_TABLES = {"by_pk": ["pk"], "by_PK": ["PK"], "by_pk_sk": ["pk", "sk"]}
VALUES = {":v": {"S": "new"}, ":w": {"S": "other"}, ":n": {"N": "1"}}
# (table, expression, names): each text is sent with names and tables its verdict must not be carried to
DIFFERENTIAL_UPDATES = [
    ("by_pk", "SET #k = :v", {"#k": "status"}),  # passes...
    ("by_pk", "SET #k = :v", {"#k": "pk"}),  # ...the same text, names naming the key: refused
    ("by_pk", "SET #k = :v", {"#k": "PK"}),  # not the key (names are case-sensitive): applied
    ("by_PK", "SET #k = :v", {"#k": "PK"}),  # the key of that table: refused
    ("by_pk", "SET extra = :v", None),
    ("by_pk_sk", "SET extra = :v", None),
    ("by_pk", "SET sk = :v", None),  # not a key here...
    ("by_pk_sk", "SET sk = :v", None),  # ...the sort key here: refused
    ("by_pk", "SET a = :v", None),
    ("by_pk", "SET A = :w", None),  # another attribute: both kept
    ("by_pk", "SET Pk = :w", None),
    ("by_pk", "SET pK = :w", None),
    ("by_pk", "SET pk = :w", None),  # the key: refused
    ("by_pk", "SET #a = :v, #b = :w", {"#a": "x", "#b": "y"}),
    ("by_pk", "SET #a = :v, #b = :w", {"#a": "x", "#b": "x"}),  # two actions on one path: refused
    ("by_pk", "SET #a = :v, #b = :w", {"#a": "x", "#b": "X"}),
    ("by_pk", "SET #a.b = :v, #b = :w", {"#a": "m", "#b": "n"}),  # no map m: refused
    ("by_pk", "ADD #a :n", {"#a": "tally"}),
    ("by_pk", "ADD #a :n", {"#a": "pk"}),  # refused
    ("by_pk", "REMOVE #a", {"#a": "x"}),
    ("by_pk", "REMOVE #a", {"#a": "pk"}),  # refused
]


def _differential_updates() -> list[Any]:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    for table, keys in UPDATE_TABLES.items():
        schema = [{"AttributeName": k, "KeyType": t} for k, t in zip(keys, ("HASH", "RANGE"), strict=False)]
        client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST", KeySchema=schema,
                            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys])
    out: list[Any] = []
    for _ in range(2):  # the second round meets every verdict the first one kept
        for table, expression, names in DIFFERENTIAL_UPDATES:
            key = {k: {"S": "k"} for k in UPDATE_TABLES[table]}
            values = {k: v for k, v in VALUES.items() if k in expression}
            extra: dict[str, Any] = {"ExpressionAttributeNames": names} if names else {}
            if values:
                extra["ExpressionAttributeValues"] = values
            try:
                client.update_item(TableName=table, Key=key, UpdateExpression=expression, **extra)
                out.append("applied")
            except client.exceptions.ClientError as exc:
                out.append(exc.response["Error"]["Message"])
            out.append(client.get_item(TableName=table, Key=key).get("Item"))
    return out


@pytest.mark.parametrize("speedup", [update_expressions_parsed_once, update_checks_passed_once, moto_speedups],
                         ids=["5", "11", "all"])
def test_update_speedups_carry_no_verdict_across_names_case_or_keys(speedup: Any) -> None:
    """Speed-ups 5 and 11 keep a parse per text and a verdict per (text, names, table keys): the same text with
    other names, a name in another case, or on a table with other keys is answered as moto answers it."""
    from contextlib import ExitStack

    from moto import mock_aws

    with mock_aws():
        plain = _differential_updates()
    with mock_aws(), ExitStack() as stack:
        stack.enter_context(speedup())
        if speedup is update_checks_passed_once:
            stack.enter_context(update_expressions_parsed_once())  # 11's verdicts are keyed on 5's shared tree
        fast = _differential_updates()
    assert fast == plain
    verdicts = [plain[2 * i] == "applied" for i in range(len(DIFFERENTIAL_UPDATES))]
    assert [i for i, applied in enumerate(verdicts) if not applied] == [1, 3, 7, 12, 14, 16, 18, 20]  # as marked


def test_definition_parsed_once_gives_each_text_its_own_program() -> None:
    """Speed-up 3 keeps a validated program per definition text: an execution of one text never runs another's."""
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    texts = [json.dumps({"StartAt": name, "States": {name: {"Type": "Pass", "End": True}}})
             for name in ("First", "Second", "second")]

    def worker(text: str) -> Any:
        class Worker:  # what `_get_evaluation_entrypoint` reads of an ExecutionWorker
            class _evaluation_details:  # noqa: N801
                class state_machine_details:  # noqa: N801
                    definition = text

        return Worker()

    with definition_parsed_once():
        for text in texts:
            StepFunctionsParserBackend._validate_definition(definition=text)
        started = [ExecutionWorker._get_evaluation_entrypoint(worker(text)).start_at.start_at_name
                   for text in reversed(texts)]
    assert started == ["second", "Second", "First"]


def test_conditions_tokenized_once_tell_names_by_case() -> None:
    """Speed-up 7 keeps the tokens of a text: texts that differ in a name's case are other texts (attribute names
    are case-sensitive), decided as moto decides them."""
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    item = Item(DynamoType({"S": "k"}), None, {"pk": {"S": "k"}, "colour": {"S": "a"}, "Colour": {"S": "b"}})
    texts = ["colour = :v", "Colour = :v", "COLOUR = :v", "attribute_exists(colour)", "attribute_exists(COLOUR)"]

    def decide() -> list[bool]:
        return [ConditionExpressionParser(text, None, {":v": {"S": "a"}}).parse().expr(item) for text in texts]

    plain = decide()
    with conditions_tokenized_once():
        fast, again = decide(), decide()
    assert fast == again == plain == [True, False, False, True, False]

