"""Take stock of what landed under an S3 prefix and write a manifest of it.

Lists every object under ``--landing`` (all pages) and writes
``{"landing_uri", "count", "total_bytes", "objects": [{"uri", "size"}]}`` to ``--out``.
Fails if fewer than ``--min-objects`` objects are there.

Example:
    python steps/ingest.py --landing s3://bucket/run/landing/ --out s3://bucket/run/manifest.json
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Write a manifest of the objects under a prefix.")
    parser.add_argument("--landing", required=True, help="s3:// prefix to take stock of")
    parser.add_argument("--out", required=True, help="s3:// URI of the manifest JSON to write")
    parser.add_argument("--min-objects", type=int, default=1, help="fail below this many objects")
    work_simulation.add_arguments(parser)
    return parser


def build_manifest(landing_uri: str, min_objects: int) -> dict:
    bucket, _ = s3io.parse_s3_uri(landing_uri)
    objects = [{"uri": f"s3://{bucket}/{item['key']}", "size": item["size"]} for item in s3io.list_objects(landing_uri)]
    if len(objects) < min_objects:
        raise s3io.ArtifactError(f"found {len(objects)} object(s) under {landing_uri}, need at least {min_objects}")
    return {
        "count": len(objects),
        "landing_uri": landing_uri,
        "objects": objects,
        "total_bytes": sum(item["size"] for item in objects),
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.min_objects < 1:
        parser.error(f"--min-objects must be >= 1, got {args.min_objects}")
    try:
        work_simulation.apply(args)
        manifest = build_manifest(args.landing, args.min_objects)
        s3io.write_json(args.out, manifest)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"{manifest['count']} object(s), {manifest['total_bytes']} bytes under {args.landing} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
