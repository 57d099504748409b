"""Simulated work and injected failures, so runtime behaviour can be exercised with the examples.

``--sleep SECONDS`` pretends the step takes time (concurrency, timeouts, cancellation).
``--fail-if-attempt-below N`` fails attempts 1..N-1 and lets attempt N succeed, reading the
attempt number from ``NPA_WORKFLOW_ATTEMPT`` (1 when unset), to exercise retries.
``--fail MESSAGE`` always fails with that message.
"""

from __future__ import annotations

import argparse
import os
import time

ATTEMPT_ENV = "NPA_WORKFLOW_ATTEMPT"


class InjectedFailure(Exception):
    """The step was asked to fail; the message says why."""


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seconds must be >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an attempt number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"attempt numbers start at 1, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("simulation")
    group.add_argument(
        "--sleep",
        type=_non_negative_float,
        default=0.0,
        metavar="SECONDS",
        help="sleep this long before doing the work",
    )
    group.add_argument(
        "--fail-if-attempt-below",
        type=_positive_int,
        default=None,
        metavar="N",
        help=f"fail while ${ATTEMPT_ENV} < N (attempt N and later succeed)",
    )
    group.add_argument(
        "--fail", default=None, metavar="MESSAGE", help="fail with this message instead of doing the work"
    )


def current_attempt() -> int:
    raw = os.environ.get(ATTEMPT_ENV, "").strip()
    if not raw:
        return 1
    try:
        attempt = int(raw)
    except ValueError:
        raise InjectedFailure(f"{ATTEMPT_ENV}={raw!r} is not an attempt number") from None
    if attempt < 1:
        raise InjectedFailure(f"{ATTEMPT_ENV}={raw!r} must be >= 1")
    return attempt


def apply(args: argparse.Namespace) -> None:
    """Sleep, then raise ``InjectedFailure`` if this attempt was asked to fail."""
    if args.sleep:
        time.sleep(args.sleep)
    if args.fail:
        raise InjectedFailure(f"failing as requested: {args.fail}")
    if args.fail_if_attempt_below is not None:
        attempt = current_attempt()
        if attempt < args.fail_if_attempt_below:
            raise InjectedFailure(
                f"failing attempt {attempt} on purpose; attempt {args.fail_if_attempt_below} "
                "and later succeed (--fail-if-attempt-below)"
            )
