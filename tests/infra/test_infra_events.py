"""EventBridge rules: inbox, trigger, reap, the watch schedule; alarms; outputs."""

from __future__ import annotations

import json
from typing import Any

from infra_support import Synth


def _rule(synth: Synth, rule: Any) -> dict[str, Any]:
    return synth.template["Resources"][synth.logical_id(rule)]["Properties"]


def _target_function(synth: Synth, props: dict[str, Any]) -> str:
    (target,) = props["Targets"]
    return target["Arn"]["Fn::GetAtt"][0]


def _fn(synth: Synth, name: str) -> str:
    return synth.logical_id(synth.stack.engine.functions[name])


def test_inbox_rule_sends_object_created_under_inbox_to_the_inbox(default_synth: Synth) -> None:
    props = _rule(default_synth, default_synth.stack.events.inbox_rule)
    bucket = default_synth.logical_id(default_synth.stack.storage.bucket)
    assert props["EventPattern"] == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [{"Ref": bucket}]}, "object": {"key": [{"prefix": "inbox/"}]}},
    }
    assert _target_function(default_synth, props) == _fn(default_synth, "inbox")
    (target,) = props["Targets"]
    assert target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0] == default_synth.logical_id(
        default_synth.stack.events.dead_letters
    )
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 8


def test_trigger_rule_sends_every_object_created_in_the_bucket_to_trigger(default_synth: Synth) -> None:
    props = _rule(default_synth, default_synth.stack.events.trigger_rule)
    bucket = default_synth.logical_id(default_synth.stack.storage.bucket)
    assert props["EventPattern"] == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": [{"Ref": bucket}]}},
    }
    assert _target_function(default_synth, props) == _fn(default_synth, "trigger")


def _arn_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    parts = value["Fn::Join"][1]
    return "".join(p if isinstance(p, str) else "<" + next(iter(p.values())).split("::")[-1] + ">" for p in parts)


def test_reap_rule_takes_failed_aborted_timed_out_executions_of_this_stacks_machines(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    props = _rule(default_synth, default_synth.stack.events.reap_rule)
    pattern = props["EventPattern"]
    assert pattern["source"] == ["aws.states"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert pattern["detail"]["status"] == ["FAILED", "ABORTED", "TIMED_OUT", "SUCCEEDED"]
    # One prefix for every machine of the stack (deployed and ad hoc): the pattern does not grow with the catalog.
    prefix = "arn:<Partition>:states:<Region>:<AccountId>:stateMachine:NpaWorkflow_"
    for synth in (default_synth, ad_hoc_synth):
        machines = _rule(synth, synth.stack.events.reap_rule)["EventPattern"]["detail"]["stateMachineArn"]
        assert [_arn_text(m["prefix"]) for m in machines] == [prefix]
        # A Distributed Map's children (`execution:<machine>/<label>:<id>`) are their parent's business.
        executions = _rule(synth, synth.stack.events.reap_rule)["EventPattern"]["detail"]["executionArn"]
        assert executions == [{"anything-but": {"wildcard": "*/*"}}]
    for name in default_synth.stack.workflows.names.values():
        assert name.startswith("NpaWorkflow_")
    assert _target_function(default_synth, props) == _fn(default_synth, "reap")


def test_watch_runs_on_a_schedule_set_by_context(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    props = _rule(default_synth, default_synth.stack.events.watch_rule)
    assert props["ScheduleExpression"] == "rate(1 minute)"
    assert _target_function(default_synth, props) == _fn(default_synth, "watch")
    (target,) = props["Targets"]
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert _rule(ad_hoc_synth, ad_hoc_synth.stack.events.watch_rule)["ScheduleExpression"] == "rate(5 minutes)"


def test_events_may_invoke_only_their_own_function_from_their_own_rule(default_synth: Synth) -> None:
    permissions = default_synth.resources("AWS::Lambda::Permission")
    events = default_synth.stack.events
    pairs = {
        (p["Properties"]["FunctionName"]["Fn::GetAtt"][0], p["Properties"]["SourceArn"]["Fn::GetAtt"][0])
        for p in permissions.values()
    }
    assert pairs == {
        (_fn(default_synth, "inbox"), default_synth.logical_id(events.inbox_rule)),
        (_fn(default_synth, "trigger"), default_synth.logical_id(events.trigger_rule)),
        (_fn(default_synth, "reap"), default_synth.logical_id(events.reap_rule)),
        (_fn(default_synth, "watch"), default_synth.logical_id(events.watch_rule)),
    }
    assert all(p["Properties"]["Principal"] == "events.amazonaws.com" for p in permissions.values())


def test_alarms_on_failed_executions_handler_errors_and_undelivered_events(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    alarms = default_synth.resources("AWS::CloudWatch::Alarm")
    stack = default_synth.stack
    assert len(alarms) == len(stack.workflows.machines) + len(stack.engine.functions) + 2
    errors = [a["Properties"] for a in alarms.values() if a["Properties"].get("MetricName") == "Errors"]
    assert {a["Dimensions"][0]["Value"]["Ref"] for a in errors} == {
        default_synth.logical_id(fn) for fn in stack.engine.functions.values()
    }
    executions = [a["Properties"] for a in alarms.values() if "Metrics" in a["Properties"]]
    assert len(executions) == len(stack.workflows.machines)
    for alarm in executions:
        names = {m["MetricStat"]["Metric"]["MetricName"] for m in alarm["Metrics"] if "MetricStat" in m}
        assert names == {"ExecutionsFailed", "ExecutionsTimedOut"}
        assert alarm["Threshold"] == 1
    assert all("AlarmActions" not in a["Properties"] for a in alarms.values())
    with_topic = ad_hoc_synth.resources("AWS::CloudWatch::Alarm")
    assert all(
        a["Properties"]["AlarmActions"] == ["arn:aws:sns:eu-west-1:123456789012:oncall"] for a in with_topic.values()
    )


def test_outputs_bucket_inbox_table_and_a_console_url_per_machine(default_synth: Synth) -> None:
    outputs = default_synth.template["Outputs"]
    bucket = default_synth.logical_id(default_synth.stack.storage.bucket)
    assert outputs["BucketName"]["Value"] == {"Ref": bucket}
    assert outputs["InboxUri"]["Value"] == {"Fn::Join": ["", ["s3://", {"Ref": bucket}, "/inbox/"]]}
    assert outputs["LedgerTableName"]["Value"] == {"Ref": default_synth.logical_id(default_synth.stack.storage.table)}
    for machine in default_synth.stack.workflows.machines.values():
        url = outputs[f"{machine.node.id}ConsoleUrl"]["Value"]["Fn::Join"][1]
        text = "".join(p if isinstance(p, str) else "<" + next(iter(p.values())) + ">" for p in url)
        assert text == (
            "https://<AWS::Region>.console.aws.amazon.com/states/home?region=<AWS::Region>"
            f"#/statemachines/view/<{default_synth.logical_id(machine)}>"
        )


def test_every_async_invoked_function_keeps_the_events_it_failed_on(default_synth: Synth) -> None:
    """Issue 11 item 13: Lambda retries an asynchronous invocation twice, then drops the event unless the function
    has an on-failure destination. Every function EventBridge invokes (an async principal) has one: the queue."""
    stack = default_synth.stack
    queue = default_synth.logical_id(stack.async_failures.failed_invocations)
    configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in default_synth.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    invoked_async = {
        p["Properties"]["FunctionName"]["Fn::GetAtt"][0]
        for p in default_synth.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] in ("events.amazonaws.com", "s3.amazonaws.com", "sns.amazonaws.com")
    }
    assert invoked_async == {_fn(default_synth, n) for n in ("inbox", "trigger", "reap", "watch")}
    assert set(configs) == invoked_async
    for fn, config in configs.items():
        assert config["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue, "Arn"]}
        assert config["MaximumRetryAttempts"] == (0 if fn == _fn(default_synth, "watch") else 2)
    # Each of them may send to the queue (the destination's grant), and an alarm watches its depth.
    for name in ("inbox", "trigger", "reap", "watch"):
        role = default_synth.logical_id(stack.engine.roles[name])
        sends = [
            st for p in default_synth.resources("AWS::IAM::Policy").values()
            if {"Ref": role} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"] if "sqs:SendMessage" in st["Action"]
        ]
        assert [st["Resource"] for st in sends] == [{"Fn::GetAtt": [queue, "Arn"]}], name
    alarm = default_synth.template["Resources"][default_synth.logical_id(stack.alarms.failed_invocation_alarm)]
    assert alarm["Properties"]["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue, "QueueName"]}}]
    assert alarm["Properties"]["Threshold"] == 1


def test_a_data_bucket_named_in_context_sends_its_object_created_events_to_trigger(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    """Issue 11 item 17: a trigger waiting on a data bucket completes on the bucket's event, not at the next tick."""
    assert default_synth.stack.events.data_trigger_rule is None
    rule = ad_hoc_synth.stack.events.data_trigger_rule
    props = _rule(ad_hoc_synth, rule)
    assert props["EventPattern"] == {
        "source": ["aws.s3"], "detail-type": ["Object Created"], "detail": {"bucket": {"name": ["team-data"]}}
    }
    assert _target_function(ad_hoc_synth, props) == _fn(ad_hoc_synth, "trigger")
    # The trigger function may list that bucket (it counts the objects under the watched prefix).
    trigger_role = ad_hoc_synth.logical_id(ad_hoc_synth.stack.engine.roles["trigger"])
    listed = [
        st["Resource"] for p in ad_hoc_synth.resources("AWS::IAM::Policy").values()
        if {"Ref": trigger_role} in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"] if st["Action"] == "s3:ListBucket"
    ]
    assert any("team-data" in json.dumps(r) for r in listed)
