"""Write a small, deterministic synthetic dataset: ``{"count", "seed", "records": [...]}``.

Example:
    python steps/prepare.py --out s3://bucket/run/dataset.json --records 200 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys

import s3io
import work_simulation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="s3:// URI of the dataset JSON to write")
    parser.add_argument("--records", type=int, default=100, help="number of records (>= 1)")
    parser.add_argument("--seed", type=int, default=0, help="random seed; same seed, same data")
    work_simulation.add_arguments(parser)
    return parser


def make_dataset(records: int, seed: int) -> dict:
    rng = random.Random(seed)
    rows = []
    for index in range(records):
        x = round(rng.uniform(-1.0, 1.0), 6)
        rows.append({"id": index, "x": x, "label": int(x + rng.gauss(0.0, 0.3) > 0)})
    return {"count": records, "seed": seed, "records": rows}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error(f"--records must be >= 1, got {args.records}")
    try:
        work_simulation.apply(args)
        s3io.write_json(args.out, make_dataset(args.records, args.seed))
    except (s3io.ArtifactError, work_simulation.InjectedFailure) as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.records} records (seed {args.seed}) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
