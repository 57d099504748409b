"""Process one shard of the dataset: records ``index, index + count, index + 2*count, ...``.

Writes ``{"shard_index", "shard_count", "records", "positives", "ids"}`` for the shard.

Example:
    python steps/shard.py --data s3://bucket/run/dataset.json --shard-index 0 \
        --shard-count 3 --out s3://bucket/run/shards/shard-0.json --sleep 1
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Process one shard of the dataset.")
    parser.add_argument("--data", required=True, help="s3:// URI of the dataset written by prepare")
    parser.add_argument("--shard-index", type=int, required=True, help="0-based shard number")
    parser.add_argument("--shard-count", type=int, required=True, help="total number of shards")
    parser.add_argument("--out", required=True, help="s3:// URI of the shard result JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def process(data_uri: str, index: int, count: int) -> dict:
    dataset = s3io.read_json_object(data_uri)
    records = dataset.get("records")
    if not isinstance(records, list):
        raise s3io.ArtifactError(f"{data_uri} has no 'records' list")
    mine = records[index::count]
    return {
        "data_uri": data_uri,
        "ids": [record.get("id") for record in mine],
        "positives": sum(1 for record in mine if record.get("label") == 1),
        "records": len(mine),
        "shard_count": count,
        "shard_index": index,
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shard_count < 1:
        parser.error(f"--shard-count must be >= 1, got {args.shard_count}")
    if not 0 <= args.shard_index < args.shard_count:
        parser.error(f"--shard-index must be in 0..{args.shard_count - 1}, got {args.shard_index}")
    try:
        work_simulation.apply(args)
        result = process(args.data, args.shard_index, args.shard_count)
        s3io.write_json(args.out, result)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"shard {args.shard_index}/{args.shard_count}: {result['records']} records -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
