"""The durable local stack keeps what moto holds: two writes of one S3 key are recorded in the order moto applied
them, so a restore (``--resume``, a restarted ``serve``) brings back the body moto last had."""

from __future__ import annotations

import threading
import time

import boto3
from moto import mock_aws

from npa_workflow.embedded_aws.durable_aws import DurableAws, durable_aws

BUCKET = "durable-test"


def test_two_puts_of_one_key_are_recorded_in_the_order_moto_applied_them(tmp_path, monkeypatch):
    # Fault injection: the first writer is slow to record what moto already applied. A second PUT of the same key
    # must not get between moto and that record, or the older body would be the one kept on disk.
    original_record = DurableAws.record_object
    recording = threading.Event()

    def slow_first_record(self, bucket, key, body):
        if body == b"first":
            recording.set()
            time.sleep(0.5)  # the slowness injected: the second PUT is sent meanwhile
        original_record(self, bucket, key, body)

    monkeypatch.setattr(DurableAws, "record_object", slow_first_record)
    root = tmp_path / "aws"
    with mock_aws(), durable_aws(root):
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        first = threading.Thread(target=lambda: s3.put_object(Bucket=BUCKET, Key="k", Body=b"first"))
        first.start()
        assert recording.wait(timeout=30)  # the first PUT is in moto and recording
        s3.put_object(Bucket=BUCKET, Key="k", Body=b"second")
        first.join(timeout=30)
        in_moto = s3.get_object(Bucket=BUCKET, Key="k")["Body"].read()

    with mock_aws():
        state = DurableAws(root)
        try:
            assert state.restore_objects() == 1
        finally:
            state.close()
        restored = boto3.client("s3", region_name="us-east-1").get_object(Bucket=BUCKET, Key="k")["Body"].read()
    assert restored == in_moto


def test_item_listeners_hear_each_write_once_recorded_before_moto_answers(tmp_path, monkeypatch, caplog):
    """The local run finishes a wave as soon as the ledger records its job (not when the launch returns): a
    listener hears of every item write, after it is on disk and before the request that made it is answered; a
    failing listener does not fail the write; the listener is gone after its block."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    heard: list[tuple[str, dict, dict | None, int]] = []
    with mock_aws(), durable_aws(tmp_path / "aws") as state:
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")

        def listener(table, key, item):
            recorded = dict(state.items(table)).get('{"pk": {"S": "k"}}')  # on disk already
            heard.append((table, key, item, recorded is not None))
            raise RuntimeError(f"a listener's trouble quoting the item: {item}")

        with state.item_written(listener):
            ddb.put_item(TableName="t", Item={"pk": {"S": "k"}, "job": {"S": "a"}})
            ddb.update_item(TableName="t", Key={"pk": {"S": "k"}}, UpdateExpression="SET job = :j",
                            ExpressionAttributeValues={":j": {"S": "b"}})
            ddb.delete_item(TableName="t", Key={"pk": {"S": "k"}})
        ddb.put_item(TableName="t", Item={"pk": {"S": "after"}})
    assert "an item listener failed on a t write: RuntimeError" in caplog.text
    assert "quoting" not in caplog.text  # the log names the failure, never the item (a ledger item holds a token)
    assert heard == [("t", {"pk": {"S": "k"}}, {"pk": {"S": "k"}, "job": {"S": "a"}}, True),
                     ("t", {"pk": {"S": "k"}}, {"pk": {"S": "k"}, "job": {"S": "b"}}, True),
                     ("t", {"pk": {"S": "k"}}, None, False)]


def test_object_listeners_hear_each_stored_object_with_the_etag_a_listing_shows(tmp_path, monkeypatch):
    """serve's S3 event source: every PUT (and copy) is heard with the ETag and size a listing reports, none after
    the block; a restore (paused) is not heard."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    heard: list[tuple[str, str, str, int, str | None]] = []
    with mock_aws(), durable_aws(tmp_path / "aws") as state:
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        with state.object_written(lambda *event: heard.append(event)):
            s3.put_object(Bucket=BUCKET, Key="inbox/a.yaml", Body=b"abc")
            s3.copy_object(Bucket=BUCKET, Key="b", CopySource={"Bucket": BUCKET, "Key": "inbox/a.yaml"})
            with state.paused():
                s3.put_object(Bucket=BUCKET, Key="restored", Body=b"x")
        s3.put_object(Bucket=BUCKET, Key="after", Body=b"x")
        listed = {o["Key"]: (o["ETag"], o["Size"]) for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]}
    # an unversioned bucket: no version id
    assert heard == [(BUCKET, "inbox/a.yaml", *listed["inbox/a.yaml"], None), (BUCKET, "b", *listed["b"], None)]


def test_a_query_waits_for_a_write_being_applied_and_sees_the_item_after_it(monkeypatch):
    """DynamoDB's reads are read-committed ("read operations always return committed values for an item": the
    developer guide, HowItWorks.ReadConsistency): a read sees an item before or after a write, never during.
    moto iterates the partition's and the item's dicts while another thread's write changes them, and answers 500
    ("dictionary changed size during iteration": once in a loaded run of the suite, a traceback on `run`'s
    stderr). With the durable layer, a Query that comes while a write is inside moto's change waits for it, and
    sees the item after. The write is held there (past its condition) until the query has been sent and has had
    time to answer."""
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    validate = UpdateExpressionValidator.validate
    in_change, release = threading.Event(), threading.Event()

    def held_in_change(self):
        if (self.expression_attribute_values or {}).get(":s") == {"S": "SUCCEEDED"}:
            in_change.set()
            release.wait(30)
        return validate(self)

    with mock_aws(), durable_aws(None):
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                                   {"AttributeName": "sk", "KeyType": "RANGE"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                               {"AttributeName": "sk", "AttributeType": "S"}],
                         BillingMode="PAY_PER_REQUEST")
        key = {"pk": {"S": "run"}, "sk": {"S": "wave"}}
        ddb.put_item(TableName="t", Item={**key, "status": {"S": "RUNNING"}})
        monkeypatch.setattr(UpdateExpressionValidator, "validate", held_in_change)
        writer = threading.Thread(target=lambda: ddb.update_item(
            TableName="t", Key=key, UpdateExpression="SET #s = :s", ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "SUCCEEDED"}}))
        writer.start()
        assert in_change.wait(30)
        seen: list[str] = []
        sent, answered = threading.Event(), threading.Event()

        def query() -> None:
            sent.set()
            items = ddb.query(TableName="t", KeyConditionExpression="pk = :p",
                              ExpressionAttributeValues={":p": {"S": "run"}})["Items"]
            seen.append(items[0]["status"]["S"])
            answered.set()

        reader = threading.Thread(target=query)
        reader.start()
        assert sent.wait(30)
        # Long enough for an unguarded query to answer (it takes milliseconds); a guarded one is still waiting.
        assert not answered.wait(1.0), f"the query answered while the write was inside moto: {seen}"
        release.set()
        writer.join(30)
        reader.join(30)
    assert seen == ["SUCCEEDED"]
