"""What an AWS error was, for a reader that carries on without it (a watcher keeps its last view and says why).

The throttling codes are the ones botocore's standard retry mode treats as throttles (its
`ThrottledRetryableChecker`): DynamoDB answers `ProvisionedThroughputExceededException` / `ThrottlingException`
/ `RequestLimitExceeded`, Step Functions `ThrottlingException`, S3 `SlowDown`. By the time one reaches us the
SDK's own retries are spent.
"""

from __future__ import annotations

THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown",
})


def error_code(exc: BaseException) -> str:
    """The service's error code of a botocore ClientError; "" for anything else."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code") or "")


def throttled(exc: BaseException) -> str:
    """The throttling code when `exc` is AWS refusing for rate (429 included), else ""."""
    code = error_code(exc)
    if code in THROTTLING_CODES:
        return code
    response = getattr(exc, "response", None)
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode") if isinstance(response, dict) else None
    if status == 429:
        return code or "429"
    return ""


def unread(what: str, exc: BaseException) -> str:
    """One line saying why `what` (an API call) was not read: throttled, or the error's code."""
    code = throttled(exc)
    if code:
        return f"{what} was throttled ({code}) after the SDK's retries"
    return f"{what} failed: {error_code(exc) or type(exc).__name__}"
