"""The engine layer (built without Docker) and one thin Lambda function per handler in `functions/`.

The layer is `layers/engine/npa_workflow` plus its runtime dependencies (pydantic, PyYAML, Powertools) at the exact
versions of `layers/engine/requirements.lock` (`infra/layer_lock.py`), cross-installed by pip for the Lambda
platform on whatever host runs the synth. The functions' code
asset is a staging copy of `functions/**/*.py`, so the handler string is `functions.<name>.handler.handler`.
Each function gets its own role and log group; permissions are added by the stack (see `stack.py`).
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, Duration, ILocalBundling, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.layer_lock import (  # noqa: F401 - NOT_IN_LAYER re-exported
    LAYER_LOCK,
    LAYER_PLATFORM,
    LAYER_PYTHON_VERSION,
    NOT_IN_LAYER,
    check_covers,
    project_layer_requirements,
    read_lock,
)
from npa_workflow.protocol import functions as function_table

REPO_ROOT = Path(__file__).resolve().parent.parent
LAYER_SOURCE = REPO_ROOT / "layers" / "engine"
ENGINE_PACKAGE = "npa_workflow"
FUNCTIONS_SOURCE = REPO_ROOT / "functions"

# The newest Python runtime aws-cdk-lib 2.275 offers, on Graviton (cheaper per GB-second than x86).
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
LAYER_BUILD_FAILED = "building the engine layer failed"
# Bump when the bundler's behaviour changes: the bundler itself is not part of the asset hash.
LAYER_BUNDLER_REVISION = "2"



def handler_string(name: str) -> str:
    return function_table.slot(name).handler


def layer_requirements(lock: Path = LAYER_LOCK) -> list[str]:
    """What the layer installs: the lock's exact pins, which must cover pyproject.toml's layer dependencies."""
    pins = read_lock(lock)
    check_covers(pins, project_layer_requirements(), lock)
    return pins


@jsii.implements(ILocalBundling)
class EngineLayerBundler:
    """Builds the layer on the synth host: `pip install --platform` for the Lambda platform (wheels only, so
    nothing is compiled for the wrong machine), then a copy of the engine package. Never needs Docker.

    pip honours the usual `PIP_*` variables, e.g. `PIP_NO_INDEX=1 PIP_FIND_LINKS=<wheelhouse>` for a build
    with no network at all."""

    def __init__(
        self, requirements: list[str], package_dir: Path = LAYER_SOURCE / ENGINE_PACKAGE, compiler: str | None = None
    ) -> None:
        self.requirements = list(requirements)
        self.package_dir = package_dir
        self.compiler = compiler

    def try_bundle(self, output_dir: str, *_options: Any, **_kw: Any) -> bool:
        """Called by CDK with the output directory and the bundling options (a struct jsii passes positionally)."""
        target = Path(output_dir) / "python"
        command = [
            sys.executable, "-m", "pip", "install",
            "--quiet", "--disable-pip-version-check", "--no-compile",
            "--target", str(target),
            "--platform", LAYER_PLATFORM,
            "--python-version", LAYER_PYTHON_VERSION,
            "--implementation", "cp",
            "--only-binary=:all:",
            "--no-deps",  # the lock pins every distribution: nothing beyond it may be resolved on the day
            *self.requirements,
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"{LAYER_BUILD_FAILED}: pip could not install "
                f"{' '.join(self.requirements)} for {LAYER_PLATFORM} / Python {LAYER_PYTHON_VERSION} "
                f"(exit {result.returncode}):\n{result.stderr.strip()}\n"
                "fix: check the network or point pip at a wheelhouse "
                "(PIP_NO_INDEX=1 PIP_FIND_LINKS=<dir>), then synth again"
            )
        # Console scripts are of no use in a layer and point at this host's interpreter.
        shutil.rmtree(target / "bin", ignore_errors=True)
        shutil.copytree(
            self.package_dir,
            target / self.package_dir.name,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"),
            dirs_exist_ok=True,
        )
        if self.compiler:
            compile_bytecode(target, self.compiler)
        else:
            print(NO_BYTECODE_NOTE, file=sys.stderr)
        return True


def layer_compiler(version: str = LAYER_PYTHON_VERSION) -> str | None:
    """An interpreter of the layer's Python version on this host (bytecode is specific to a Python version)."""
    return shutil.which(f"python{version}")


NO_BYTECODE_NOTE = (
    f"note: no python{LAYER_PYTHON_VERSION} on this host: the engine layer ships without bytecode, so each cold "
    "start compiles it (about 0.3 s of a handler's import on a 2-core machine, bench/handler_import.py); "
    f"put python{LAYER_PYTHON_VERSION} on PATH to ship it compiled"
)


def compile_bytecode(target: Path, python: str) -> None:
    """Compile every module under `target` with `python`. Unchecked-hash pycs: Lambda's /opt is read-only, so
    Python can never cache a compile there itself, and these are used whatever mtimes the zip gives sources."""
    command = [python, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash", str(target)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{LAYER_BUILD_FAILED}: {python} could not compile the layer (exit {result.returncode}):\n"
            f"{(result.stdout + result.stderr).strip()}"
        )


def engine_layer_code(requirements: list[str] | None = None) -> lambda_.Code:
    requirements = layer_requirements() if requirements is None else requirements
    docker_command = (
        f"pip install --no-compile --no-deps --target /asset-output/python {' '.join(repr(r) for r in requirements)}"
        f" && cp -r /asset-input/{ENGINE_PACKAGE} /asset-output/python/"
        " && python -m compileall -q -j 0 --invalidation-mode unchecked-hash /asset-output/python"
    )
    compiler = layer_compiler()
    return lambda_.Code.from_asset(
        str(LAYER_SOURCE),
        exclude=["*.egg-info", "**/__pycache__", "**/*.pyc"],
        bundling=BundlingOptions(
            # Only if the local bundler could not run at all: the same build in the SAM image, on arm64.
            image=RUNTIME.bundling_image,
            platform="linux/arm64",
            command=["bash", "-c", docker_command],
            local=EngineLayerBundler(requirements, compiler=compiler),
            # Part of the asset hash: a new platform, Python, pinned version or bundler rebuilds the layer (the pins
            # are the lock's exact versions, so a dependency fix changes the hash and `cdk deploy` uploads it).
            environment={
                "NPA_LAYER_PLATFORM": LAYER_PLATFORM,
                "NPA_LAYER_PYTHON": LAYER_PYTHON_VERSION,
                "NPA_LAYER_REQUIREMENTS": " ".join(requirements),
                "NPA_LAYER_BUNDLER_REVISION": LAYER_BUNDLER_REVISION,
                "NPA_LAYER_BYTECODE": "compiled" if compiler else "source",
            },
        ),
    )


_staging_dirs: list[str] = []


def _remove_staging_dirs() -> None:
    for path in _staging_dirs:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_staging_dirs)


def new_staging_dir(prefix: str) -> Path:
    """A fresh directory to stage an asset in (CDK copies it into the cloud assembly); removed at exit."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    _staging_dirs.append(str(root))
    return root


def stage_handlers(source: Path = FUNCTIONS_SOURCE) -> Path:
    """A copy of `functions/**/*.py` (nothing else: no caches, no tests) under a fresh directory, as
    `<dir>/functions/...`, so the asset's root is the import root of `functions.<name>.handler`."""
    root = new_staging_dir("npa-workflow-functions-")
    for path in sorted(source.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        dest = root / "functions" / path.relative_to(source)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)
    if not (root / "functions" / "__init__.py").exists():
        (root / "functions").mkdir(exist_ok=True)
        (root / "functions" / "__init__.py").write_text("", encoding="utf-8")
    return root


# CloudWatch Logs' allowed retention periods, in days, by the name CDK gives them.
_RETENTIONS = (
    (1, "ONE_DAY"), (3, "THREE_DAYS"), (5, "FIVE_DAYS"), (7, "ONE_WEEK"), (14, "TWO_WEEKS"), (30, "ONE_MONTH"),
    (60, "TWO_MONTHS"), (90, "THREE_MONTHS"), (120, "FOUR_MONTHS"), (150, "FIVE_MONTHS"), (180, "SIX_MONTHS"),
    (365, "ONE_YEAR"), (400, "THIRTEEN_MONTHS"), (545, "EIGHTEEN_MONTHS"), (731, "TWO_YEARS"),
    (1096, "THREE_YEARS"), (1827, "FIVE_YEARS"), (2192, "SIX_YEARS"), (2557, "SEVEN_YEARS"),
    (2922, "EIGHT_YEARS"), (3288, "NINE_YEARS"), (3653, "TEN_YEARS"),
)


def log_retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch Logs retention that keeps `days` days."""
    for allowed, name in _RETENTIONS:
        if allowed >= days:
            return logs.RetentionDays[name]
    return logs.RetentionDays[_RETENTIONS[-1][1]]


class EngineFunctions(Construct):
    """The layer, and per handler: a function, its role (logs only; the stack adds what it touches) and
    its log group. `functions[name]`, `roles[name]`, `log_groups[name]`. Their environment is the deployment
    model's (`protocol.deployment`), set by the stack once the resources it names exist."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retention_days: int,
        layer_requirements_override: list[str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.layer = lambda_.LayerVersion(
            self,
            "EngineLayer",
            code=engine_layer_code(layer_requirements_override),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=f"npa_workflow engine + runtime deps ({LAYER_PLATFORM}, Python {LAYER_PYTHON_VERSION})",
            removal_policy=RemovalPolicy.RETAIN,
        )
        code = lambda_.Code.from_asset(str(stage_handlers()))
        self.functions: dict[str, lambda_.Function] = {}
        self.roles: dict[str, iam.Role] = {}
        self.log_groups: dict[str, logs.LogGroup] = {}
        retention = log_retention(retention_days)
        for spec in function_table.FUNCTIONS:  # one Lambda function per row (handler path, timeout, memory)
            log_group = logs.LogGroup(
                self, f"{spec.name.title()}Logs", retention=retention, removal_policy=RemovalPolicy.DESTROY
            )
            role = iam.Role(
                self,
                f"{spec.name.title()}Role",
                assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                description=f"npa-workflow {spec.name} function: exactly what it touches",
            )
            log_group.grant_write(role)
            fn = lambda_.Function(
                self,
                f"{spec.name.title()}Function",
                description=f"npa-workflow {spec.name}: {spec.description}",
                runtime=RUNTIME,
                architecture=ARCHITECTURE,
                handler=handler_string(spec.name),
                code=code,
                layers=[self.layer],
                role=role,
                log_group=log_group,
                logging_format=lambda_.LoggingFormat.JSON,
                timeout=Duration.seconds(spec.timeout_seconds),
                memory_size=spec.memory_mb,
                reserved_concurrent_executions=spec.reserved_concurrency,  # protocol/functions.py: why and how much
                tracing=lambda_.Tracing.ACTIVE,
            )
            self.functions[spec.name] = fn
            self.roles[spec.name] = role
            self.log_groups[spec.name] = log_group
