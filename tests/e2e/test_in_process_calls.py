"""`embedded_aws.in_process_calls`: the process's own calls reach moto's app without the socket, with the same
answers."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from npa_workflow.embedded_aws.in_process_calls import in_process_calls
from npa_workflow.embedded_aws.moto_server import MotoServer, start_moto_server

KEY = "dir/a b+ü%?.txt"  # a space, a plus, non-ASCII, a percent and a question mark: all escaped in the URL


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    with start_moto_server() as running:
        yield running
        running.reset()


def http_requests(server: MotoServer) -> list[str]:
    """Count the requests the HTTP server handles from now on."""
    seen: list[str] = []
    werkzeug_server = server._server.server  # (embedded_aws.moto_server._HttpServer)
    handle = werkzeug_server.process_request

    def counting(request: Any, address: Any) -> None:
        seen.append(str(address))
        handle(request, address)

    werkzeug_server.process_request = counting
    return seen


def exercise(server: MotoServer, suffix: str) -> dict[str, Any]:
    env = server.client_env()
    session = boto3.session.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                    aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
    s3 = session.client("s3", endpoint_url=server.endpoint_url)
    ddb = session.client("dynamodb", endpoint_url=server.endpoint_url.replace("127.0.0.1", "localhost"))
    bucket, table = f"b-{suffix}", f"t-{suffix}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=KEY, Body=b"hello")
    s3.upload_fileobj(io.BytesIO(b"streamed body"), bucket, "streamed")  # a file body (botocore reads it)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    body = s3.get_object(Bucket=bucket, Key=KEY)["Body"].read()
    streamed = s3.get_object(Bucket=bucket, Key="streamed")["Body"].read()
    with pytest.raises(ClientError) as missing:
        s3.get_object(Bucket=bucket, Key="nope")
    ddb.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST")
    for _ in range(3):  # each call applied once: the counter counts calls
        ddb.update_item(TableName=table, Key={"pk": {"S": "k"}}, UpdateExpression="ADD n :one",
                        ExpressionAttributeValues={":one": {"N": "1"}})
    with pytest.raises(ClientError) as conditional:
        ddb.put_item(TableName=table, Item={"pk": {"S": "k"}}, ConditionExpression="attribute_not_exists(pk)")
    item = ddb.get_item(TableName=table, Key={"pk": {"S": "k"}})["Item"]
    return {"listed": sorted(listed), "body": body, "streamed": streamed, "item": item,
            "missing": missing.value.response["Error"]["Code"],
            "conditional": conditional.value.response["Error"]["Code"]}


def test_same_answers_without_the_socket(server: MotoServer) -> None:
    seen = http_requests(server)
    over_http = exercise(server, "http")
    assert seen, "the first pass goes over HTTP"
    seen.clear()
    with in_process_calls(server.port, server.wsgi_app):
        in_place = exercise(server, "local")
    assert seen == []  # not one request reached the socket
    assert in_place == over_http
    assert in_place["listed"] == sorted([KEY, "streamed"]) and in_place["body"] == b"hello"
    assert in_place["item"]["n"] == {"N": "3"}
    assert in_place["missing"] == "NoSuchKey" and in_place["conditional"] == "ConditionalCheckFailedException"
    exercise(server, "after")  # undone on exit: over HTTP again
    assert seen


def test_in_place_calls_reach_the_handler_without_flask(server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routed requests skip Flask's request context, routing and CORS: moto's handler answers them directly."""
    import flask

    entered: list[str] = []
    wsgi_app = flask.Flask.wsgi_app

    def counting(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        entered.append(environ["PATH_INFO"])
        return wsgi_app(self, environ, start_response)

    monkeypatch.setattr(flask.Flask, "wsgi_app", counting)
    with in_process_calls(server.port, server.wsgi_app):
        exercise(server, "noflask")
        assert entered == []
        env = server.client_env()
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=server.endpoint_url,
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
        with pytest.raises(ClientError):  # moto's own API has no moto handler: the whole app answers it
            s3.meta.events.register("before-sign.s3.ListBuckets", lambda request, **_: setattr(
                request, "url", f"{server.endpoint_url}/moto-api/nope"))
            s3.list_buckets()
    assert entered == ["/moto-api/nope"]


def test_signature_skipped_only_for_sigv4_requests_answered_in_place(server: MotoServer) -> None:
    """moto reads the credential scope, never the signature: in place, SigV4 requests carry the real scope and a
    zero signature; S3's signer (moto reads its payload hash) and requests to anything else are signed as ever."""
    from botocore.awsrequest import AWSResponse

    from npa_workflow.embedded_aws.in_process_calls import _Body

    env = server.client_env()
    keys = {"aws_access_key_id": env["AWS_ACCESS_KEY_ID"], "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "region_name": "us-east-1"}
    seen: dict[str, str] = {}

    def capture(name: str) -> Any:
        def before_send(request: Any, **_: Any) -> None:
            seen[name] = request.headers["Authorization"].decode() if isinstance(
                request.headers["Authorization"], bytes) else request.headers["Authorization"]
        return before_send

    ddb = boto3.client("dynamodb", endpoint_url=server.endpoint_url, **keys)
    s3 = boto3.client("s3", endpoint_url=server.endpoint_url, **keys)
    elsewhere = boto3.client("dynamodb", endpoint_url="http://127.0.0.1:9", **keys)  # no server of ours there
    ddb.meta.events.register("before-send", capture("ddb"))
    s3.meta.events.register("before-send", capture("s3"))
    elsewhere.meta.events.register("before-send", capture("elsewhere"))
    elsewhere.meta.events.register("before-send", lambda **_: AWSResponse("x", 200, {}, _Body(b"{}")))
    with in_process_calls(server.port, server.wsgi_app):
        assert "TableNames" in ddb.list_tables()
        s3.list_buckets()
        elsewhere.list_tables()
    scope = f"Credential={env['AWS_ACCESS_KEY_ID']}/"
    assert scope in seen["ddb"] and "/us-east-1/dynamodb/aws4_request" in seen["ddb"]
    assert seen["ddb"].endswith("Signature=" + "0" * 64)
    for other in ("s3", "elsewhere"):
        assert scope in seen[other] and not seen[other].endswith("0" * 64), other
    seen.clear()
    ddb.list_tables()  # the block ended: signed again (over HTTP)
    assert scope in seen["ddb"] and not seen["ddb"].endswith("0" * 64)
