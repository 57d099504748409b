"""`local.in_process_calls`: the process's own calls reach moto's app without the socket, with the same answers."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from npa_workflow.local.in_process_calls import in_process_calls
from npa_workflow.local.moto_server import MotoServer, start_moto_server

KEY = "dir/a b+ü%?.txt"  # a space, a plus, non-ASCII, a percent and a question mark: all escaped in the URL


@pytest.fixture(scope="module")
def server() -> Iterator[MotoServer]:
    with start_moto_server() as running:
        yield running
        running.reset()


def http_requests(server: MotoServer) -> list[str]:
    """Count the requests the HTTP server handles from now on."""
    seen: list[str] = []
    werkzeug_server = server._server._server
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
