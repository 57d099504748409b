"""Pretend to train a model and write its metrics JSON, with a score that is a pure function
of the learning rate and the number of epochs (so sweeps and gates behave predictably).

    score = 1 / (1 + log10(learning_rate / 0.01) ** 2) * (1 - 0.5 ** epochs)

The best learning rate is 0.01; each extra epoch halves the remaining gap to the peak.

Example:
    python steps/fit.py --data s3://bucket/run/dataset.json --learning-rate 0.01 \
        --epochs 3 --out s3://bucket/run/metrics.json
"""

from __future__ import annotations

import argparse
import math
import sys

import s3io
import work_simulation

BEST_LEARNING_RATE = 0.01


def score_for(learning_rate: float, epochs: int) -> float:
    distance = math.log10(learning_rate / BEST_LEARNING_RATE)
    return round((1.0 / (1.0 + distance**2)) * (1.0 - 0.5**epochs), 6)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Write training metrics for a learning rate.")
    parser.add_argument("--data", required=True, help="s3:// URI of the dataset written by prepare")
    parser.add_argument("--learning-rate", type=_positive_float, required=True)
    parser.add_argument("--epochs", type=_positive_int, default=3)
    parser.add_argument("--out", required=True, help="s3:// URI of the metrics JSON to write")
    work_simulation.add_arguments(parser)
    return parser


def train(data_uri: str, learning_rate: float, epochs: int) -> dict:
    dataset = s3io.read_json_object(data_uri)
    records = dataset.get("records")
    if not isinstance(records, list) or not records:
        raise s3io.ArtifactError(f"{data_uri} has no records to train on")
    return {
        "data_uri": data_uri,
        "epochs": epochs,
        "learning_rate": learning_rate,
        "records": len(records),
        "score": score_for(learning_rate, epochs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        work_simulation.apply(args)
        metrics = train(args.data, args.learning_rate, args.epochs)
        s3io.write_json(args.out, metrics)
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"learning rate {args.learning_rate}, {args.epochs} epoch(s): score {metrics['score']} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
