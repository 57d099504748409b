"""The AWS prices `plan --cost` multiplies by: one table, each price with the page it was read from.

us-east-1 list prices, on demand, without free tiers, as the named AWS pricing pages gave them in 2025 (the same
table is in docs/operating.md, "What a run costs"). Check the pages before you quote a figure: AWS changes
prices (DynamoDB's on-demand throughput was halved on 2024-11-01). Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

REGION = "us-east-1"
AS_OF = "2025"


@dataclass(frozen=True)
class Price:
    key: str
    usd: float  # per `per` units
    per: int
    unit: str
    source: str  # the AWS pricing page, and the line of it

    @property
    def usd_each(self) -> float:
        return self.usd / self.per

    def text(self) -> str:
        per = "" if self.per == 1 else f"{self.per:,} "
        return f"${self.usd:g} per {per}{self.unit} ({self.source}, {REGION}, {AS_OF})"


PRICES: dict[str, Price] = {p.key: p for p in (
    Price("sfn_transition", 0.025, 1_000, "state transitions",
          "AWS Step Functions pricing: Standard workflows"),
    Price("lambda_request", 0.20, 1_000_000, "requests", "AWS Lambda pricing: requests"),
    Price("lambda_gb_second", 0.0000133334, 1, "GB-second", "AWS Lambda pricing: duration, Arm, first 7.5 billion "
          "GB-seconds"),
    Price("dynamodb_write", 0.625, 1_000_000, "write request units",
          "Amazon DynamoDB pricing: on-demand, Standard table class"),
    Price("dynamodb_read", 0.125, 1_000_000, "read request units",
          "Amazon DynamoDB pricing: on-demand, Standard table class"),
    Price("s3_put", 0.005, 1_000, "PUT, COPY, POST or LIST requests", "Amazon S3 pricing: requests, S3 Standard"),
    Price("s3_get", 0.0004, 1_000, "GET, HEAD and other requests", "Amazon S3 pricing: requests, S3 Standard"),
    Price("eventbridge_event", 1.00, 1_000_000, "events", "Amazon EventBridge pricing: event bus, AWS opt-in data "
          "events (S3 to EventBridge)"),
    Price("logs_ingestion_gb", 0.50, 1, "GB ingested", "Amazon CloudWatch pricing: logs, vended logs delivered to "
          "CloudWatch Logs, first 10 TB"),
    Price("alarm_month", 0.10, 1, "alarm-month", "Amazon CloudWatch pricing: standard-resolution alarm metric"),
    Price("secret_month", 0.40, 1, "secret-month", "AWS Secrets Manager pricing: per secret"),
    Price("secret_api_call", 0.05, 10_000, "API calls", "AWS Secrets Manager pricing: per API call"),
)}


def price(key: str) -> Price:
    return PRICES[key]
