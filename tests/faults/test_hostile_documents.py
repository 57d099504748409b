"""Hostile documents: YAML bombs, oversized and binary uploads, tab indents. Each is refused in well under a
second with one message naming the file and a fix, on every path that reads a user document."""

from __future__ import annotations

import threading
import time

import boto3
import pytest
from moto import mock_aws

from npa_workflow.engine.inbox import read_document
from npa_workflow.errors import SpecError
from npa_workflow.local.serve import Serve
from npa_workflow.spec.loader import Limits, load_yaml_bytes, load_yaml_text

# 598 bytes that expand to 10^9 nodes with plain yaml.safe_load (the bomb, same shape).
BOMB = "a: &a [" + ",".join(["x"] * 10) + "]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8)
)


def _refused(read, *args) -> SpecError:
    started = time.monotonic()
    with pytest.raises(SpecError) as caught:
        read(*args)
    assert time.monotonic() - started < 3.0, "refusal took too long"
    for p in caught.value.problems:
        assert p.file and p.hint.strip(), p.format()
    return caught.value


def test_an_alias_bomb_is_refused_while_parsing() -> None:
    assert len(BOMB) < 700
    error = _refused(read_document, BOMB.encode(), "s3://b/inbox/bomb.yaml")
    assert "expands to more than" in str(error) and "s3://b/inbox/bomb.yaml" in str(error)


def test_an_oversized_upload_is_refused_before_it_is_decoded() -> None:
    body = b"a: " + b"x" * (5 * 1024 * 1024) + b"\n"
    assert "larger than" in str(_refused(read_document, body, "s3://b/inbox/big.yaml"))


def test_a_binary_upload_is_refused_with_a_fix() -> None:
    assert "not UTF-8" in str(_refused(read_document, bytes(range(256)) * 4, "s3://b/inbox/x.bin"))


def test_deep_nesting_is_refused_not_a_recursion_error() -> None:
    assert "nesting deeper" in str(_refused(load_yaml_text, "[" * 5000 + "]" * 5000, "deep.yaml"))


def test_a_tab_indent_says_tab_and_how_to_fix_it() -> None:
    error = _refused(load_yaml_text, "states:\n\tbad: 1\n", "tabbed.yaml")
    [problem] = error.problems
    assert "tab" in problem.message and "line 2" in problem.message
    assert "spaces" in problem.hint


def test_parsing_has_a_time_limit() -> None:
    text = "k: [" + ",".join(str(i) for i in range(100_000)) + "]\n"
    error = _refused(load_yaml_bytes, text.encode(), "slow.yaml", Limits(max_seconds=0.0))
    assert "longer than" in str(error)


def test_serve_reads_an_inbox_bomb_through_the_bounded_loader() -> None:
    """serve looks for buckets to create in an uploaded spec: that read must not expand the bomb."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="engine")
        s3.put_object(Bucket="engine", Key="inbox/bomb.yaml", Body=BOMB.encode())
        serve = Serve.__new__(Serve)
        done = threading.Event()

        def read() -> None:
            serve._ensure_buckets(s3, "engine", "inbox/bomb.yaml")
            done.set()

        worker = threading.Thread(target=read, daemon=True)
        worker.start()
        assert done.wait(10), "serve froze on a 600-byte YAML bomb"
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["engine"]
