"""Publish a small JSON report that embeds one source artifact under a title.

Reads ``--source`` (must exist and be JSON) and writes
``{"title", "run_id", "state", "source_uri", "source": <the source document>}`` to ``--out``.
``run_id`` and ``state`` come from ``NPA_WORKFLOW_RUN_ID`` / ``NPA_WORKFLOW_STATE`` when set.

Example:
    python steps/publish.py --title "Sweep winner" --source s3://bucket/run/best.json \
        --out s3://bucket/run/report.json
"""

from __future__ import annotations

import argparse
import os
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Publish a JSON report around one artifact.")
    parser.add_argument("--title", required=True, help="report title")
    parser.add_argument("--source", required=True, help="s3:// URI of the JSON artifact to report on")
    parser.add_argument("--out", required=True, help="s3:// URI of the report JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.title.strip():
        parser.error("--title must not be blank")
    try:
        work_simulation.apply(args)
        report = {
            "run_id": os.environ.get("NPA_WORKFLOW_RUN_ID", ""),
            "source": s3io.read_json(args.source),
            "source_uri": args.source,
            "state": os.environ.get("NPA_WORKFLOW_STATE", ""),
            "title": args.title.strip(),
        }
        s3io.write_json(args.out, report)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"published {report['title']!r} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
