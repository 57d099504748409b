"""EventBridge rules: inbox, trigger, reap, the watch schedule; alarms; outputs."""

from __future__ import annotations

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
    arns = sorted(_arn_text(a) for a in pattern["detail"]["stateMachineArn"])
    expected = sorted(
        f"arn:<Partition>:states:<Region>:<AccountId>:stateMachine:NpaWorkflow-{name}"
        for name in default_synth.stack.workflows.machines
    )
    assert arns == expected
    assert _target_function(default_synth, props) == _fn(default_synth, "reap")

    ad_hoc = _rule(ad_hoc_synth, ad_hoc_synth.stack.events.reap_rule)["EventPattern"]["detail"]["stateMachineArn"]
    prefixes = [a["prefix"] for a in ad_hoc if isinstance(a, dict) and "prefix" in a]
    assert [_arn_text(p) for p in prefixes] == [
        "arn:<Partition>:states:<Region>:<AccountId>:stateMachine:NpaWorkflow-adhoc-"
    ]


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
    assert len(alarms) == len(stack.workflows.machines) + len(stack.engine.functions) + 1
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
