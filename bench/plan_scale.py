"""How validation and planning scale with spec size.

Generates specs of 10, 100, 1,000 and 5,000 states (a realistic mix: `next` chains, looped
sequences, parallel groups, routers with transitions, toolRef and run states) plus one spec
with a single parallel group of 2,000 members (the largest the language accepts,
`spec.validate.MAX_GROUP_MEMBERS`), then times each phase separately (best of 3):

  parse     YAML text -> document (the bounded safe loader)
  validate  document -> LoadedSpec (every rule of the language)
  plan      LoadedSpec -> flat plan (loops unrolled under the default assumption)
  waves     plan -> waves (folding and batching)

The table shows milliseconds, microseconds per state, and the growth factor of the per-state
cost from the previous size (1.0 = linear; 10x more states costing 100x more time shows 10.0).

    .venv/bin/python bench/plan_scale.py                 # the table
    .venv/bin/python bench/plan_scale.py --no-gc         # the same with the cyclic GC off while timing
    .venv/bin/python bench/plan_scale.py --profile 5000  # plus a cProfile of each phase at 5000 states
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from npa_workflow.plan.planner import build_plan, run_context
from npa_workflow.plan.waves import build_waves
from npa_workflow.spec.catalog import load_catalog_text
from npa_workflow.spec.loader import load_yaml_text
from npa_workflow.spec.validate import MAX_GROUP_MEMBERS, validate_document

CATALOG = load_catalog_text(
    """\
apiVersion: npa.workflow.tools/v1
tools:
  bench.train:
    argv: [python, train.py, --data, "{{config.data_uri}}", --out, "{{config.out_uri}}",
           --epochs, "{{config.epochs}}", --sleep, "{{config.sleep}}"]
    image: python:3.11-slim
    configDefaults: {epochs: "3", sleep: ""}
    omitFlagsWhenEmpty: [--sleep]
""",
    "bench-tools.yaml",
)

HEADER = """\
apiVersion: npa.workflow/v0.0.1
kind: Workflow
metadata: {name: bench}
config:
  bucket: bench-bucket
  prefix: "bench/{{run.id}}"
  root: "s3://{{config.bucket}}/{{config.prefix}}"
  data_uri: "{{config.root}}/data.json"
  rounds: "2"
  fan_limit: "2"
resources:
  default: {cpus: 1, memory: 2Gi}
  gpu: {cpus: 4, memory: 16Gi, accelerators: "H100:1", image: "tool://bench.train"}
"""


def mixed_spec(n: int) -> str:
    """About n states in blocks of ten, chained by `next`:

    every block: five leaf states (run shell, run argv, toolRef) with outputs and state tokens;
    every other block also: a looped sequence of three children (params with the loop counter);
    otherwise: a parallel group of four members with maxConcurrency; every fifth block a router.
    """
    lines = [HEADER, "initial: b0-s0\nstates:"]
    count = 0
    block = 0
    head = "b0-s0"
    while count < n:
        b = f"b{block}"
        nxt_block = f"b{block + 1}-s0"
        last = count + 10 >= n
        names = [f"{b}-s{i}" for i in range(5)]
        assert names[0] == head
        for i, name in enumerate(names):
            follow = names[i + 1] if i < 4 else f"{b}-body"
            out = f'outputs: [{{uri: "{{{{config.root}}}}/{name}.json", schema: data}}]'
            if i % 3 == 0:
                work = f'run: {{shell: "step {name} --run {{{{run.id}}}} --in {{{{config.data_uri}}}}"}}'
            elif i % 3 == 1:
                prev = names[i - 1]
                work = f'run: {{argv: [step, "{{{{state.{prev}.uri}}}}", "{name}"]}}'
            else:
                work = f'toolRef: bench.train, resources: gpu, params: {{out_uri: "{{{{config.root}}}}/{name}"}}'
            lines.append(f"  {name}: {{{work}, {out}, next: {follow}}}")
        count += 5
        after = "end" if last else nxt_block
        if block % 2 == 0:
            kids = [f"{b}-k{i}" for i in range(3)]
            lines.append(
                f"  {b}-body: {{sequence: [{', '.join(kids)}], "
                f"loop: {{max: config.rounds, until: promote_checkpoint}}, next: {b}-r}}"
            )
            for k in kids:
                lines.append(
                    f'  {k}: {{run: {{shell: "k {k} {{{{config.round_uri}}}}"}}, '
                    f'params: {{round_uri: "{{{{config.root}}}}/{k}/round-{{{{loop.{b}-body}}}}"}}}}'
                )
            count += 4
        else:
            members = [f"{b}-m{i}" for i in range(4)]
            lines.append(f"  {b}-body: {{parallel: [{', '.join(members)}], maxConcurrency: config.fan_limit, "
                         f"next: {b}-r}}")
            for m in members:
                lines.append(f'  {m}: {{run: {{argv: [shard, "{m}", "{{{{run.prefix}}}}"]}}}}')
            count += 5
        if block % 5 == 4:
            lines.append(
                f"  {b}-r: {{run: {{shell: route}}, transitions: [{{when: promote_checkpoint, goto: {after}}}], "
                f"next: {after}}}"
            )
        else:
            lines.append(f"  {b}-r: {{run: {{shell: 'echo {b}'}}, next: {after}}}")
        count += 1
        head = nxt_block
        block += 1
    lines.append("  end: {run: {shell: done}, terminal: true}")
    return "\n".join(lines) + "\n"


def group_spec(members: int) -> str:
    names = [f"m{i}" for i in range(members)]
    lines = [HEADER, "initial: fan", "states:",
             f"  fan: {{parallel: [{', '.join(names)}], maxConcurrency: 64, next: end}}"]
    lines += [f'  {m}: {{run: {{shell: "w {{{{run.id}}}}"}}}}' for m in names]
    lines.append("  end: {run: {shell: done}, terminal: true}")
    return "\n".join(lines) + "\n"


@dataclass
class Row:
    label: str
    states: int
    steps: int = 0
    waves: int = 0
    times: dict[str, float] | None = None
    note: str = ""


PHASES = ("parse", "validate", "plan", "waves")


GC_DURING_RUNS = True


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best CPU time of `repeat` runs. CPU (not wall) time, so other load on the machine does not
    count; a collection before each run, so garbage of earlier runs is not charged to this one.
    With --no-gc the cyclic collector is off during each run, which separates the algorithm's
    cost from the collector's (whose full collections grow with the number of live objects)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None
        gc.collect()
        if not GC_DURING_RUNS:
            gc.disable()
        try:
            start = time.process_time()
            result = fn()
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best, result


def measure(label: str, text: str, repeat: int) -> Row:
    times: dict[str, float] = {}
    note = ""
    times["parse"], raw = best_of(lambda: load_yaml_text(text, f"{label}.yaml"), repeat)
    states = len(raw["states"])

    def validate() -> Any:
        return validate_document(raw, file=f"{label}.yaml", catalog=CATALOG)

    try:
        times["validate"], loaded = best_of(validate, repeat)
    except RecursionError:
        # Reported, then measured with a higher limit so the rest of the table still means something.
        note = f"validate: RecursionError at recursion limit {sys.getrecursionlimit()}"
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20 * states + 1000))
        try:
            times["validate"], loaded = best_of(validate, repeat)
        finally:
            sys.setrecursionlimit(old)
    times["plan"], plan = best_of(lambda: build_plan(loaded), repeat)
    ctx = run_context(loaded, plan.run_id)
    times["waves"], waves = best_of(lambda: build_waves(loaded, plan, ctx), repeat)
    return Row(label, states, len(plan.steps), len(waves.waves), times, note)


def print_table(rows: list[Row]) -> None:
    head = f"{'spec':<12}{'states':>7}{'steps':>7}{'waves':>7}"
    for phase in PHASES:
        head += f" | {phase + ' ms':>12}{'µs/st':>8}{'×':>6}"
    print(head)
    print("-" * len(head))
    prev: Row | None = None
    for row in rows:
        assert row.times is not None
        line = f"{row.label:<12}{row.states:>7}{row.steps:>7}{row.waves:>7}"
        for phase in PHASES:
            t = row.times[phase]
            per = t / row.states * 1e6
            if prev is not None and prev.times is not None and prev.label.startswith("mixed"):
                growth = f"{per / (prev.times[phase] / prev.states * 1e6):.2f}"
            else:
                growth = "-"
            line += f" | {t * 1e3:>12.1f}{per:>8.1f}{growth:>6}"
        print(line)
        if row.label.startswith("mixed"):
            prev = row
    print("\n× = per-state cost divided by the previous mixed size's (1.0 = linear growth);"
          " the group row compares with mixed-5000.")
    for row in rows:
        if row.note:
            print(f"note ({row.label}): {row.note}")


def profile(text: str, label: str) -> None:
    raw = load_yaml_text(text)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 200_000))
    steps: list[tuple[str, Callable[[], Any]]] = [("parse", lambda: load_yaml_text(text))]
    loaded = validate_document(raw, catalog=CATALOG)
    plan = build_plan(loaded)
    ctx = run_context(loaded, plan.run_id)
    steps += [
        ("validate", lambda: validate_document(raw, catalog=CATALOG)),
        ("plan", lambda: build_plan(loaded)),
        ("waves", lambda: build_waves(loaded, plan, ctx)),
    ]
    for phase, fn in steps:
        prof = cProfile.Profile()
        prof.runcall(fn)
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
        print(f"\n=== {label}: {phase} (by own time) ===")
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000,5000", help="mixed spec sizes (states)")
    parser.add_argument("--group", type=int, default=MAX_GROUP_MEMBERS,
                        help=f"members of the one-group spec (0 = skip; at most {MAX_GROUP_MEMBERS:,})")
    parser.add_argument("--repeat", type=int, default=3, help="best of N")
    parser.add_argument("--profile", type=int, default=0, help="also cProfile the mixed spec of this size")
    parser.add_argument("--no-gc", action="store_true", help="disable the cyclic GC during each timed run")
    args = parser.parse_args()
    global GC_DURING_RUNS
    GC_DURING_RUNS = not args.no_gc
    if args.group > MAX_GROUP_MEMBERS:  # validation refuses it: there would be nothing to plan
        parser.error(f"--group {args.group:,}: a group has at most {MAX_GROUP_MEMBERS:,} members "
                     f"(fix: --group {MAX_GROUP_MEMBERS} or less)")

    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        rows.append(measure(f"mixed-{n}", mixed_spec(n), args.repeat))
    if args.group:
        rows.append(measure(f"group-{args.group}", group_spec(args.group), args.repeat))
    print(f"best of {args.repeat}, CPU time, cyclic GC {'on' if GC_DURING_RUNS else 'off'} during runs\n")
    print_table(rows)
    if args.profile:
        profile(mixed_spec(args.profile), f"mixed-{args.profile}")


if __name__ == "__main__":
    main()
