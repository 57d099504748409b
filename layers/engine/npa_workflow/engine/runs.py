"""A run's frozen inputs: the spec text, the catalog text and the run options, stored under
`runs/<run-id>/` in the engine bucket when the run starts, so every function of the run
reads the same spec however the original file changes later."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from npa_workflow.compile.deadlines import DEFAULT_MAX_WAIT_SECONDS
from npa_workflow.engine.errors import RunNotFound
from npa_workflow.engine.ports import ObjectStore

if TYPE_CHECKING:
    from npa_workflow.spec.config import RunContext
    from npa_workflow.spec.validate import LoadedSpec


@dataclass(frozen=True)
class RunOptions:
    assume_decision: str = ""  # the fallback for a missing decision artifact ("" = none: fail)
    secret_names: tuple[str, ...] = ()
    workdir: str = ""  # local runs: the spec's folder, where step commands run
    cancel_on_timeout: bool = True
    max_wait_seconds: int = DEFAULT_MAX_WAIT_SECONDS  # per wave; the execution input's `$.run.deadline`
    # The step code submit staged (render.code): every task mounts it; frozen with the run, so a later
    # upload of the same folder cannot change what this run's tasks see.
    code_uri: str = ""
    code_digest: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "assume_decision": self.assume_decision,
            "secret_names": list(self.secret_names),
            "workdir": self.workdir,
            "cancel_on_timeout": self.cancel_on_timeout,
            "max_wait_seconds": self.max_wait_seconds,
            "code_uri": self.code_uri,
            "code_digest": self.code_digest,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunOptions:
        return cls(
            assume_decision=doc.get("assume_decision", ""),
            secret_names=tuple(doc.get("secret_names", ())),
            workdir=doc.get("workdir", ""),
            cancel_on_timeout=doc.get("cancel_on_timeout", True),
            max_wait_seconds=int(doc.get("max_wait_seconds", DEFAULT_MAX_WAIT_SECONDS)),
            code_uri=doc.get("code_uri", ""),
            code_digest=doc.get("code_digest", ""),
        )


@dataclass(frozen=True)
class FrozenRun:
    run_id: str
    loaded: LoadedSpec
    variables: dict[str, str]
    options: RunOptions
    run_ctx: RunContext = field(repr=False)
    # Every state's output URIs at a visit's loop counters (`visits._outputs_now`): fixed for the frozen run, read
    # by each of its launches; kept per counters.
    outputs_at: dict[tuple[tuple[str, int], ...], dict[str, list[str]]] = field(
        default_factory=dict, repr=False, compare=False)


class RunStore:
    """A process's reader of frozen runs, each read once and kept (a Lambda process serves many Tasks of a run).
    A resume with fixed code (`restage`, in another process) rewrites the run's options and always starts a new
    execution: a Task of an execution other than the one the run was read for reads the options again (one small
    object; a Distributed Map's member Tasks, each of its own child execution, pay that too)."""

    def __init__(self, store: ObjectStore, bucket: str) -> None:
        self.store = store
        self.bucket = bucket
        self._cache: dict[str, tuple[str, FrozenRun]] = {}  # run id -> (the execution it was read for, the run)
        self._lock = threading.Lock()

    def uri(self, run_id: str, name: str) -> str:
        return f"s3://{self.bucket}/runs/{run_id}/{name}"

    def freeze(
        self, run_id: str, spec_text: str, catalog_text: str, variables: dict[str, str], options: RunOptions
    ) -> None:
        self.store.put(self.uri(run_id, "spec.yaml"), spec_text.encode("utf-8"))
        self.store.put(self.uri(run_id, "tools.yaml"), catalog_text.encode("utf-8"))
        doc = {"run_id": run_id, "vars": variables, "options": options.to_json()}
        self.store.put(self.uri(run_id, "run.json"), json.dumps(doc, indent=2).encode("utf-8"))

    def put_group_members(self, run_id: str, group_key: str, members: list[str]) -> None:
        """Members of a Distributed Map group, read by its S3 ItemReader."""
        self.store.put(self.uri(run_id, f"groups/{group_key}.json"), json.dumps(members).encode("utf-8"))

    def _run_doc(self, run_id: str) -> dict[str, Any]:
        body = self.store.get(self.uri(run_id, "run.json"))
        if body is None:
            raise RunNotFound(f"run {run_id!r} has no frozen spec under {self.uri(run_id, '')}")
        doc: dict[str, Any] = json.loads(body)
        return doc

    def options(self, run_id: str, execution: str = "") -> RunOptions:
        """The run's options alone: no spec is read (cleanup needs only these)."""
        with self._lock:
            hit = self._cache.get(run_id)
        if hit is not None and (not execution or hit[0] == execution):
            return hit[1].options
        return RunOptions.from_json(self._run_doc(run_id).get("options", {}))

    def restage(self, run_id: str, code_uri: str, code_digest: str) -> RunOptions:
        """Point the frozen run at other staged code (a resume with fixed code); returns the options it had. Only
        the code changes: the spec, the catalog and the vars stay as frozen."""
        doc = self._run_doc(run_id)
        before = RunOptions.from_json(doc.get("options", {}))
        doc["options"] = {**doc.get("options", {}), "code_uri": code_uri, "code_digest": code_digest}
        self.store.put(self.uri(run_id, "run.json"), json.dumps(doc, indent=2).encode("utf-8"))
        with self._lock:
            self._cache.pop(run_id, None)
        return before

    def load(self, run_id: str, execution: str = "") -> FrozenRun:
        """The frozen run; `execution`: the ARN of the execution whose Task asks (a run cached for another
        execution reads the options again: they may have been re-staged)."""
        with self._lock:
            hit = self._cache.get(run_id)
        if hit is not None and (not execution or hit[0] == execution):
            return hit[1]
        if hit is not None:
            options = RunOptions.from_json(self._run_doc(run_id).get("options", {}))
            frozen = hit[1] if options == hit[1].options else replace(hit[1], options=options)
            with self._lock:
                self._cache[run_id] = (execution, frozen)
            return frozen
        # The spec stack (YAML, the spec's pydantic models, validation) is imported here, not at the top:
        # only the functions that read a run's spec (launch, decide, trigger, inbox) pay for it.
        from npa_workflow.spec.catalog import EMPTY_CATALOG, load_catalog_text
        from npa_workflow.spec.config import resolve_config
        from npa_workflow.spec.loader import load_yaml_text
        from npa_workflow.spec.validate import validate_document

        doc = self._run_doc(run_id)
        spec_body = self.store.get(self.uri(run_id, "spec.yaml"))
        if spec_body is None:
            raise RunNotFound(f"run {run_id!r} has no frozen spec under {self.uri(run_id, '')}")
        catalog_body = self.store.get(self.uri(run_id, "tools.yaml")) or b""
        catalog = load_catalog_text(catalog_body.decode("utf-8"), "tools.yaml") if catalog_body.strip() \
            else EMPTY_CATALOG
        variables = {str(k): str(v) for k, v in doc.get("vars", {}).items()}
        raw = load_yaml_text(spec_body.decode("utf-8"), "spec.yaml")
        # Validated with its policy when the run was accepted: unknown keys it allowed stay allowed.
        loaded = validate_document(raw, file="spec.yaml", catalog=catalog, overrides=variables,
                                   allow_unknown_keys=True)
        # `{{run.bucket}}` is this deployment's bucket: the one the run is frozen in.
        run_ctx, _ = resolve_config(loaded.spec.config, loaded.spec.name, run_id, loaded.spec.run, self.bucket)
        frozen = FrozenRun(run_id, loaded, variables, RunOptions.from_json(doc.get("options", {})), run_ctx)
        with self._lock:
            self._cache[run_id] = (execution, frozen)
        return frozen
