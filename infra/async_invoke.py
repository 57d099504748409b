"""What happens to an event a function was handed asynchronously and failed on.

AWS fact: Lambda retries a failed asynchronous invocation twice (by default), then discards the event unless the
function has an on-failure destination or a dead-letter queue (Lambda, "Asynchronous invocation"). EventBridge
invokes functions asynchronously: the dead-letter queue of a rule's target (`events.py`) only keeps events
EventBridge could not *deliver*; an event delivered to a function that then raised three times was lost.

So every function invoked asynchronously — inbox, trigger, reap (EventBridge rules) and watch (schedule) — gets an
`EventInvokeConfig` with an SQS on-failure destination, `failed_invocations`: the destination record keeps the
event, the error and the function, so an operator can replay a lost upload or reap (the alarm on the queue's depth
is in `monitoring.py`). cfn-lint-serverless ES1007 and checkov CKV_AWS_116 check for it.

The watch tick is not retried (`WATCH_RETRY_ATTEMPTS`): the next tick does the same work; its failures still land
in the queue to be seen. The functions a state machine invokes (launch, decide, cleanup) are invoked synchronously
by Step Functions, whose Retry/Catch handle their errors: they need no destination.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_sqs as sqs
from constructs import Construct

ASYNC_FUNCTIONS = ("inbox", "trigger", "reap", "watch")
RETRY_ATTEMPTS = 2  # Lambda's default for asynchronous invocations, stated so a template reader sees it
WATCH_RETRY_ATTEMPTS = 0
MAX_EVENT_AGE = Duration.hours(6)  # Lambda's maximum
QUEUE_RETENTION = Duration.days(14)  # SQS's maximum: time for an operator to look


class AsyncFailures(Construct):
    """`failed_invocations` (the queue) and `configs[function name]` (its EventInvokeConfig)."""

    def __init__(self, scope: Construct, construct_id: str, *, functions: dict[str, lambda_.IFunction]) -> None:
        super().__init__(scope, construct_id)
        self.failed_invocations = sqs.Queue(
            self,
            "FailedInvocations",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=QUEUE_RETENTION,
        )
        self.configs: dict[str, lambda_.EventInvokeConfig] = {}
        for name in ASYNC_FUNCTIONS:
            self.configs[name] = lambda_.EventInvokeConfig(
                self,
                f"{name.title()}AsyncInvoke",
                function=functions[name],
                on_failure=destinations.SqsDestination(self.failed_invocations),
                retry_attempts=WATCH_RETRY_ATTEMPTS if name == "watch" else RETRY_ATTEMPTS,
                max_event_age=MAX_EVENT_AGE,
            )
