"""`engine_from_environment()`: the `Engine` a Lambda handler (or the local runtime) works with, built
from environment variables and cached per process (a warm Lambda reuses its clients). The composition
root: it builds the adapters, so it sits beside the engine package, not in it (the engine imports no adapter).

Variables:

- `NPA_WORKFLOW_LEDGER_TABLE` (required): the ledger's DynamoDB table;
- `NPA_WORKFLOW_BUCKET` (required): the engine bucket (frozen runs under `runs/<run-id>/`);
- `NPA_WORKFLOW_EXECUTOR`: `local` (subprocess jobs, the local runtime) or `skypilot` (default: jobs on
  the SkyPilot API server at `SKYPILOT_API_SERVER_ENDPOINT`, token from `SKYPILOT_TOKEN_SECRET_ARN` or
  `SKYPILOT_SERVICE_ACCOUNT_TOKEN`; step secrets from the JSON secret `NPA_WORKFLOW_SECRETS_ARN`, else
  the environment);
- `NPA_WORKFLOW_RETENTION_DAYS`: ledger items expire after this many days (DynamoDB TTL);
- `NPA_WORKFLOW_LOCAL_STATE_DIR`: where local jobs keep their records (default `$NPA_WORKFLOW_HOME`,
  else `.npa-workflow` in the current directory);
- `AWS_ENDPOINT_URL`: set by the local runtime to its embedded moto server; every client uses it;
- `NPA_WORKFLOW_STEP_ENDPOINT`, `NPA_WORKFLOW_STEP_GRANTS`: the local runtime's step gate
  (`embedded_aws.step_gate`): each local job gets the gate's endpoint and credentials of its own, for the S3 places
  its run names, never the embedded AWS's endpoint (no ledger, no Step Functions). Without a gate (a harness
  that starts moto alone) jobs get the endpoint and the dummy credentials.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npa_workflow.engine.context import Engine
from npa_workflow.engine.ports import JobExecutor, JobRequest, Observation, Submission, TrackedJob
from npa_workflow.engine.runs import RunStore
from npa_workflow.errors import WiringError
from npa_workflow.protocol import environment as env_names

if TYPE_CHECKING:
    from npa_workflow.adapters.aws_clients import AwsClients

EXECUTORS = ("local", "skypilot")
CLIENT_POOL = 40  # ≥ engine.watch.WORKERS
DEFAULT_REGION = "us-east-1"
DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}

_lock = threading.Lock()
_cache: dict[tuple[str, ...], Engine] = {}


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise WiringError(f"environment variable {name} is not set (the function's configuration must set it)")
    return value


def local_state_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = env.get(env_names.LOCAL_STATE_DIR, "").strip()
    if explicit:
        return Path(explicit)
    return Path(env.get(env_names.HOME, "").strip() or ".npa-workflow")


def local_job_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every local job gets: this project's Python first on PATH and, with an embedded AWS endpoint but no
    step gate, that endpoint, dummy credentials and a region (with a gate, each job's own credentials are laid
    over this by the executor: `embedded_aws.step_gate.StepAccess`)."""
    env = os.environ if env is None else env
    python_dir = str(Path(sys.executable).parent)
    path = env.get("PATH", "")
    job_env = {"PATH": python_dir + (os.pathsep + path if path else "")}
    endpoint = env.get("AWS_ENDPOINT_URL", "").strip()
    if endpoint and not env.get(env_names.STEP_ENDPOINT, "").strip():
        region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or DEFAULT_REGION
        job_env.update(AWS_ENDPOINT_URL=endpoint, AWS_DEFAULT_REGION=region, AWS_REGION=region, **DUMMY_CREDENTIALS)
    return job_env


def _cache_key(env: Mapping[str, str]) -> tuple[str, ...]:
    names = (env_names.LEDGER_TABLE, env_names.BUCKET, env_names.EXECUTOR, env_names.LOCAL_STATE_DIR, env_names.HOME,
             "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_REGION", env_names.SKYPILOT_ENDPOINT,
             env_names.RETENTION_DAYS, env_names.STEP_ENDPOINT, env_names.STEP_GRANTS)
    return tuple(env.get(n, "") for n in names)


def engine_from_environment(env: Mapping[str, str] | None = None) -> Engine:
    """The engine described by `env` (default: the process environment); one per distinct configuration."""
    env = os.environ if env is None else env
    key = _cache_key(env)
    with _lock:
        engine = _cache.get(key)
        if engine is None:
            engine = _build(env)
            _cache[key] = engine
        return engine


def clear_cache() -> None:
    """Forget every cached engine (tests; the local runtime between runs on different endpoints)."""
    with _lock:
        engines = list(_cache.values())
        _cache.clear()
    for engine in engines:
        # The local executor lets go of the job wrapper it keeps started ahead (it would go with the process).
        close = getattr(engine.executor, "close", None)
        if callable(close):
            close()


def _build(env: Mapping[str, str]) -> Engine:
    from npa_workflow.adapters.aws_clients import AwsClients
    from npa_workflow.adapters.s3_store import S3Store
    from npa_workflow.adapters.sfn_callbacks import SfnCallbacks
    from npa_workflow.adapters.sfn_executions import SfnExecutions
    from npa_workflow.ledger import DynamoLedger

    table = _required(env, env_names.LEDGER_TABLE)
    bucket = _required(env, env_names.BUCKET)
    kind = env.get(env_names.EXECUTOR, "").strip() or "skypilot"
    if kind not in EXECUTORS:
        raise WiringError(f"{env_names.EXECUTOR}={kind!r}: expected one of {', '.join(EXECUTORS)}")
    endpoint = env.get("AWS_ENDPOINT_URL", "").strip() or None
    region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or None
    if endpoint and not region:
        region = DEFAULT_REGION
    # One client per service, created here once (the watch pass's thread pool shares them: engine.watch.WORKERS).
    aws = AwsClients(endpoint_url=endpoint, region=region, pool_size=CLIENT_POOL)
    store = S3Store(aws.client("s3"))
    retention = env.get(env_names.RETENTION_DAYS, "").strip()
    ledger = DynamoLedger(table, aws.client("dynamodb"), retention_days=int(retention) if retention.isdigit() else None)
    sfn = aws.client("stepfunctions")
    callbacks = SfnCallbacks(sfn)
    if kind == "skypilot":
        executor: JobExecutor = LazyExecutor(lambda: _skypilot_executor(env, aws))
        job_env: dict[str, str] = {}
    else:
        from npa_workflow.embedded_aws.step_gate import StepAccess
        from npa_workflow.local_jobs.job_executor import LocalJobExecutor

        access = StepAccess.from_environment(env, bucket, region or DEFAULT_REGION)
        executor = LocalJobExecutor(local_state_dir(env), step_access=access)
        job_env = local_job_env(env)
    return Engine(ledger=ledger, runs=RunStore(store, bucket), store=store, executor=executor,
                  callbacks=callbacks, job_env=job_env, executions=SfnExecutions(sfn))


def _skypilot_executor(env: Mapping[str, str], aws: AwsClients) -> JobExecutor:
    from npa_workflow.adapters.secrets import EnvironmentSecrets, SecretsManagerSecrets
    from npa_workflow.adapters.skypilot_api import SkyPilotApi
    from npa_workflow.adapters.skypilot_executor import SkyPilotExecutor

    secrets_arn = env.get(env_names.STEP_SECRETS_ARN, "").strip()
    secrets = (SecretsManagerSecrets(secrets_arn, aws.client("secretsmanager", pooled=False))
               if secrets_arn else EnvironmentSecrets(env))
    return SkyPilotExecutor(SkyPilotApi.from_environment(env), secrets)


class LazyExecutor:
    """Builds the executor on first use: functions that never launch or watch (inbox, decide,
    trigger) then need neither the SkyPilot endpoint nor read access to its token."""

    def __init__(self, build: Callable[[], JobExecutor]) -> None:
        self._build = build
        self._executor: JobExecutor | None = None
        self._lock = threading.Lock()

    def _get(self) -> JobExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = self._build()
            return self._executor

    def submit(self, job: JobRequest) -> Submission:
        return self._get().submit(job)

    def observe(self, jobs: list[TrackedJob]) -> dict[str, Observation]:
        return self._get().observe(jobs)

    def find_by_name(self, name: str) -> list[str]:
        return self._get().find_by_name(name)

    def cancel(self, job_ids: list[str]) -> None:
        self._get().cancel(job_ids)

    def confirm_cancelled(self, job_ids: list[str], timeout_seconds: float) -> bool:
        return self._get().confirm_cancelled(job_ids, timeout_seconds)


def step_secret_presence(env: Mapping[str, str] | None = None) -> tuple[Any, str, str]:
    """Where the inbox checks a run's step secrets before starting it (engine.preflight): (presence, where, fix).
    Locally (`serve`) the jobs inherit this process's environment; on a stack they get the step-secrets JSON
    secret's keys (read once per check), and a stack without one can give a step no secret at all."""
    from npa_workflow.engine.preflight import Unreadable, environment_presence, local_fix

    env = os.environ if env is None else env
    kind = env.get(env_names.EXECUTOR, "").strip() or "skypilot"
    if kind == "local":
        return environment_presence(dict(env)), "the environment of npa-workflow serve", local_fix("serve")
    arn = env.get(env_names.STEP_SECRETS_ARN, "").strip()
    if not arn:
        none = Unreadable("this stack has no step-secrets secret",
                          "deploy the stack with -c stepSecretsArn=ARN of a Secrets Manager secret holding a JSON "
                          "object with the key {name} (docs/deploy.md)")
        return (lambda names: none), "the stack", none.fix
    from npa_workflow.adapters.aws_clients import AwsClients
    from npa_workflow.adapters.secrets import SecretsManagerSecrets, SecretUnreadable

    endpoint = env.get("AWS_ENDPOINT_URL", "").strip() or None
    region = env.get("AWS_DEFAULT_REGION") or env.get("AWS_REGION") or (DEFAULT_REGION if endpoint else None)
    clients = AwsClients(endpoint_url=endpoint, region=region, pool_size=1)
    source = SecretsManagerSecrets(arn, clients.client("secretsmanager", pooled=False))
    fix = "add the key {name} to that JSON secret (aws secretsmanager put-secret-value), then submit again"

    def present(names: Any) -> Any:
        try:
            return source.presence(names)
        except SecretUnreadable as exc:
            return Unreadable(f"the step-secrets secret {exc}", "check stepSecretsArn names an existing JSON "
                              "secret the stack may read (docs/deploy.md), then submit again")

    return present, f"the step-secrets secret {arn}", fix
