"""The handlers' CloudWatch metrics (Powertools EMF), switched off as a whole by POWERTOOLS_METRICS_DISABLED.

Why not `Metrics.add_metric` directly: Powertools 3.x honours the switch only when it flushes. A disabled
`Metrics` keeps every value in memory (its flush clears only what it printed), and on the 100th value of one
metric it prints the batch anyway. In the local stack the handlers run in-process for hours (serve) and the
process's stdout is the user's (`run --json`): after 100 watch ticks an EMF line would land in the report.
"""

from __future__ import annotations

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled


def count(metrics: Metrics, name: str, value: float) -> None:
    """Add one Count value to `metrics` (flushed by its `log_metrics`), or nothing when metrics are off."""
    if is_metrics_disabled():
        return
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
