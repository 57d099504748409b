"""Run moto's Lambda functions in-process: the twin's Lambda, with no Docker.

moto (pinned to 5.2.5) runs a Lambda function in a Docker container. Local runs have no Docker,
so :func:`install` replaces the single private method behind every invocation,
``moto.awslambda.models.LambdaFunction._invoke_lambda(self, event=None)``, which returns
``(payload_json: str, errored: bool, logs: str)``. The replacement imports the function's own
``Handler`` (``"package.module.function"``) and calls it in this process with the decoded event
and a minimal Lambda context. Every Lambda path of moto goes through it: ``Invoke``, Step
Functions ``lambda:invoke``, ``lambda:invoke.waitForTaskToken`` and plain function ARNs, S3 and
EventBridge notifications (``tests/integration/test_moto_lambda_adapter.py`` drives the Step Functions paths).

Errors look like AWS's Python runtime: a handler that raises returns ``errored=True`` (moto
then sets ``X-Amz-Function-Error``) with the body::

    {"errorType": "<name>", "errorMessage": "<str(exc)>", "stackTrace": ["  File …", …]}

and Step Functions names the task's error after ``errorType``, so ``Retry``/``Catch``
``ErrorEquals`` match as on AWS. ``errorType`` is the exception's class name, as AWS's Python
runtime reports it (``npa_workflow.protocol.errors.lambda_error_type``, the one rule): no
attribute renames it, so an error name that is not a Python identifier (``Wave.Failed``) can
only reach a Task through ``SendTaskFailure``, never by raising.

A handler that cannot be imported fails with ``Runtime.ImportModuleError`` or
``Runtime.HandlerNotFound``, a result that is not JSON-serialisable with
``Runtime.MarshalError``, like on AWS.

The function's ``Timeout`` is enforced: a handler still running after it fails the invocation with
``Sandbox.Timedout`` (AWS's error; the late handler cannot be stopped in this process and its result is
dropped). What the adapter does not emulate: handler output
goes to this process's stdout/stderr rather than to CloudWatch Logs. The function's
``Environment.Variables`` are applied with ``os.environ.setdefault`` when
``install(apply_function_env=True)`` (the default): a handler sees the values its deployment
gives it unless the process already defines that variable (process values win; a conflicting
value is logged once). ``os.environ`` is process-wide, so functions that need different values
for the same variable cannot both get their own in one process.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import sys
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from npa_workflow.embedded_aws.patched_versions import PATCHED_VERSIONS
from npa_workflow.protocol.errors import LAMBDA_TIMED_OUT, lambda_error_type

__all__ = [
    "SUPPORTED_MOTO_VERSION",
    "LambdaContext",
    "MotoAdapterError",
    "drained",
    "error_body",
    "install",
    "installed",
    "in_process_lambdas",
    "quiet_moto_logs",
    "running",
    "uninstall",
]

SUPPORTED_MOTO_VERSION = PATCHED_VERSIONS["moto"]

LOG = logging.getLogger(__name__)

_lock = threading.RLock()
_original: Callable[..., tuple[str, bool, str]] | None = None
_apply_env = True
_env_conflicts_logged: set[tuple[str, str]] = set()
# Invocations per Handler string in this process, whoever invoked (a state machine, the event pump, Invoke):
# what lets a test assert the twin ran every function of the table.
invocations: Counter[str] = Counter()
# Leaving the adapter waits up to this long for the handlers still running (a Task's Lambda in flight when a run
# stops on a full disk or Ctrl-C): they end against the embedded AWS they started on, not against backends reset
# under them (a ResourceNotFoundException warned on the CLI's stderr after the run's last line).
DRAIN_SECONDS = 10.0
_running = 0  # handlers running now, a timed-out one's late thread included
_idle = threading.Condition(threading.Lock())


class MotoAdapterError(RuntimeError):
    """moto is not the version this adapter was written against, or its seam has moved."""


class LambdaContext:
    """The parts of the AWS Lambda context object that handlers and Powertools use."""

    def __init__(
        self,
        *,
        function_name: str,
        function_version: str,
        invoked_function_arn: str,
        memory_limit_in_mb: int,
        timeout_seconds: float,
        log_group_name: str,
    ) -> None:
        self.function_name = function_name
        self.function_version = function_version
        self.invoked_function_arn = invoked_function_arn
        self.memory_limit_in_mb = memory_limit_in_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = log_group_name
        self.log_stream_name = f"local/[{function_version}]{self.aws_request_id.replace('-', '')}"
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))

    def __repr__(self) -> str:
        return f"LambdaContext(function_name={self.function_name!r}, aws_request_id={self.aws_request_id!r})"


def error_body(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    """The Lambda error payload for ``exc`` (``errorType``/``errorMessage``/``stackTrace``)."""
    if error_type is None:
        # The runtime's own failures (import, handler lookup) carry AWS's names; a handler's exception is named
        # as AWS's Python runtime names it.
        error_type = exc.error_type if isinstance(exc, _RuntimeError) else lambda_error_type(exc)
    return {
        "errorType": error_type,
        "errorMessage": str(exc),
        "stackTrace": [line for line in traceback.format_tb(exc.__traceback__)],
    }


def _check_moto() -> type:
    try:
        import moto
        from moto.awslambda.models import LambdaFunction
    except ImportError as exc:  # pragma: no cover - moto is a hard dependency of local runs
        raise MotoAdapterError(
            f"moto is not installed; local runs need moto[server]=={SUPPORTED_MOTO_VERSION} "
            "(pip install 'npa-workflow[local]')"
        ) from exc
    version = getattr(moto, "__version__", "unknown")
    if version != SUPPORTED_MOTO_VERSION:
        raise MotoAdapterError(
            f"moto {version} is installed but the in-process Lambda adapter is written against "
            f"moto {SUPPORTED_MOTO_VERSION} (it replaces the private method "
            f"LambdaFunction._invoke_lambda); install moto[server]=={SUPPORTED_MOTO_VERSION}"
        )
    method = LambdaFunction.__dict__.get("_invoke_lambda")
    if method is None and _original is None:
        raise MotoAdapterError(
            f"moto {version} has no LambdaFunction._invoke_lambda; the in-process Lambda adapter cannot be installed"
        )
    if method is not None and method is not _invoke_in_process:
        params = list(inspect.signature(method).parameters)
        if params[:2] != ["self", "event"]:
            raise MotoAdapterError(
                f"moto {version}: LambdaFunction._invoke_lambda has signature {params}, expected (self, event=None)"
            )
    return LambdaFunction


def _decode_event(event: Any) -> Any:
    if isinstance(event, bytes | bytearray):
        event = event.decode("utf-8")
    if isinstance(event, str):
        if not event:
            return {}
        try:
            return json.loads(event)
        except ValueError:
            return event
    return {} if event is None else event


def _resolve_handler(handler: str) -> Callable[[Any, Any], Any]:
    module_name, _, attr = (handler or "").rpartition(".")
    if not module_name or not attr:
        raise _RuntimeError(
            "Runtime.HandlerNotFound",
            f"Bad handler {handler!r}: expected 'package.module.function'",
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise _RuntimeError(
            "Runtime.ImportModuleError",
            f"Unable to import module {module_name!r}: {type(exc).__name__}: {exc}",
        ) from exc
    func = getattr(module, attr, None)
    if not callable(func):
        raise _RuntimeError(
            "Runtime.HandlerNotFound",
            f"Handler {attr!r} missing on module {module_name!r}",
        )
    return func


class _RuntimeError(Exception):
    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


def _apply_function_env(fn: Any) -> None:
    variables = getattr(fn, "environment_vars", None) or {}
    for key, value in variables.items():
        value = str(value)
        with _lock:
            current = os.environ.setdefault(key, value)
            first_conflict = current != value and (fn.function_name, key) not in _env_conflicts_logged
            if first_conflict:
                _env_conflicts_logged.add((fn.function_name, key))
        if first_conflict:
            LOG.warning(
                "Lambda %s: environment variable %s=%r from its configuration is shadowed by the "
                "process value %r (in-process Lambdas share one environment)",
                fn.function_name,
                key,
                value,
                current,
            )


class _TimedOut(Exception):  # noqa: N818 - an outcome, not an error of this module
    pass


def _call_within(timeout: float, handler: Callable[[Any, Any], Any], event: Any, context: Any) -> Any:
    """`handler(event, context)` on its own thread; `_TimedOut` when it has not returned after `timeout` seconds
    (the function's configured Timeout, as Lambda enforces it)."""
    global _running
    outcome: dict[str, Any] = {}

    def call() -> None:
        global _running
        try:
            outcome["result"] = handler(event, context)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the invoking thread
            outcome["error"] = exc
        finally:
            with _idle:
                _running -= 1
                _idle.notify_all()

    worker = threading.Thread(target=call, name=f"lambda-{getattr(context, 'function_name', '')}", daemon=True)
    with _idle:
        _running += 1
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise _TimedOut
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def _invoke_in_process(self: Any, event: Any = None) -> tuple[str, bool, str]:
    """Replacement for ``LambdaFunction._invoke_lambda``: call the handler in this process."""
    with _lock:
        invocations[self.handler] += 1
    if _apply_env:
        _apply_function_env(self)
    try:
        timeout = float(self.timeout or 3)
    except (TypeError, ValueError):
        timeout = 3.0
    try:
        memory = int(self.memory_size or 128)
    except (TypeError, ValueError):
        memory = 128
    context = LambdaContext(
        function_name=self.function_name,
        function_version=str(getattr(self, "version", "$LATEST")),
        invoked_function_arn=self.function_arn,
        memory_limit_in_mb=memory,
        timeout_seconds=timeout,
        log_group_name=getattr(self, "logs_group_name", f"/aws/lambda/{self.function_name}"),
    )
    try:
        handler = _resolve_handler(self.handler)
        result = _call_within(timeout, handler, _decode_event(event), context)
    except _TimedOut:
        # AWS stops the sandbox and the invocation fails with this body; a thread cannot be stopped, so the late
        # handler runs on here, but its result is dropped as AWS drops it.
        body = {"errorType": LAMBDA_TIMED_OUT,
                "errorMessage": f"{context.aws_request_id} Error: Task timed out after {timeout:.2f} seconds"}
        LOG.warning("Lambda %s ran past its timeout of %ss (%s)", self.function_name, timeout, LAMBDA_TIMED_OUT)
        return json.dumps(body), True, ""
    except Exception as exc:
        body = error_body(exc)
        LOG.debug("Lambda %s raised %s: %s", self.function_name, body["errorType"], exc)
        return json.dumps(body), True, "".join(traceback.format_exception(exc))
    try:
        payload = json.dumps(result)
    except (TypeError, ValueError) as exc:
        body = error_body(exc, "Runtime.MarshalError")
        body["errorMessage"] = f"Unable to marshal response: {exc}"
        return json.dumps(body), True, ""
    return payload, False, ""


def install(*, apply_function_env: bool = True) -> bool:
    """Route every moto Lambda invocation to the in-process handler. Idempotent, thread-safe.

    Returns True if this call installed the adapter, False if it was already installed.
    Raises :class:`MotoAdapterError` if moto is not the pinned version.
    """
    global _original, _apply_env
    with _lock:
        lambda_function = _check_moto()
        _apply_env = apply_function_env
        current = lambda_function.__dict__.get("_invoke_lambda")
        if current is _invoke_in_process:
            return False
        _original = current
        lambda_function._invoke_lambda = _invoke_in_process
        return True


def uninstall() -> bool:
    """Restore moto's own ``_invoke_lambda``. Idempotent; returns True if something was undone."""
    global _original
    with _lock:
        from moto.awslambda.models import LambdaFunction

        if LambdaFunction.__dict__.get("_invoke_lambda") is not _invoke_in_process or _original is None:
            return False
        LambdaFunction._invoke_lambda = _original
        _original = None
        return True


def installed() -> bool:
    """Whether moto's Lambda invocations currently run in-process."""
    module = sys.modules.get("moto.awslambda.models")
    return module is not None and module.LambdaFunction.__dict__.get("_invoke_lambda") is _invoke_in_process


@contextlib.contextmanager
def in_process_lambdas(*, apply_function_env: bool = True, drain_seconds: float = DRAIN_SECONDS) -> Iterator[None]:
    """Context manager: install the adapter, and on exit, if this block installed it, uninstall it and wait up to
    `drain_seconds` for the handlers still running (`drained`)."""
    newly = install(apply_function_env=apply_function_env)
    try:
        yield
    finally:
        if newly:
            uninstall()
            if not drained(drain_seconds):
                LOG.debug("a Lambda handler still ran %ss after the in-process adapter was left", drain_seconds)


def running() -> int:
    """How many handlers run in this process now (what `drained` waits to see at 0)."""
    with _idle:
        return _running


def drained(timeout: float) -> bool:
    """Whether no handler runs in this process, waiting up to `timeout` seconds for those that do to return."""
    with _idle:
        return _idle.wait_for(lambda: _running == 0, timeout)


def quiet_moto_logs(level: int = logging.CRITICAL) -> None:
    """Silence the very large ERROR dumps moto's Step Functions interpreter logs per failure.

    A failed state is already reported by the execution's status and history.
    """
    logging.getLogger("moto.stepfunctions.parser").setLevel(level)
