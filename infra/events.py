"""EventBridge: what starts each function.

- S3 "Object Created" under `inbox/` → inbox (a spec was dropped: validate it and start its run);
- S3 "Object Created" anywhere in the bucket → trigger (completes waiting trigger watches at once);
- S3 "Object Created" in the data buckets listed in context `triggerEventBuckets` → trigger, so a trigger waiting on
  a data bucket completes when its object lands, not at the next watch tick (the bucket's owner must turn on its
  EventBridge notifications: `aws s3api put-bucket-notification-configuration --bucket <name>
  --notification-configuration '{"EventBridgeConfiguration": {}}'`; S3 sends events of buckets in this account and
  region to the default bus);
- "Step Functions Execution Status Change" FAILED / ABORTED / TIMED_OUT of this stack's machines → reap
  (cancels the run's jobs), and SUCCEEDED → reap (records the run's end in the ledger). The machines are matched
  by their ARN prefix `...:stateMachine:<stack>_` (one pattern entry whatever the number of specs: EventBridge
  limits an event pattern to 2,048 characters, about 24 machine ARNs listed one by one); a Distributed Map's child
  executions (`execution:<machine>/<label>:<id>`) are left out with an anything-but wildcard on the execution ARN;
- a schedule → watch, every `watchIntervalMinutes` minutes.

Every target has a dead-letter queue (an event EventBridge could not deliver); each function invoked
asynchronously also has an on-failure destination for events it was handed but failed on (`async_invoke.py`).

The watch interval trades cost for latency. A wave's job ends on SkyPilot's side; its task token is completed
at the next watch tick, so a wave (and the run) waits up to one interval, on average half, after its job
ended. Each tick is one invocation and one SkyPilot queue call for all active waves, whatever their number:
at 1 minute that is 43,200 invocations a month (inside Lambda's free tier, a few cents beyond it); at
5 minutes, 8,640 — but every wave then finishes up to 5 minutes late. Heartbeats ride on the same tick, so
the stack compiles `HeartbeatSeconds` to at least three intervals (never below the compiler's 300 s).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from npa_workflow.protocol.deployment import ENDED_STATUSES, Deployment  # noqa: F401 - ENDED_STATUSES re-exported

# EventBridge retries a failed delivery for this long before the event goes to the dead-letter queue.
TARGET_MAX_EVENT_AGE = Duration.hours(2)
TARGET_RETRY_ATTEMPTS = 8


class EngineEvents(Construct):
    """The four rules (`inbox_rule`, `trigger_rule`, `reap_rule`, `watch_rule`) and `dead_letters`, the queue
    that keeps events EventBridge could not deliver to a function."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        functions: dict[str, lambda_.IFunction],
        machine_arn_prefix: str,
        deployment: Deployment,
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = sqs.Queue(
            self,
            "DeadLetters",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
        )

        def target(name: str) -> targets.LambdaFunction:
            return targets.LambdaFunction(
                functions[name],
                dead_letter_queue=self.dead_letters,
                retry_attempts=TARGET_RETRY_ATTEMPTS,
                max_event_age=TARGET_MAX_EVENT_AGE,
            )

        # The rules' patterns are the deployment model's (the twin delivers an event only when it matches them).
        self.rules: dict[str, events.Rule] = {}
        for rule in deployment.event_rules(bucket.bucket_name, machine_arn_prefix):
            pattern = rule.pattern
            self.rules[rule.id] = events.Rule(
                self,
                rule.id,
                description=rule.description,
                event_pattern=events.EventPattern(
                    source=pattern["source"], detail_type=pattern["detail-type"], detail=pattern["detail"]
                ),
                targets=[target(rule.target)],
            )
        self.inbox_rule = self.rules["InboxRule"]
        self.trigger_rule = self.rules["TriggerRule"]
        self.data_trigger_rule: events.Rule | None = self.rules.get("DataTriggerRule")
        self.reap_rule = self.rules["ReapRule"]
        watch_interval_minutes = deployment.watch_interval_seconds // 60
        self.watch_rule = events.Rule(
            self,
            "WatchSchedule",
            description=f"Every {watch_interval_minutes} min: complete or heartbeat the tokens of active waves",
            schedule=events.Schedule.rate(Duration.minutes(watch_interval_minutes)),
            targets=[
                targets.LambdaFunction(
                    functions["watch"],
                    # A missed tick is made up by the next one: never queue stale ticks (but count them).
                    dead_letter_queue=self.dead_letters,
                    retry_attempts=0,
                    max_event_age=Duration.minutes(watch_interval_minutes),
                )
            ],
        )
