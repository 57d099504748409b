"""Evaluate training metrics and write a decision artifact ``{"decision": ...}``.

``--decision`` is either a literal value written as-is (``promote``, ``promote_checkpoint``,
``loop_back``, ``loop_back_to_inner_loop``; anything else is written with a warning and will
match no predicate) or ``auto``: ``promote_checkpoint`` when the metrics' score is at least
``--threshold``, else ``loop_back``.

``--malformed KIND`` writes a deliberately broken artifact instead (the step itself succeeds,
so the engine's decision reader has to catch it):
  not-json          the body is plain text
  not-object        the body is a JSON list
  missing-decision  a JSON object with none of the keys decision / last_decision / action

Example:
    python steps/gate.py --metrics s3://bucket/run/metrics.json --decision auto \
        --threshold 0.8 --out s3://bucket/run/decision.json
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation

KNOWN_DECISIONS = ("promote", "promote_checkpoint", "loop_back", "loop_back_to_inner_loop")
MALFORMED_KINDS = ("not-json", "not-object", "missing-decision")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Write a gate decision artifact.")
    parser.add_argument("--metrics", required=True, help="s3:// URI of the metrics JSON to judge")
    parser.add_argument("--decision", required=True, help="'auto' or a literal decision value to write")
    parser.add_argument(
        "--threshold", type=float, default=None, help="minimum score to promote (needed with --decision auto)"
    )
    parser.add_argument("--out", required=True, help="s3:// URI of the decision JSON to write")
    parser.add_argument(
        "--malformed",
        choices=MALFORMED_KINDS,
        default=None,
        help="write a deliberately malformed artifact (negative tests)",
    )
    work_simulation.add_arguments(parser)
    return parser


def decide(requested: str, score: float, threshold: float | None) -> str:
    """The value to write: ``requested`` itself, or the threshold verdict for ``auto``."""
    if requested != "auto":
        return requested
    if threshold is None:
        raise ValueError("--decision auto needs --threshold")
    return "promote_checkpoint" if score >= threshold else "loop_back"


def read_score(metrics_uri: str) -> float:
    metrics = s3io.read_json_object(metrics_uri)
    score = metrics.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise s3io.ArtifactError(f"{metrics_uri} has no numeric 'score' (found {score!r})")
    return float(score)


def write_malformed(uri: str, kind: str, decision: str) -> None:
    if kind == "not-json":
        s3io.write_bytes(uri, f"decision = {decision}\n".encode(), content_type="text/plain")
    elif kind == "not-object":
        s3io.write_json(uri, [decision])
    else:
        s3io.write_json(uri, {"verdict": decision})


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    requested = args.decision.strip()
    if not requested:
        parser.error("--decision must not be blank (use 'auto' or a decision value)")
    if requested == "auto" and args.threshold is None:
        parser.error("--decision auto needs --threshold")
    try:
        work_simulation.apply(args)
        score = read_score(args.metrics)
        decision = decide(requested, score, args.threshold)
        if args.malformed:
            write_malformed(args.out, args.malformed, decision)
            print(f"wrote a deliberately malformed ({args.malformed}) decision to {args.out}")
            return 0
        if decision not in KNOWN_DECISIONS:
            print(
                f"{parser.prog}: warning: decision {decision!r} is not one of "
                f"{', '.join(KNOWN_DECISIONS)}; no predicate will match it",
                file=sys.stderr,
            )
        s3io.write_json(
            args.out,
            {
                "decision": decision,
                "metrics_uri": args.metrics,
                "score": score,
                "threshold": args.threshold,
            },
        )
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"score {score} -> decision {decision!r} written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
