"""A generic step for exercising the runtime: optionally sleep or fail, then write a marker.

The marker is ``{"state", "run_id", "attempt", "message"}`` taken from ``NPA_WORKFLOW_STATE``,
``NPA_WORKFLOW_RUN_ID`` and ``NPA_WORKFLOW_ATTEMPT``. Use ``--fail-if-attempt-below N`` to
fail the first N-1 attempts (retry then success) and ``--fail MESSAGE`` to always fail.

Example:
    NPA_WORKFLOW_ATTEMPT=2 python steps/step.py --out s3://bucket/run/done.json \
        --fail-if-attempt-below 2
"""

from __future__ import annotations

import argparse
import os
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Write a marker after optional sleep/failure.")
    parser.add_argument("--out", required=True, help="s3:// URI of the marker JSON to write")
    parser.add_argument("--message", default="done", help="text stored in the marker")
    work_simulation.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        work_simulation.apply(args)
        marker = {
            "attempt": work_simulation.current_attempt(),
            "message": args.message,
            "run_id": os.environ.get("NPA_WORKFLOW_RUN_ID", ""),
            "state": os.environ.get("NPA_WORKFLOW_STATE", ""),
        }
        s3io.write_json(args.out, marker)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"attempt {marker['attempt']}: wrote marker to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
