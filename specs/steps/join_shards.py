"""Barrier check for a fan-out: verify that every shard result exists, then write a join marker.

Every ``--shard`` URI (repeatable, or comma-separated) must hold a shard result written by
``shard.py``. If any is missing or unreadable the step fails and names all of them; otherwise
it writes ``{"shards": [...], "records": <total>, "positives": <total>}`` to ``--out``.

Example:
    python steps/join_shards.py --shards s3://b/r/shards/shard-0.json,s3://b/r/shards/shard-1.json \
        --out s3://b/r/join.json
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Verify every shard result, then write a join marker.")
    parser.add_argument(
        "--shards",
        action="append",
        required=True,
        metavar="URI[,URI...]",
        help="s3:// URIs of the shard results (repeatable, or comma-separated)",
    )
    parser.add_argument("--out", required=True, help="s3:// URI of the join marker JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def _shard_summary(uri: str) -> dict:
    result = s3io.read_json_object(uri)
    records = result.get("records")
    if isinstance(records, bool) or not isinstance(records, int):
        raise s3io.ArtifactError(f"{uri} is not a shard result (no integer 'records')")
    return {"uri": uri, "records": records, "positives": int(result.get("positives", 0))}


def join(shard_uris: list[str]) -> dict:
    summaries, problems = [], []
    for uri in shard_uris:
        try:
            summaries.append(_shard_summary(uri))
        except s3io.ArtifactError as exc:
            problems.append(str(exc))
    if problems:
        raise s3io.ArtifactError(
            f"{len(problems)} of {len(shard_uris)} shard outputs are missing or unusable, "
            f"so the join cannot proceed: {'; '.join(problems)}"
        )
    return {
        "positives": sum(item["positives"] for item in summaries),
        "records": sum(item["records"] for item in summaries),
        "shards": summaries,
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    shard_uris = s3io.split_uri_list(args.shards)
    if not shard_uris:
        parser.error("--shards names no URIs")
    try:
        work_simulation.apply(args)
        marker = join(shard_uris)
        s3io.write_json(args.out, marker)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"joined {len(shard_uris)} shards ({marker['records']} records) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
