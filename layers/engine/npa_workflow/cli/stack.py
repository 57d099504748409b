"""`npa-workflow serve` (the stack on this machine) and the commands that work against a stack: `submit`,
`status`, `cancel`, `resume`, `list`.

A stack is `--endpoint URL` (a local `serve`; also `$NPA_WORKFLOW_ENDPOINT`) or, in the cloud, `--stack NAME`
(its CloudFormation outputs name the bucket and the ledger table; credentials and region from the usual AWS
chain) or `--bucket B` (submit only). Naming none is a usage error (exit 2), except for `status` and `list`, which
then read the runs `npa-workflow run` kept in the local home (`cli.local_runs`).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from npa_workflow.cli.common import AllowUnknownKeysOpt, JsonOpt, PassEnvOpt, apply_pass_env, parse_vars
from npa_workflow.cli.output import print_json, print_problems
from npa_workflow.errors import Problem, SpecError

EndpointOpt = Annotated[str | None, typer.Option("--endpoint", envvar="NPA_WORKFLOW_ENDPOINT",
                                                 help="Endpoint of a local `npa-workflow serve`")]
StackOpt = Annotated[str | None, typer.Option("--stack", help="CloudFormation stack of the deployed engine")]
BucketOpt = Annotated[str | None, typer.Option("--bucket", help="Engine bucket (cloud, without --stack)")]
RegionOpt = Annotated[str | None, typer.Option("--region", help="AWS region (default: the AWS config's)")]


def _err(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def _check_endpoint(endpoint: str) -> None:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        ok = False
    if not ok:
        raise _StackProblem(f"--endpoint {endpoint!r} is not a URL",
                            "give the URL `npa-workflow serve` printed, e.g. http://127.0.0.1:5000")


def _named_stack(command: str, endpoint: str | None, stack: str | None, bucket: str | None, hint: str) -> None:
    """No stack named is a usage error (exit 2, README: exit codes), said with the options that name one."""
    if endpoint or stack or bucket:
        return
    _err(f"npa-workflow {command}: error: no stack named (fix: --endpoint URL for a local `npa-workflow serve`, or "
         f"$NPA_WORKFLOW_ENDPOINT; --stack NAME for a deployed one{hint})")
    raise typer.Exit(2)


_LOCAL_RUN_HINT = "; a run of `npa-workflow run` stops with Ctrl-C and continues with `run SPEC --run-id ID --resume`"


class _StackProblem(Exception):
    def __init__(self, message: str, fix: str) -> None:
        super().__init__(f"{message} (fix: {fix})")


def _stack_problem(exc: Exception, endpoint: str | None) -> Exception | None:
    """What the user or the network did, in one line with a fix; None for anything else (a bug of ours)."""
    from botocore import exceptions as boto

    from npa_workflow.stack_client import StackError

    where = f"the stack at {endpoint}" if endpoint else "AWS"
    if isinstance(exc, StackError | _StackProblem):
        return exc
    if isinstance(exc, boto.NoRegionError):
        return _StackProblem("no AWS region is configured", "pass --region REGION, or set AWS_REGION")
    if isinstance(exc, boto.NoCredentialsError | boto.PartialCredentialsError):
        return _StackProblem("no AWS credentials were found",
                             "run `aws configure` or set AWS_PROFILE; or use --endpoint URL for a local serve")
    if isinstance(exc, boto.EndpointConnectionError | boto.ConnectTimeoutError | boto.ReadTimeoutError
                  | boto.ConnectionClosedError):
        fix = ("start it with `npa-workflow serve` (it prints its endpoint) or check the URL" if endpoint
               else "check your network and --region")
        return _StackProblem(f"cannot reach {where}: {exc}", fix)
    if isinstance(exc, boto.ClientError):
        error = exc.response.get("Error", {})
        code, message = error.get("Code", "error"), error.get("Message", "") or str(exc)
        if code in ("AccessDenied", "AccessDeniedException", "UnrecognizedClientException",
                    "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException"):
            return _StackProblem(f"{where} refused the request: {code}: {message}",
                                 "use credentials allowed to read and write the engine's bucket and ledger")
        return _StackProblem(f"{where} answered {code}: {message}", "check the run id, --stack and --region")
    if isinstance(exc, boto.BotoCoreError):
        return _StackProblem(f"talking to {where} failed: {exc}", "check --endpoint / --stack and your network")
    return None


def stack_client(endpoint: str | None, stack: str | None, bucket: str | None, region: str | None) -> Any:
    from npa_workflow.stack_client import StackClient

    try:
        if endpoint:
            _check_endpoint(endpoint)
            return StackClient.local(endpoint)
        return StackClient.cloud(stack=stack, bucket=bucket, region=region)
    except Exception as exc:
        problem = _stack_problem(exc, endpoint)
        if problem is None:
            raise
        _err(f"npa-workflow: error: {problem}")
        raise typer.Exit(1) from None


def _on_stack(command: str, call: Any, endpoint: str | None, stack: str | None, bucket: str | None,
              region: str | None) -> Any:
    """Run `call(client)` against the stack; what the user or the network did becomes one
    `npa-workflow CMD: error:` line and exit 1 (README: exit codes)."""
    client = stack_client(endpoint, stack, bucket, region)
    try:
        return call(client)
    except Exception as exc:
        problem = _stack_problem(exc, endpoint)
        if problem is None:
            raise
        raise _fail(command, problem) from None


def _fail(command: str, exc: Exception) -> typer.Exit:
    _err(f"npa-workflow {command}: error: {exc}")
    return typer.Exit(1)


# ------------------------------------------------------------------------------------------------ serve
def serve_command(
    port: Annotated[int | None, typer.Option("--port", min=1, max=65535, help="Port (default: a free one)")] = None,
    catalog: Annotated[Path, typer.Option("--catalog", help="Tool catalog; every other spec in its folder is "
                                                           "deployed")] = Path("specs/tools.yaml"),
    pass_env: PassEnvOpt = None,
    console: Annotated[bool, typer.Option("--console/--no-console", help="Also serve the web console")] = True,
    console_port: Annotated[int | None, typer.Option("--console-port", min=0, max=65535,
                                                     help="The console's port (default: a free one)")] = None,
) -> None:
    """Run the whole stack on this machine (embedded AWS, inbox, triggers, watch, reap): no AWS account needed."""
    from npa_workflow.local.runtime import LocalRunError
    from npa_workflow.local.serve import Serve, ServeOptions

    apply_pass_env(pass_env)
    if catalog.is_dir():
        catalog = catalog / "tools.yaml"

    def announce(endpoint: str) -> None:
        sys.stdout.write(f"npa-workflow serve: endpoint {endpoint}\n"
                         f"  try: npa-workflow submit SPEC --endpoint {endpoint} --wait\n")
        if served.console_url:
            sys.stdout.write(f"npa-workflow serve: console {served.console_url}\n")
        sys.stdout.flush()

    served = Serve(ServeOptions(catalog=catalog, port=port, console=console, console_port=console_port), announce)
    try:
        served.serve()
    except SpecError as exc:
        print_problems(exc.problems + exc.warnings)
        raise typer.Exit(1) from None
    except LocalRunError as exc:
        raise _fail("serve", exc) from None


# ------------------------------------------------------------------------------------------------ submit
def _document(spec: str, variables: dict[str, str], run_id: str | None,
              allow_unknown_keys: bool = False) -> dict[str, Any]:
    """The uploaded document: the spec as it is, or a run request (with --var/--run-id, or a deployed spec's name)."""
    from npa_workflow.engine.inbox import RUN_REQUEST_API
    from npa_workflow.spec.loader import load_yaml_file

    path = Path(spec)
    if path.is_file() or _names_a_file(spec):
        doc = load_yaml_file(path)  # a path that is not a readable file: its one line here, no upload
        if not isinstance(doc, dict):
            raise SpecError([Problem("$", "a spec must be a mapping",
                                   "start it with apiVersion:, kind:, metadata: and states:", file=str(path))])
        if not variables and not run_id and not allow_unknown_keys:
            return doc
        spec_ref: Any = doc
    else:
        spec_ref = spec  # the name of a deployed spec
    request: dict[str, Any] = {"apiVersion": RUN_REQUEST_API, "spec": spec_ref}
    if variables:
        request["vars"] = variables
    if run_id:
        request["runId"] = run_id
    if allow_unknown_keys:
        request["options"] = {"allowUnknownKeys": True}
    return request


def _names_a_file(spec: str) -> bool:
    """SPEC is meant as a file (a folder, a path, a YAML/JSON name), not a deployed spec's name: a typo'd path is
    then reported here instead of reaching the inbox as the name of a spec nobody deployed."""
    return Path(spec).exists() or "/" in spec or Path(spec).suffix.lower() in (".yaml", ".yml", ".json")


def as_spec_file_errors(errors: list[dict[str, Any]], spec: str, inline: bool) -> list[dict[str, Any]]:
    """The inbox's errors said of the spec file they came from: every error of an uploaded spec; of a run request
    carrying it `inline`, those about its `spec` (errors about the request itself, `vars`, `options`, stay)."""
    out = []
    for e in errors:
        path = e.get("path", "$")
        if not inline:
            e = {**e, "file": spec}
        elif path == "spec" or path.startswith("spec."):
            e = {**e, "path": "$" if path == "spec" else path.removeprefix("spec."), "file": spec}
        out.append(e)
    return out


def _deployed_catalog(client: Any) -> Any:
    """The tool catalog the inbox validates against (`catalog/tools.yaml` of the stack's bucket, else none)."""
    from botocore.exceptions import ClientError

    from npa_workflow.engine.inbox import CATALOG_KEY
    from npa_workflow.spec.catalog import EMPTY_CATALOG, load_catalog_text

    try:
        body = client.s3.get_object(Bucket=client.bucket, Key=CATALOG_KEY)["Body"].read()
    except ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in ("NoSuchKey", "404", "NotFound"):
            return EMPTY_CATALOG
        raise
    text = body.decode("utf-8", errors="replace")
    return load_catalog_text(text, f"s3://{client.bucket}/{CATALOG_KEY}") if text.strip() else EMPTY_CATALOG


def _refused_before_staging(document: dict[str, Any], spec: str, client: Any, variables: dict[str, str],
                            allow_unknown_keys: bool) -> list[Problem]:
    """The spec's problems as the inbox would find them (its catalog, the vars), before any code is staged: a
    spec it refuses must leave nothing in the bucket."""
    from npa_workflow.spec.validate import validate_document

    inline = document["spec"] if isinstance(document.get("spec"), dict) else document
    try:
        validate_document(inline, file=spec, catalog=_deployed_catalog(client), overrides=variables,
                          allow_unknown_keys=allow_unknown_keys)
    except SpecError as exc:
        return list(exc.problems) + list(exc.warnings)
    return []


def _stage(command: str, spec: Path, client: Any, allow_outside: bool = False,
           inline: dict[str, Any] | None = None) -> tuple[str, str]:
    """Stage the spec's step code under `code/<digest>/` of the stack's bucket (once per content); (URI, digest).
    `inline`: the spec document, when it is already read (its `workdir`); else the file is read."""
    from npa_workflow.code_stage import stage_code
    from npa_workflow.render.code import CodeError, code_bundle, code_root
    from npa_workflow.spec.catalog import find_catalog, load_catalog_file

    if inline is None:
        from npa_workflow.spec.loader import load_yaml_file

        inline = load_yaml_file(spec)
        inline = inline if isinstance(inline, dict) else {}
    catalog_path = find_catalog(None, spec)
    workdir = load_catalog_file(catalog_path).workdir if catalog_path else ""
    spec_workdir = inline.get("workdir") if isinstance(inline.get("workdir"), str) else ""  # else the inbox says
    root = code_root(spec, workdir, catalog_path, spec_workdir)
    home = spec.resolve().parent
    if not allow_outside and not root.is_relative_to(home):
        source = "the spec's workdir" if spec_workdir else f"the tool catalog's workdir ({catalog_path})"
        raise _StackProblem(f"{source} {root} is outside the spec's folder {home}: {command} would upload it",
                            "keep the steps' code in the spec's folder, or pass --allow-outside-workdir to ship it")
    try:
        bundle = code_bundle(root)
    except CodeError as exc:
        raise _StackProblem(str(exc), "or pass --no-code" if command == "submit" else "fix the folder") from None
    uri, uploaded = stage_code(client.s3, client.bucket, bundle)
    _err(f"npa-workflow {command}: code {bundle.root} -> {uri} "
         f"({f'{len(bundle.files)} file(s) uploaded' if uploaded else 'unchanged: reused'})")
    return uri, bundle.digest


def _with_code(document: dict[str, Any], spec: Path, client: Any, allow_outside: bool = False) -> dict[str, Any]:
    """Stage the spec's step code and name it in the run request."""
    from npa_workflow.engine.inbox import RUN_REQUEST_API

    inline = document["spec"] if isinstance(document.get("spec"), dict) else document  # the spec itself
    uri, _ = _stage("submit", spec, client, allow_outside, inline)
    request = document if document.get("apiVersion") == RUN_REQUEST_API else {"apiVersion": RUN_REQUEST_API,
                                                                              "spec": document}
    return {**request, "options": {**request.get("options", {}), "codeUri": uri}}


def submit_command(
    spec: Annotated[str, typer.Argument(help="Spec file, or the name of a deployed spec", show_default=False)],
    var: Annotated[list[str] | None, typer.Option("--var", help="Override a config key: KEY=VALUE")] = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Run id (default: from the uploaded object)")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to end; exit 0 only if SUCCEEDED")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the inbox to take it")] = 60.0,
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    allow_unknown_keys: AllowUnknownKeysOpt = False,
    code: Annotated[bool, typer.Option("--code/--no-code", help="Stage the steps' code (the spec's or the "
                                                                "catalog's workdir, else the spec's folder) for the "
                                                                "tasks to mount")]
    = True,
    allow_outside_workdir: Annotated[bool, typer.Option(
        "--allow-outside-workdir", help="Ship a workdir outside the spec's folder (default: refused)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Upload a spec (or a run request) to the stack's inbox and print the run id."""
    from npa_workflow.protocol.run_ids import run_id_problem

    if run_id is not None and (problem := run_id_problem(run_id)):  # the rule `run` and the inbox apply
        _err(f"npa-workflow submit: --run-id: {problem}")
        raise typer.Exit(2)
    variables = parse_vars(var)
    try:
        document = _document(spec, variables, run_id, allow_unknown_keys)
    except SpecError as exc:
        print_problems(exc.problems)
        raise typer.Exit(1) from None
    _named_stack("submit", endpoint, stack, bucket, "; --bucket B for a deployed stack's bucket; to run a spec on "
                                                    "this machine without a stack: `npa-workflow run SPEC`")
    client = stack_client(endpoint, stack, bucket, region)
    from npa_workflow.engine.inbox import RUN_REQUEST_API

    try:
        if code and Path(spec).is_file():
            if problems := _refused_before_staging(document, spec, client, variables, allow_unknown_keys):
                if as_json:
                    print_json({"run_id": None, "key": None, "rejected": True,
                                "errors": [p.to_json() for p in problems]})
                _err("npa-workflow submit: refused before staging its code (the inbox would reject it; nothing "
                     "was uploaded):")
                print_problems(problems)
                raise typer.Exit(1)
            document = _with_code(document, Path(spec), client, allow_outside_workdir)
        inline = document.get("apiVersion") == RUN_REQUEST_API  # else the upload is the spec file as it is
        submitted = client.submit(document, timeout=timeout)
    except Exception as exc:
        problem = _stack_problem(exc, endpoint)
        if problem is None:
            raise
        raise _fail("submit", problem) from None
    if submitted.rejected:
        if Path(spec).is_file():
            # The user's file went inline in a run request (to carry --var, --run-id or its code): its problems are
            # the file's own, at the file's paths (`states.a.next`, `--var x`, not `spec.states.a.next`).
            submitted = replace(submitted, errors=as_spec_file_errors(submitted.errors, spec, inline))
        if as_json:
            print_json(submitted.to_json())
        _err(f"npa-workflow submit: rejected by the inbox (s3://{client.bucket}/{submitted.key}):")
        print_problems([Problem(e.get("path", "$"), e.get("message", ""), e.get("hint", ""),
                                e.get("severity", "error"), e.get("file", "")) for e in submitted.errors])  # type: ignore[arg-type]
        raise typer.Exit(1)
    if not wait:
        print_json(submitted.to_json()) if as_json else sys.stdout.write(submitted.run_id + "\n")
        return
    if not as_json:
        sys.stdout.write(submitted.run_id + "\n")
        sys.stdout.flush()
        from npa_workflow.cli.progress import print_summary

        report = _watch("submit", submitted.run_id, endpoint, stack, bucket, region)  # what `status --watch` shows
        print_summary(report, Console(soft_wrap=True))
        if report["status"] != "SUCCEEDED":
            raise typer.Exit(1)
        return
    try:
        record = client.wait(submitted.run_id)
    except Exception as exc:
        problem = _stack_problem(exc, endpoint)
        if problem is None:
            raise
        raise _fail("submit", problem) from None
    except KeyboardInterrupt:
        _err(f"npa-workflow submit: stopped waiting; run {submitted.run_id} goes on (npa-workflow cancel to stop)")
        raise typer.Exit(130) from None
    if as_json:
        print_json({**submitted.to_json(), "status": record.status.value})
    else:
        sys.stdout.write(f"{submitted.run_id}: {record.status.value}\n")
        if record.error is not None:
            where = f"state '{record.error.state}': " if record.error.state else ""
            sys.stdout.write(f"error: {where}{record.error.message}\n")
    if record.status.value != "SUCCEEDED":
        raise typer.Exit(1)


# ------------------------------------------------------------------------------------------------ status
def _watch(command: str, run: str, endpoint: str | None, stack: str | None, bucket: str | None,
           region: str | None) -> Any:
    """The live view of `run`, against a stack: every state of the plan, until the run ends. Each refresh reads
    the run's ledger item only, unless it changed (`stack_client.RunFollower`)."""
    from npa_workflow.cli.progress import plan_states, watch_report

    def follow(client: Any) -> Any:
        follower = client.follow(run)
        try:
            states = plan_states(follower.loaded)
        except Exception:  # noqa: BLE001 - without the frozen spec the view lists the waves seen so far
            states = []
        return watch_report(follower.refresh, states, Console(soft_wrap=True))

    try:
        return _on_stack(command, follow, endpoint, stack, bucket, region)
    except KeyboardInterrupt:
        _err(f"npa-workflow {command}: stopped watching; run {run} goes on (npa-workflow cancel to stop)")
        raise typer.Exit(130) from None


def status_command(
    run: Annotated[str, typer.Argument(help="Run id", show_default=False)],
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    watch: Annotated[bool, typer.Option("--watch", help="Follow the run until it ends (a live table on a "
                                                        "terminal, a line per change otherwise)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """A run's states (attempts, jobs, durations, status), decisions, watermarks and error; --watch follows it."""
    from npa_workflow.cli.progress import print_summary, with_gpu_waits

    if not (endpoint or stack or bucket):
        report = _local_status(run, watch, as_json)
    elif watch and not as_json:
        report = _watch("status", run, endpoint, stack, bucket, region)
    else:
        def final_report(client: Any) -> Any:  # --watch --json: the report once the run has ended
            import time

            follower = client.follow(run)
            while (report := follower.refresh())["status"] == "RUNNING":
                time.sleep(1.0)
            return report

        try:
            report = with_gpu_waits(_on_stack("status", final_report if watch else lambda client: client.report(run),
                                              endpoint, stack, bucket, region))
        except KeyboardInterrupt:
            _err(f"npa-workflow status: stopped watching; run {run} goes on (npa-workflow cancel to stop)")
            raise typer.Exit(130) from None
    if as_json:
        print_json(report)
    else:
        from npa_workflow.cli.logs import log_lines, logs_home

        home = logs_home()
        if endpoint:  # a serve stack's logs are under its home, wherever this client runs
            home = _on_stack("status", lambda client: client.serve_home(), endpoint, stack, bucket, region) or home
        console = Console(soft_wrap=True)
        print_summary(report, console)
        for line in log_lines(report, home):
            console.print(line, highlight=False)
        console.print(f"(npa-workflow logs {run} [STATE] [--iteration N] prints a step's output)", highlight=False)


def _local_status(run: str, watch: bool, as_json: bool) -> dict[str, Any]:
    """Without a stack: a local `run` of this id — its report once it ended (what `run --json` printed), else one
    built from its ledger as it goes (`--watch`: followed until it ends); no such run: exit 2."""
    import time

    from npa_workflow.cli.local_runs import LocalRunFollower, local_run_dir, no_report_yet
    from npa_workflow.cli.logs import local_run_spec, logs_home
    from npa_workflow.cli.progress import plan_states, watch_report

    home = logs_home()
    run_dir = local_run_dir(home, run)
    if run_dir is None:
        _named_stack("status", None, None, None, f"; no local run {run!r} under {home / 'runs'} either "
                                                  "(`npa-workflow list` names them)")
    follower = LocalRunFollower(run_dir)  # type: ignore[arg-type]  # _named_stack exits when run_dir is None
    report = follower.report()
    if report is None:
        _err(f"npa-workflow status: error: {no_report_yet(run)}")
        raise typer.Exit(1)
    if not watch or report["status"] != "RUNNING":
        return report

    def fetch() -> dict[str, Any]:
        nonlocal report
        report = follower.report() or report  # a read that fails once (the run just ending): the last one stands
        return report

    try:
        if not as_json:
            loaded = local_run_spec(run_dir)  # type: ignore[arg-type]
            return watch_report(fetch, plan_states(loaded) if loaded is not None else [], Console(soft_wrap=True))
        while fetch()["status"] == "RUNNING":
            time.sleep(1.0)
        return report
    except KeyboardInterrupt:
        _err(f"npa-workflow status: stopped watching; run {run} goes on in the `npa-workflow run` that started it")
        raise typer.Exit(130) from None


# ------------------------------------------------------------------------------------------------ cancel / resume
def cancel_command(
    run: Annotated[str, typer.Argument(help="Run id", show_default=False)],
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for every job to end")] = 60.0,
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Stop a run's execution and wait until every job of the run is cancelled."""
    _named_stack("cancel", endpoint, stack, bucket, _LOCAL_RUN_HINT)
    result = _on_stack("cancel", lambda client: client.cancel(run, timeout=timeout), endpoint, stack, bucket, region)
    if as_json:
        print_json(result)
    elif result.get("cancelled", True):
        jobs = ", ".join(result["cancelled_jobs"]) or "none"
        sys.stdout.write(f"{run}: {result['status']}; cancelled job(s): {jobs}\n")
    else:
        _err(f"npa-workflow cancel: run {run} was not cancelled: it is {result['status']} (it ended before the "
             "cancel took effect)")
    if not result.get("cancelled", True):
        raise typer.Exit(1)


def resume_command(
    run: Annotated[str, typer.Argument(help="Run id", show_default=False)],
    restage: Annotated[Path | None, typer.Option(
        "--restage", metavar="SPEC", help="Stage the step code of SPEC (its workdir, else its folder, as submit "
                                          "does) and resume with it: the re-run steps start in the fixed code")]
    = None,
    allow_outside_workdir: Annotated[bool, typer.Option(
        "--allow-outside-workdir", help="With --restage: ship a workdir outside the spec's folder")] = False,
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Resume a failed or aborted run: redrive its execution, else a new execution that replays succeeded waves."""
    _named_stack("resume", endpoint, stack, bucket, _LOCAL_RUN_HINT)

    def resume(client: Any) -> Any:
        code = _restaged("resume", run, restage, client, allow_outside_workdir) if restage is not None else None
        return client.resume(run, code=code)

    result = _on_stack("resume", resume, endpoint, stack, bucket, region)
    if as_json:
        print_json(result)
        return
    how = "redriven" if result["redriven"] else f"new execution {result.get('execution_name')}"
    if "code" in result:
        change = result["code"]
        how += f"; step code {change['from'][:12] or '(none)'} -> {change['to'][:12]}"
    elif restage is not None:
        how += "; step code unchanged"
    sys.stdout.write(f"{run}: resumed ({how})\n")


def _restaged(command: str, run: str, spec: Path, client: Any, allow_outside: bool) -> tuple[str, str]:
    """`--restage SPEC`: the run's own spec (its metadata.name), its code staged; (URI, digest)."""
    from npa_workflow.spec.loader import load_yaml_file

    try:
        doc = load_yaml_file(spec)
    except SpecError as exc:  # a path that is not a readable spec file: its one line, nothing staged
        first = exc.problems[0]
        raise _StackProblem(f"--restage {spec}: {first.message}", first.hint or "name the spec file") from None
    name = (doc.get("metadata") or {}).get("name") if isinstance(doc, dict) else None
    workflow = client.run(run).workflow
    if name != workflow:
        raise _StackProblem(f"--restage {spec}: it is the spec of workflow {name!r}, run {run!r} is of "
                            f"{workflow!r}", f"name the spec run {run!r} was submitted from")
    return _stage(command, spec, client, allow_outside, doc)


# ------------------------------------------------------------------------------------------------ list
def list_command(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs, newest first")] = 50,
    endpoint: EndpointOpt = None, stack: StackOpt = None, bucket: BucketOpt = None, region: RegionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Recent runs with their status (without a stack: the local runs of `npa-workflow run`)."""
    if not (endpoint or stack or bucket):
        from npa_workflow.cli.local_runs import local_runs
        from npa_workflow.cli.logs import logs_home

        rows = local_runs(logs_home(), limit)
        if not rows and not as_json:
            _err(f"npa-workflow list: no local run under {logs_home() / 'runs'} (runs of `npa-workflow run` from this "
                 "folder or $NPA_WORKFLOW_HOME; a serve stack's: --endpoint URL)")
            return
    else:
        runs = _on_stack("list", lambda client: client.list_runs(limit), endpoint, stack, bucket, region)
        rows = [{"run_id": r.run_id, "workflow": r.workflow, "status": r.status.value, "started_at": r.started_at}
                for r in runs]
    if as_json:
        print_json({"runs": rows})
        return
    table = Table(show_edge=False, box=None)
    for col in ("run", "workflow", "status", "started"):
        table.add_column(col, no_wrap=col == "run", overflow="fold")  # a run id is whole or absent
    for row in rows:
        table.add_row(row["run_id"], row["workflow"], Text(row["status"]), row["started_at"])
    Console(soft_wrap=True).print(table)
