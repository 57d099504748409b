"""Check a decision artifact written earlier and record it as this step's own decision.

A routing state uses this to branch on the decision of the last loop iteration: it reads
``--from`` (keys ``decision``, ``last_decision``, ``action``, first present wins, as the
engine reads them), fails with a clear message if the artifact is missing or malformed, and
writes ``{"decision": <value>, "source_uri": <from>}`` to ``--to``.

Example:
    python steps/forward_decision.py --from s3://bucket/run/refine/round-3/decision.json \
        --to s3://bucket/run/route/decision.json
"""

from __future__ import annotations

import argparse
import sys

import s3io
import work_simulation

DECISION_KEYS = ("decision", "last_decision", "action")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Validate and forward a decision artifact.")
    parser.add_argument("--from", dest="source", required=True, help="s3:// URI of the decision JSON to read")
    parser.add_argument("--to", dest="target", required=True, help="s3:// URI of the decision JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def read_decision(uri: str) -> str:
    document = s3io.read_json_object(uri)
    for key in DECISION_KEYS:
        if key in document:
            value = str(document[key]).strip()
            if not value:
                raise s3io.ArtifactError(f"{uri}: '{key}' is blank")
            return value
    raise s3io.ArtifactError(f"{uri} has none of the keys {', '.join(DECISION_KEYS)}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        work_simulation.apply(args)
        decision = read_decision(args.source)
        s3io.write_json(args.target, {"decision": decision, "source_uri": args.source})
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"decision {decision!r} from {args.source} -> {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
