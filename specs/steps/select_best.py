"""Barrier for a sweep: read every member's metrics, verify each exists, write the best one.

Every ``--metrics`` URI (repeatable, or comma-separated) must hold a metrics JSON with a
numeric ``score`` (written by ``fit.py``). If any is missing or unusable the step fails and
names all of them. The highest score wins; ties go to the member listed first. Writes
``{"best": {...}, "candidates": [...]}`` to ``--out``.

Example:
    python steps/select_best.py --metrics s3://b/r/lr-a/metrics.json \
        --metrics s3://b/r/lr-b/metrics.json --out s3://b/r/best.json
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Pick the sweep member with the highest score.")
    parser.add_argument(
        "--metrics",
        action="append",
        required=True,
        metavar="URI[,URI...]",
        help="s3:// URIs of member metrics (repeatable, or comma-separated)",
    )
    parser.add_argument("--out", required=True, help="s3:// URI of the selection JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def _candidate(uri: str) -> dict:
    metrics = s3io.read_json_object(uri)
    score = metrics.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise s3io.ArtifactError(f"{uri} has no numeric 'score' (found {score!r})")
    return {"uri": uri, "score": float(score), "learning_rate": metrics.get("learning_rate")}


def select(metrics_uris: list[str]) -> dict:
    candidates, problems = [], []
    for uri in metrics_uris:
        try:
            candidates.append(_candidate(uri))
        except s3io.ArtifactError as exc:
            problems.append(str(exc))
    if problems:
        raise s3io.ArtifactError(
            f"{len(problems)} of {len(metrics_uris)} member metrics are missing or unusable, "
            f"so no winner can be chosen: {'; '.join(problems)}"
        )
    best = max(candidates, key=lambda item: item["score"])  # max keeps the first of equal scores
    return {"best": best, "candidates": candidates}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    metrics_uris = s3io.split_uri_list(args.metrics)
    if not metrics_uris:
        parser.error("--metrics names no URIs")
    try:
        work_simulation.apply(args)
        selection = select(metrics_uris)
        s3io.write_json(args.out, selection)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    best = selection["best"]
    print(f"best of {len(metrics_uris)}: {best['uri']} (score {best['score']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
