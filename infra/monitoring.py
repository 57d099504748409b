"""Alarms: failed (or timed-out) executions per machine, errors per function, undeliverable events, events a
function failed on (its asynchronous invocations' on-failure queue).

Alarms go to an existing SNS topic when the context value `alarmTopicArn` names one; otherwise they are
visible in the CloudWatch console (Alarms) and notify nobody.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

PERIOD = Duration.minutes(5)


class EngineAlarms(Construct):
    """`execution_alarms[spec name]`, `error_alarms[function name]`, `dead_letter_alarm`, `failed_invocation_alarm`."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        machines: dict[str, sfn.StateMachine],
        functions: dict[str, lambda_.IFunction],
        dead_letters: sqs.IQueue,
        failed_invocations: sqs.IQueue,
        alarm_topic_arn: str = "",
    ) -> None:
        super().__init__(scope, construct_id)
        action = (
            cw_actions.SnsAction(sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn))
            if alarm_topic_arn
            else None
        )

        def arm(alarm: cloudwatch.Alarm) -> cloudwatch.Alarm:
            if action is not None:
                alarm.add_alarm_action(action)
            return alarm

        self.execution_alarms: dict[str, cloudwatch.Alarm] = {}
        for spec_name, machine in machines.items():
            construct_name = machine.node.id
            failed = cloudwatch.MathExpression(
                expression="FILL(failed, 0) + FILL(timedOut, 0)",
                using_metrics={
                    "failed": machine.metric_failed(period=PERIOD, statistic="Sum"),
                    "timedOut": machine.metric_timed_out(period=PERIOD, statistic="Sum"),
                },
                label="failed + timed-out executions",
                period=PERIOD,
            )
            self.execution_alarms[spec_name] = arm(
                failed.create_alarm(
                    self,
                    f"{construct_name}ExecutionsFailed",
                    alarm_description=f"An execution of spec {spec_name} failed or timed out (see its console page)",
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
            )

        self.error_alarms: dict[str, cloudwatch.Alarm] = {}
        for name, fn in functions.items():
            self.error_alarms[name] = arm(
                fn.metric_errors(period=PERIOD, statistic="Sum").create_alarm(
                    self,
                    f"{name.title()}Errors",
                    alarm_description=f"The {name} function raised (see its log group)",
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
            )

        self.dead_letter_alarm = arm(
            dead_letters.metric_approximate_number_of_messages_visible(period=PERIOD, statistic="Maximum").create_alarm(
                self,
                "UndeliveredEvents",
                alarm_description="EventBridge could not deliver events to a function (see the dead-letter queue)",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
        self.failed_invocation_alarm = arm(
            failed_invocations.metric_approximate_number_of_messages_visible(
                period=PERIOD, statistic="Maximum"
            ).create_alarm(
                self,
                "FailedInvocations",
                alarm_description="A function failed on an event after Lambda's retries: an upload, reap or trigger "
                "was not done (the queue keeps the event and the error; replay it)",
                threshold=1,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        )
