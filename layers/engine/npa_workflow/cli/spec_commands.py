"""The commands on a spec alone (no run, no stack): validate, plan, render, compile, schema.

`validate` is on the start-up path that matters most (`bench/cli_startup.py`): this module imports only
typer and the option definitions; the spec stack, the planner and the renderers load inside each command.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from npa_workflow.cli.common import (
    AllowUnknownKeysOpt,
    AssumeOpt,
    CatalogOpt,
    InfraRecoveriesOpt,
    JsonOpt,
    MaxConcurrencyOpt,
    MaxWaitOpt,
    RetriesOpt,
    RunIdOpt,
    VarOpt,
    check_assumption,
    load_or_exit,
    parse_vars,
)
from npa_workflow.cli.cost import (
    AssumeMinutesOpt,
    CostOpt,
    CostStackOpt,
    MonthlyOpt,
    PricesOpt,
    SpecsDirOpt,
    WatchIntervalOpt,
    parse_minutes,
    print_cost,
)
from npa_workflow.cli.output import print_json, print_ok, print_plan, print_problems, print_waves, stdout
from npa_workflow.compile.deadlines import DEFAULT_MAX_WAIT_SECONDS
from npa_workflow.errors import Problem, SpecError

if TYPE_CHECKING:
    from npa_workflow.plan.model import Plan, WavePlan
    from npa_workflow.spec.validate import LoadedSpec


def _expand_folders(specs: list[Path], stack_specs: Path | None) -> tuple[list[Path], list[Path]]:
    """Spec files to validate (a folder gives its deployable specs and its tool catalog) and the folders whose
    stack size to check (every folder named, and `--stack-specs`)."""
    from npa_workflow.protocol.stack import deployable_spec_files

    files: list[Path] = []
    folders = [stack_specs] if stack_specs is not None else []
    for path in specs:
        if path.is_dir():
            folders.append(path)
            catalog = [p for p in (path / "tools.yaml", path / "tools.yml") if p.is_file()]
            files.extend([*catalog, *deployable_spec_files(path)])
        else:
            files.append(path)
    return files, folders


def _stack_problems(folders: list[Path]) -> list[Problem]:
    """CloudFormation's 500 resources per stack, for the stack each folder would deploy as (protocol.stack: the
    synth's own check shares the message)."""
    from npa_workflow.protocol.stack import deployable_spec_files, estimated_resources, stack_resources_problem

    problems = []
    for folder in folders:
        count = len(deployable_spec_files(folder))
        problem = stack_resources_problem(estimated_resources(count), count)
        if problem:
            what, fix = problem
            problems.append(Problem("$", what, fix, file=str(folder)))
    return problems


def validate(
    specs: Annotated[list[Path], typer.Argument(help="Spec files, or folders of them (a stack's specs/)",
                                                show_default=False)],
    catalog: CatalogOpt = None,
    var: VarOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors")] = False,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
    stack_specs: Annotated[Path | None, typer.Option(
        "--stack-specs", help="The stack's specs folder: also check the stack it deploys against CloudFormation's "
                              "500 resources (a folder given as a spec is checked so too)",
        file_okay=False, exists=True)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check specs against every rule of the language and every limit compile, the inbox and the synth enforce
    (history events, definition size, Distributed Map concurrency, resources per stack); report all at once."""
    from npa_workflow.compile.limits import compile_limit_problems
    from npa_workflow.protocol.deployed_names import DEFAULT_STACK_NAME, deployed_names
    from npa_workflow.spec.catalog import CATALOG_API_VERSION, load_catalog_file
    from npa_workflow.spec.load import resolve_catalog
    from npa_workflow.spec.loader import load_yaml_file
    from npa_workflow.spec.validate import validate_document

    overrides = parse_vars(var)
    results = []
    failed = False
    specs, folders = _expand_folders(specs, stack_specs)
    for path in specs:
        names = None
        try:
            raw = load_yaml_file(path)  # parsed once: a catalog or a spec
            if isinstance(raw, dict) and raw.get("apiVersion") == CATALOG_API_VERSION:
                load_catalog_file(path)  # `validate specs/*.yaml` checks the tool catalog too (and caches it)
                problems, ok = [], True
            else:
                loaded = validate_document(raw, file=str(path), catalog=resolve_catalog(catalog, path),
                                           overrides=overrides, strict=strict, allow_unknown_keys=allow_unknown_keys)
                limits = [dataclasses.replace(p, file=p.file or str(path)) for p in compile_limit_problems(loaded)]
                problems, ok = [*limits, *loaded.warnings], not limits
                names = deployed_names(loaded.spec.name)
        except SpecError as exc:
            problems, ok = exc.problems + exc.warnings, False
        failed |= not ok
        results.append({"file": str(path), "valid": ok, "problems": [p.to_json() for p in problems],
                        **({"deployedAs": names.to_json()} if ok and names else {})})
        if not as_json:
            print_problems(problems)
            if ok:
                print_ok(f"{path}: valid")
            if ok and names and names.renamed:  # AWS's character sets: the deploy maps the name (issue 11, 10)
                sys.stdout.write(f"  deploys as state machine {names.state_machine}, log group {names.log_group} "
                                 f"(stack {DEFAULT_STACK_NAME}; the spec name has characters or a length AWS's "
                                 "names do not allow)\n")
    stack_problems = _stack_problems(folders)
    failed |= bool(stack_problems)
    if as_json:
        print_json({"valid": not failed, "specs": results,
                    **({"stack": [p.to_json() for p in stack_problems]} if folders else {})})
    else:
        print_problems(stack_problems)
    if failed:
        raise typer.Exit(1)


def plan(
    spec: Annotated[Path, typer.Argument(help="Spec file", show_default=False)],
    catalog: CatalogOpt = None,
    var: VarOpt = None,
    run_id: RunIdOpt = None,
    assume_decision: AssumeOpt = None,
    waves: Annotated[bool, typer.Option("--waves", help="Fold the plan into submit waves")] = False,
    max_concurrency: MaxConcurrencyOpt = 0,
    as_json: JsonOpt = False,
    cost: CostOpt = False,
    assume_minutes: AssumeMinutesOpt = None,
    prices: PricesOpt = None,
    monthly: MonthlyOpt = False,
    specs_dir: SpecsDirOpt = None,
    stack: CostStackOpt = None,
    watch_interval: WatchIntervalOpt = 1,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
) -> None:
    """Show the flat plan (loops unrolled under an assumed decision), or its waves; --cost: the cost of a run
    (--monthly: and the stack's fixed cost a month)."""
    from npa_workflow.compile.asl import CompileOptions
    from npa_workflow.compute_cost import PricesError, load_prices
    from npa_workflow.cost import estimate_cost
    from npa_workflow.plan.planner import build_plan, run_context
    from npa_workflow.plan.waves import build_waves

    check_assumption(assume_decision)
    minutes, step_minutes = parse_minutes(assume_minutes)
    try:
        compute_prices = load_prices(prices) if prices is not None else None
    except PricesError as exc:
        raise typer.BadParameter(str(exc), param_hint="--prices") from None
    loaded = load_or_exit(spec, catalog, var, allow_unknown_keys=allow_unknown_keys)
    try:
        the_plan = build_plan(loaded, run_id=run_id, assume_decision=assume_decision)
        wave_plan = (
            build_waves(loaded, the_plan, run_context(loaded, the_plan.run_id), max_concurrency_cap=max_concurrency)
            if waves else None
        )
        estimate = estimate_cost(loaded, assume_minutes=minutes, step_minutes=step_minutes, run_id=run_id,
                                 prices=compute_prices, options=CompileOptions(max_concurrency_cap=max_concurrency),
                                 watch_interval_minutes=watch_interval) \
            if cost else None
    except SpecError as exc:
        print_problems(exc.problems)
        raise typer.Exit(1) from None
    except ValueError as exc:  # a state named by --assume-minutes that the spec lacks
        raise typer.BadParameter(str(exc), param_hint="--assume-minutes") from None
    month = _monthly(spec, specs_dir, stack, watch_interval) if estimate is not None and monthly else None
    doc = wave_plan.to_json() if wave_plan is not None else the_plan.to_json()
    if as_json:
        cost_doc = {**estimate.to_json(), **({"monthly": month.to_json()} if month else {})} if estimate else None
        print_json({**doc, "cost": cost_doc} if cost_doc is not None else doc)
        return
    if estimate is not None:
        print_cost(estimate)  # the cost alone: the plan is what `plan` without --cost prints
        if month is not None:
            from npa_workflow.cli.cost import print_monthly

            print_monthly(month, {k: p.text() for k, p in estimate.pricing.prices.items()})
        return
    print_waves(wave_plan) if wave_plan is not None else print_plan(the_plan)


# AWS S3 bucket naming rules (general purpose buckets): 3-63 characters of lowercase letters, digits, '.' and '-',
# beginning and ending with a letter or digit.
_BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _bucket_name(value: str | None) -> str | None:
    """`--code-bucket`: a bucket name; `s3://B` and `s3://B/` are taken as B (not `s3://s3://B//code/…`)."""
    if value is None:
        return None
    name = value.removeprefix("s3://").rstrip("/")
    if not _BUCKET_RE.match(name):
        raise typer.BadParameter(f"{value!r} is not an S3 bucket name (3-63 lowercase letters, digits, '.' and '-'; "
                                 "the engine bucket: the stack's BucketName output)", param_hint="--code-bucket")
    return name


def render(
    spec: Annotated[Path, typer.Argument(help="Spec file", show_default=False)],
    catalog: CatalogOpt = None,
    var: VarOpt = None,
    run_id: RunIdOpt = None,
    assume_decision: AssumeOpt = None,
    max_concurrency: MaxConcurrencyOpt = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Write one YAML file per job into DIR")] = None,
    job_groups: Annotated[bool, typer.Option(
        "--job-groups", help="Instead: the existing engine's shape, one SkyPilot JobGroup per batch of a group "
                             "(this engine does not submit these)")] = False,
    code_bucket: Annotated[str | None, typer.Option(
        "--code-bucket", callback=_bucket_name,
        help="Show the tasks mounting the step code as `submit` stages it in this engine bucket "
             "(s3://BUCKET/code/<digest>/)")] = None,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
) -> None:
    """Print the SkyPilot YAML launch submits: one job per step, in plan order (first attempts)."""
    from npa_workflow.plan.planner import build_plan, run_context
    from npa_workflow.plan.waves import build_waves
    from npa_workflow.render import RenderError

    check_assumption(assume_decision)
    loaded = load_or_exit(spec, catalog, var, allow_unknown_keys=allow_unknown_keys)
    try:
        the_plan = build_plan(loaded, run_id=run_id, assume_decision=assume_decision)
        if job_groups:
            wave_plan = build_waves(loaded, the_plan, run_context(loaded, the_plan.run_id),
                                    max_concurrency_cap=max_concurrency)
            documents = _job_group_documents(wave_plan)
        else:
            documents = _launch_documents(loaded, the_plan, _code_uri(spec, loaded, code_bucket))
    except SpecError as exc:
        print_problems(exc.problems)
        raise typer.Exit(1) from None
    except RenderError as exc:
        print_problems([Problem("states", str(exc), "change the state named in the message", file=str(spec))])
        raise typer.Exit(1) from None
    if out is None:
        for name, text in documents:
            sys.stdout.write(f"# ---- job {name}\n{text}")
            if not text.endswith("\n"):
                sys.stdout.write("\n")
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
        for i, (name, text) in enumerate(documents, 1):
            (out / f"{i:03d}-{name}.yaml").write_text(text)
    except OSError as exc:  # a file in the way, a read-only or full disk: the user's to fix, not a traceback
        why = "it is a file, not a folder" if out.is_file() else f"cannot write there: {exc.strerror or exc}"
        sys.stderr.write(f"npa-workflow render: error: --out {out}: {why} "
                         "(fix: name a folder you can write to, or omit --out)\n")
        raise typer.Exit(1) from None
    stdout.print(f"wrote {len(documents)} file(s) to {out}")


def _code_uri(spec: Path, loaded: LoadedSpec, bucket: str | None) -> str:
    """Where `submit` would stage the spec's step code in `bucket` (the digest of the folder now)."""
    if not bucket:
        return ""
    from npa_workflow.render.code import code_bundle, spec_code_root

    return code_bundle(spec_code_root(spec, loaded)).uri(bucket)


def _launch_documents(loaded: LoadedSpec, the_plan: Plan, code_uri: str = "") -> list[tuple[str, str]]:
    """What launch submits, step by step: each wave its own job, named and fenced as launch does."""
    from npa_workflow.render import launch_document

    documents: list[tuple[str, str]] = []
    waves_of_state: dict[str, int] = {}
    for step in the_plan.steps:
        if not step.command:
            # A router or an empty terminal runs no job: the state machine passes through it.
            documents.append((f"{step.state}-no-job", f"# state '{step.state}' has no command: no job\n"))
            continue
        waves_of_state[step.state] = waves_of_state.get(step.state, 0) + 1
        tool = loaded.catalog.get(step.tool_ref) if step.tool_ref else None
        documents.append(launch_document(
            step, workflow=the_plan.workflow, run_id=the_plan.run_id, loops=step.loops, attempt=1,
            fence_sequence=waves_of_state[step.state], secret_names=tool.secret_env if tool else (),
            code_uri=code_uri,
        ))
    return documents


def _job_group_documents(wave_plan: WavePlan) -> list[tuple[str, str]]:
    from npa_workflow.render import render_wave

    label = "# The existing engine's shape (a JobGroup per batch of a group); this engine launches each step " \
            "as its own job: see `npa-workflow render` without --job-groups.\n"
    documents: list[tuple[str, str]] = []
    counter = 1
    for wave in wave_plan.waves:
        if not any(step.command for step in wave.steps):
            documents.append((f"{counter:02d}-{wave.name}-no-job", f"# state '{wave.name}' has no command: no job\n"))
            continue
        rendered = render_wave(wave, run_id=wave_plan.run_id, workflow=wave_plan.workflow, counter_start=counter)
        documents.extend((name, label + text) for name, text in rendered)
        counter += len(rendered)
    return documents


def compile(
    spec: Annotated[Path, typer.Argument(help="Spec file", show_default=False)],
    catalog: CatalogOpt = None,
    var: VarOpt = None,
    retries: RetriesOpt = 0,
    max_infrastructure_recoveries: InfraRecoveriesOpt = 1,
    max_wait_seconds: MaxWaitOpt = DEFAULT_MAX_WAIT_SECONDS,  # what `run` and the stack compile with
    max_concurrency: MaxConcurrencyOpt = 0,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
) -> None:
    """Print the Amazon States Language definition the spec runs as."""
    from npa_workflow.compile.asl import CompileOptions, compile_spec

    loaded = load_or_exit(spec, catalog, var, allow_unknown_keys=allow_unknown_keys)
    options = CompileOptions(
        retries=retries,
        max_infrastructure_recoveries=max_infrastructure_recoveries,
        max_wait_seconds=max_wait_seconds,
        max_concurrency_cap=max_concurrency,
    )
    try:
        definition = compile_spec(loaded, options).definition
    except SpecError as exc:  # an AWS limit (history, size, Map concurrency): one line each, like validate's
        print_problems(exc.problems)
        raise typer.Exit(1) from None
    print_json(definition)


def schema() -> None:
    """Print the JSON Schema of a spec (for editors)."""
    from npa_workflow.spec.schema import spec_json_schema

    stdout.out(json.dumps(spec_json_schema(), indent=2), highlight=False)


def _monthly(spec: Path, specs_dir: Path | None, stack: str | None, watch_interval: int) -> Any:
    """The stack's fixed cost a month, its specs counted from the deployed stack's catalog (--stack), else from
    the specs folder (--specs, default: the spec's own), by the rule a deploy uses (protocol.stack)."""
    from npa_workflow.cost import monthly_cost

    if stack:
        from npa_workflow.cli.cost import stack_spec_count
        from npa_workflow.cli.stack import _stack_problem

        try:
            count, source = stack_spec_count(stack, None), f"deployed in stack {stack}"
        except Exception as exc:
            problem = _stack_problem(exc, None)
            if problem is None:
                raise
            sys.stderr.write(f"npa-workflow plan: error: --stack: {problem}\n")
            raise typer.Exit(1) from None
    else:
        from npa_workflow.protocol.stack import deployable_spec_files

        folder = specs_dir or spec.parent
        if not folder.is_dir():
            raise typer.BadParameter(f"{folder} is not a folder (give the stack's specs folder)",
                                     param_hint="--specs")
        count, source = len(deployable_spec_files(folder)), f"the specs in {folder}"
    return monthly_cost(count, source, watch_interval_minutes=watch_interval)
