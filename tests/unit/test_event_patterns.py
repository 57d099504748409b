"""The twin's EventPattern matcher against the examples of the EventBridge User Guide ("Event patterns", "Arrays in
event patterns", "Content filtering", "Comparison operators"), then against the stack's own rules: an event reaches
a function in the twin only if the deployed rule's pattern matches it."""

from __future__ import annotations

import pytest

from npa_workflow.embedded_aws.event_patterns import matches
from npa_workflow.embedded_aws.event_pump import execution_status_event, object_created_event
from npa_workflow.engine.ports import Execution
from npa_workflow.protocol.deployment import Deployment

EC2_EVENT = {
    "version": "0", "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2", "account": "111122223333", "time": "2017-12-22T18:43:48Z", "region": "us-west-1",
    "resources": ["arn:aws:ec2:us-west-1:123456789012:instance/i-1234567890abcdef0"],
    "detail": {"instance-id": "i-1234567890abcdef0", "state": "terminated"},
}


def test_the_guides_first_example_matches_on_the_named_fields_only():
    pattern = {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
               "detail": {"state": ["terminated"]}}
    assert matches(pattern, EC2_EVENT)
    assert not matches(pattern, {**EC2_EVENT, "detail": {"state": "running"}})
    # every field the pattern names must be in the event, with the same nesting
    assert not matches(pattern, {**EC2_EVENT, "detail": {}})
    assert not matches({"detail": {"state": {"name": ["terminated"]}}}, EC2_EVENT)


def test_values_of_a_field_are_ored_and_fields_anded():
    assert matches({"source": ["aws.ec2", "aws.fargate"]}, EC2_EVENT)
    assert matches({"source": ["aws.fargate", "aws.ec2"], "region": ["us-west-1"]}, EC2_EVENT)
    assert not matches({"source": ["aws.ec2"], "region": ["us-east-1"]}, EC2_EVENT)


def test_an_array_in_the_event_matches_when_the_intersection_is_not_empty():
    # The guide's example: the pattern's first item equals the event's second.
    pattern = {"resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f",
                             "arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f",
                             "arn:aws:ec2:us-east-1:444455556666:instance/i-b188560f"]}
    event = {"resources": ["arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:eb56d16b-bbf0-401d-b893-"
                           "d5978ed4a025:autoScalingGroupName/ASGTerminate",
                           "arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f"]}
    assert matches(pattern, event)
    assert not matches(pattern, {"resources": [event["resources"][0]]})


def test_prefix_suffix_and_ignore_case():
    assert matches({"time": [{"prefix": "2017-12-22"}]}, EC2_EVENT)
    assert not matches({"time": [{"prefix": "2017-10-02"}]}, EC2_EVENT)
    assert matches({"FileName": [{"suffix": ".png"}]}, {"FileName": "mypic.png"})
    assert not matches({"FileName": [{"suffix": ".png"}]}, {"FileName": "mypic.PNG"})
    assert matches({"FileName": [{"suffix": {"equals-ignore-case": ".png"}}]}, {"FileName": "mypic.PNG"})
    assert matches({"service": [{"prefix": {"equals-ignore-case": "EventB"}}]}, {"service": "eventbridge"})
    assert matches({"name": [{"equals-ignore-case": "alice"}]}, {"name": "ALICE"})


def test_anything_but_needs_the_field_and_excludes_values_lists_and_prefixes():
    assert matches({"detail": {"state": [{"anything-but": "initializing"}]}}, EC2_EVENT)
    assert not matches({"detail": {"state": [{"anything-but": "terminated"}]}}, EC2_EVENT)
    assert not matches({"detail": {"state": [{"anything-but": ["stopped", "terminated"]}]}}, EC2_EVENT)
    assert matches({"detail": {"x-limit": [{"anything-but": 123}]}}, {"detail": {"x-limit": 456}})
    assert not matches({"detail": {"x-limit": [{"anything-but": 123}]}}, {"detail": {"x-limit": 123}})
    assert not matches({"detail": {"state": [{"anything-but": {"prefix": "term"}}]}}, EC2_EVENT)
    assert matches({"FileName": [{"anything-but": {"suffix": ".png"}}]}, {"FileName": "a.txt"})
    # The guide's wildcard example: a path that includes /lib/
    pattern = {"FilePath": [{"anything-but": {"wildcard": "*/lib/*"}}]}
    assert matches(pattern, {"FilePath": "/usr/bin/python"})
    assert not matches(pattern, {"FilePath": "/usr/lib/python3"})
    assert not matches(pattern, {"OtherField": "x"})  # absent: anything-but does not match


def test_wildcard_stars_are_any_run_and_an_escaped_star_is_literal():
    pattern = {"EventBusArn": [{"wildcard": "arn:aws:events:us-east-1:*:event-bus/*"}]}
    assert matches(pattern, {"EventBusArn": "arn:aws:events:us-east-1:123456789012:event-bus/default"})
    assert not matches(pattern, {"EventBusArn": "arn:aws:events:us-west-2:123456789012:event-bus/default"})
    assert matches({"k": [{"wildcard": "a*"}]}, {"k": "a"})  # a run of none
    assert matches({"k": [{"wildcard": "a\\*b"}]}, {"k": "a*b"})
    assert not matches({"k": [{"wildcard": "a\\*b"}]}, {"k": "axb"})


def test_exists_numeric_and_or():
    assert matches({"detail": {"c-count": [{"exists": False}]}}, EC2_EVENT)
    assert not matches({"detail": {"state": [{"exists": False}]}}, EC2_EVENT)
    assert matches({"detail": {"state": [{"exists": True}]}}, EC2_EVENT)
    in_range = {"detail": {"c-count": [{"numeric": [">", 0, "<=", 5]}]}}
    assert matches(in_range, {"detail": {"c-count": 5}})
    assert not matches(in_range, {"detail": {"c-count": 0}})
    assert not matches(in_range, {"detail": {"c-count": "5"}})  # a string is not a number
    either = {"detail": {"$or": [{"c-count": [{"numeric": [">", 0]}]}, {"state": ["running"]}]}}
    assert matches(either, {"detail": {"c-count": 1}})
    assert matches(either, {"detail": {"state": "running"}})
    assert not matches(either, EC2_EVENT)


def test_an_operator_it_does_not_emulate_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="cidr"):
        matches({"ip": [{"cidr": "10.0.0.0/24"}]}, {"ip": "10.0.0.1"})


# ------------------------------------------------------------------------------------------- the stack's rules
PREFIX = "arn:aws:states:us-east-1:123456789012:stateMachine:"


def _rules(deployment: Deployment) -> dict[str, dict]:
    return {r.id: r.pattern for r in deployment.event_rules("engine-bucket", PREFIX + deployment.machine_prefix)}


def _object(bucket: str, key: str) -> dict:
    return object_created_event(bucket, key, etag="e", size=1, sequencer="1")


def test_the_inbox_rule_takes_only_inbox_keys_of_the_engine_bucket():
    rules = _rules(Deployment())
    assert matches(rules["InboxRule"], _object("engine-bucket", "inbox/a.yaml"))
    assert not matches(rules["InboxRule"], _object("engine-bucket", "runs/a/out.json"))
    assert not matches(rules["InboxRule"], _object("team-data", "inbox/a.yaml"))
    assert matches(rules["TriggerRule"], _object("engine-bucket", "runs/a/out.json"))
    assert not matches(rules["TriggerRule"], _object("team-data", "x"))
    assert "DataTriggerRule" not in rules


def test_a_data_bucket_reaches_the_trigger_only_when_it_is_a_trigger_event_bucket():
    rules = _rules(Deployment(trigger_event_buckets=("team-data",)))
    assert matches(rules["DataTriggerRule"], _object("team-data", "x"))
    assert not matches(rules["DataTriggerRule"], _object("team-models", "x"))


def _execution(arn: str, machine: str, status: str) -> dict:
    return execution_status_event(Execution(arn=arn, status=status, machine_arn=machine, name=arn.rsplit(":", 1)[-1]))


def test_the_reap_rule_takes_this_stacks_ended_executions_but_not_map_children_or_other_stacks():
    reap = _rules(Deployment())["ReapRule"]
    machine = PREFIX + "NpaWorkflow_train"
    execution = "arn:aws:states:us-east-1:123456789012:execution:NpaWorkflow_train:run-1"
    for status in ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT"):
        assert matches(reap, _execution(execution, machine, status))
    assert not matches(reap, _execution(execution, machine, "RUNNING"))
    child = "arn:aws:states:us-east-1:123456789012:execution:NpaWorkflow_train/Map:child-1"
    assert not matches(reap, _execution(child, machine, "FAILED"))
    other = PREFIX + "Other_train"
    assert not matches(reap, _execution(execution.replace("NpaWorkflow", "Other"), other, "FAILED"))
