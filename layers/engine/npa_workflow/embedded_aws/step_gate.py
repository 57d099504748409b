"""What a local step may reach of the embedded AWS: the S3 places its run names, nothing of the control plane.

A step of `run` or `serve` is a subprocess of the user's; the embedded AWS (moto, `embedded_aws.moto_server`) holds the
control plane of every run of the home: the ledger (DynamoDB, with each waiting wave's task token), the executions
(Step Functions, where a token is completed), the frozen runs and the inbox (S3). Steps never get its endpoint.
They get a gate's: a second HTTP server on 127.0.0.1 in the same process, in front of the same moto application
(no second hop: the gate calls moto's WSGI app in place), which answers only S3 requests, for the places the step's
grant names, and refuses everything else with AWS's own AccessDenied shape. The cloud's counterpart is the
cluster's role (docs/cloud.md).

A grant is written by the launch, before the job starts, to `<runtime>/step-access/<key id>.json` (0600, renamed
into place): one per job, so a restarted runtime's gate honours the jobs it adopts. Once the job is started, its
id names its key (`step-access/jobs/<job id>`); the grant is revoked (both files deleted; the gate checks the file
at each request) when the runtime sees the job end or cancels it, so `step-access/` holds the live jobs' grants,
not every job's since the home began. Its key id is the job's `AWS_ACCESS_KEY_ID` (random, 128 bits; the gate
does not check signatures, so the key id is the credential); its places are read from what the step is told —
every `s3://` URI of its command, environment, inputs, outputs and task document, plus the run's default prefix
`<workflow>/<run id>/`:

- a URI ending in `/` grants that prefix; a URI of an object grants the folder it is in; an object at a bucket's
  root grants that object alone; `s3://bucket/` the whole bucket;
- in the engine bucket, `inbox/`, `inbox-rejected/`, `runs/`, `code/` and `catalog/` are the control plane's:
  never written by a step, read only where the grant names a place inside them (the run's staged code), and
  `runs/` only the step's own run's.

What the gate answers: GetObject, HeadObject, PutObject, CopyObject (the source is a read), DeleteObject(s),
multipart uploads, ListObjects(V2)/ListObjectVersions with a prefix inside a granted place, HeadBucket and
GetBucketLocation of a granted bucket. Path-style requests only (what an endpoint URL on 127.0.0.1 gets).
Documented in docs/local.md ("What a step's credentials allow").
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import os
import re
import secrets
import threading
import urllib.parse
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from npa_workflow.protocol import deployment, environment

GRANTS_DIR = "step-access"
# The engine bucket's control-plane prefixes: run requests, their rejections, frozen runs, staged code, and the
# deployed specs and catalog (`engine.inbox`).
RESERVED = (deployment.INBOX_PREFIX, deployment.REJECTED_PREFIX, deployment.RUNS_PREFIX, "code/",
            deployment.CATALOG_PREFIX)
KEY_PREFIX = "NPASTEP"
_KEY_ID = re.compile(rf"^{KEY_PREFIX}[0-9A-F]{{32}}$")
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
JOBS_DIR = "jobs"  # under GRANTS_DIR: a started job's id -> its key id
_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/[^/]*/[^/]*/([^/]+)/")
# An s3:// URI inside a command, an environment value or a document: a bucket name, then a key up to a character
# a URI in a shell word, a list or a JSON string does not hold.
_S3_URI = re.compile(r"s3://([a-z0-9][a-z0-9.\-]{1,62})(?:/([^\s\"'`{}\\,;|&<>()\[\]]*))?")
_HOSTS = frozenset({"127.0.0.1", "localhost"})
_KEPT_GRANTS = 4096
_DELETE_BODY_MAX = 4 * 1024 * 1024  # DeleteObjects: at most 1,000 keys of 1 KiB
_JSON_SERVICES = frozenset({"dynamodb", "states", "events", "logs", "secretsmanager", "kms", "ssm", "sqs"})
_REST_JSON_SERVICES = frozenset({"lambda"})


@dataclass(frozen=True)
class Place:
    bucket: str
    prefix: str  # "" with `exact=False`: the whole bucket
    exact: bool = False

    def holds(self, bucket: str, key: str) -> bool:
        return bucket == self.bucket and (key == self.prefix if self.exact else key.startswith(self.prefix))


@dataclass(frozen=True)
class Grant:
    run_id: str
    engine_bucket: str
    places: tuple[Place, ...]

    def allows(self, bucket: str, key: str, *, write: bool) -> bool:
        """Whether the step may read (or write) `key` of `bucket`; a list's prefix is checked as a key."""
        if _traverses(key):
            return False
        for place in self.places:
            if not place.holds(bucket, key):
                continue
            if bucket == self.engine_bucket:
                area = next((r for r in RESERVED if key.startswith(r)), None)
                if area is not None and (write or not place.prefix.startswith(area)
                                         or (area == deployment.RUNS_PREFIX
                                             and not key.startswith(f"{deployment.RUNS_PREFIX}{self.run_id}/"))):
                    continue
            return True
        return False

    def names_bucket(self, bucket: str) -> bool:
        return any(p.bucket == bucket for p in self.places)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "engine_bucket": self.engine_bucket,
                "places": [[p.bucket, p.prefix, p.exact] for p in self.places]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Grant:
        places = tuple(Place(str(b), str(p), bool(e)) for b, p, e in doc.get("places", []))
        return cls(str(doc["run_id"]), str(doc["engine_bucket"]), places)


def _traverses(key: str) -> bool:
    return any(part in (".", "..") for part in key.split("/"))


def places_named(texts: Iterable[str]) -> list[Place]:
    """The places (see the module doc) of every s3:// URI in `texts`, in order, once each."""
    found: dict[Place, None] = {}
    for text in texts:
        for bucket, key in _S3_URI.findall(text):
            if not key or key.endswith("/"):
                place = Place(bucket, key)
            elif "/" in key:
                place = Place(bucket, key[: key.rindex("/") + 1])
            else:
                place = Place(bucket, key, exact=True)
            found.setdefault(place, None)
    return list(found)


def grant_for(run_id: str, workflow: str, engine_bucket: str, texts: Iterable[str]) -> Grant:
    default = f"s3://{engine_bucket}/{workflow}/{run_id}/" if workflow and run_id else ""
    return Grant(run_id, engine_bucket, tuple(places_named([*texts, default])))


class StepAccess:
    """Writes a job's grant and hands back the environment its step reaches the gate with (the launch's side)."""

    def __init__(self, grants_dir: Path, endpoint_url: str, engine_bucket: str, region: str) -> None:
        self.grants_dir = Path(grants_dir)
        self.endpoint_url = endpoint_url
        self.engine_bucket = engine_bucket
        self.region = region

    @classmethod
    def from_environment(cls, env: Mapping[str, str], engine_bucket: str, region: str) -> StepAccess | None:
        endpoint = env.get(environment.STEP_ENDPOINT, "").strip()
        grants = env.get(environment.STEP_GRANTS, "").strip()
        return cls(Path(grants), endpoint, engine_bucket, region) if endpoint and grants else None

    def credentials(self, run_id: str, workflow: str, texts: Iterable[str]) -> dict[str, str]:
        grant = grant_for(run_id, workflow, self.engine_bucket, texts)
        key_id = f"{KEY_PREFIX}{uuid.uuid4().hex.upper()}"
        self.grants_dir.mkdir(parents=True, exist_ok=True)
        path = self.grants_dir / f"{key_id}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(grant.to_json(), fh)
        # Renamed into place before the job starts: a restarted runtime's gate finds it (the kernel keeps it through
        # a process crash; only a power loss could drop it, and the job with it). Not fsynced: it is on every
        # launch's path.
        os.replace(tmp, path)
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": key_id,
            "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
        }

    def bind(self, job_id: str, key_id: str) -> None:
        """The started job `job_id` holds `key_id`: what `revoke` finds. A crash before this line, or a disk that
        refuses it, leaves one grant file behind, never a job without its grant: the job has started, and its launch
        must not fail over the pointer."""
        if not _JOB_ID.match(job_id) or not _KEY_ID.match(key_id):
            return
        folder = self.grants_dir / JOBS_DIR
        tmp = folder / f".{job_id}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(key_id, encoding="utf-8")
            os.replace(tmp, folder / job_id)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def revoke_key(self, key_id: str) -> None:
        if _KEY_ID.match(key_id):
            with contextlib.suppress(OSError):
                (self.grants_dir / f"{key_id}.json").unlink(missing_ok=True)

    def revoke(self, job_ids: Iterable[str]) -> None:
        """The ended (or cancelled) jobs' grants: their keys reach nothing from now on. Idempotent; a job with no
        bound key (started before grants were bound, or by another runtime) is nothing to do."""
        for job_id in job_ids:
            if not _JOB_ID.match(job_id):
                continue
            bound = self.grants_dir / JOBS_DIR / job_id
            try:
                key_id = bound.read_text(encoding="utf-8").strip()
            except OSError:
                continue
            self.revoke_key(key_id)  # the grant first: a crash between leaves the pointer, and the next call ends it
            with contextlib.suppress(OSError):
                bound.unlink(missing_ok=True)


class _Grants:
    """The grants of one folder, each read once (bounded); a kept grant holds while its file does (revocation
    deletes it: one stat a request)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._kept: OrderedDict[str, Grant] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key_id: str) -> Grant | None:
        if not _KEY_ID.match(key_id):
            return None
        with self._lock:
            grant = self._kept.get(key_id)
            if grant is not None:
                self._kept.move_to_end(key_id)
        path = self.folder / f"{key_id}.json"
        if grant is not None:
            if path.exists():
                return grant
            with self._lock:
                self._kept.pop(key_id, None)
            return None
        try:
            grant = Grant.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        with self._lock:
            self._kept[key_id] = grant
            while len(self._kept) > _KEPT_GRANTS:
                self._kept.popitem(last=False)
        return grant


class Denied(Exception):
    def __init__(self, service: str, action: str, resource: str = "") -> None:
        super().__init__(action)
        self.service = service
        self.action = action
        self.resource = resource

    @property
    def message(self) -> str:
        on = f" on resource: {self.resource}" if self.resource else ""
        return (f"a local step's credentials are not authorized to perform: {self.action}{on} (a step reaches only "
                "the S3 places its run names; docs/local.md, \"What a step's credentials allow\")")


class StepGate:
    """The gate's WSGI application: checks a request against its grant, then hands it to moto's application."""

    def __init__(self, app: Any, grants_dir: Path, engine_key_id: str = "testing") -> None:
        self.app = app
        self.grants = _Grants(grants_dir)
        self.engine_key_id = engine_key_id

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        try:
            self._check(environ)
        except Denied as denied:
            return _denial(environ, denied, start_response)
        return self.app(environ, start_response)

    def _check(self, environ: dict[str, Any]) -> None:
        raw_uri = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        path, _, query = str(raw_uri).partition("?")
        if path.startswith(("http://", "https://")):  # an absolute request line
            path = "/" + path.split("/", 3)[3] if path.count("/") >= 3 else "/"
        if path.startswith("/moto-api"):
            raise Denied("moto", "moto-api", path)
        auth = str(environ.get("HTTP_AUTHORIZATION", ""))
        params = urllib.parse.parse_qs(query, keep_blank_values=True)
        presigned = "Credential=" + (params.get("X-Amz-Credential") or [""])[0]
        match = _CREDENTIAL.search(auth) or _CREDENTIAL.search(presigned)
        if match is None:
            raise Denied("aws", "an unsigned request")
        key_id, service = match.group(1), match.group(2)
        if service != "s3":
            target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
            action = target.rpartition(".")[2] if target else environ.get("REQUEST_METHOD", "")
            raise Denied(service, f"{service}:{action}")
        grant = self.grants.get(key_id)
        if grant is None:
            raise Denied("s3", "s3:* (unknown access key)")
        host = str(environ.get("HTTP_HOST", "")).rsplit(":", 1)[0].strip("[]")
        if host not in _HOSTS:
            raise Denied("s3", "a virtual-hosted request (use the endpoint URL, path-style)", host)
        self._check_s3(environ, grant, urllib.parse.unquote(path), params)
        # moto sees the engine's identity (its account), not the step's key.
        environ["HTTP_AUTHORIZATION"] = auth.replace(f"Credential={key_id}/", f"Credential={self.engine_key_id}/", 1)

    def _check_s3(self, environ: dict[str, Any], grant: Grant, path: str, params: dict[str, list[str]]) -> None:
        method = str(environ.get("REQUEST_METHOD", "GET")).upper()
        bucket, _, key = path.lstrip("/").partition("/")
        if not bucket:
            raise Denied("s3", "s3:ListAllMyBuckets", "arn:aws:s3:::*")
        resource = f"arn:aws:s3:::{bucket}/{key}"
        if not key:  # a bucket's own operations
            if method == "HEAD" or (method == "GET" and set(params) == {"location"}):
                if grant.names_bucket(bucket):
                    return
                raise Denied("s3", "s3:ListBucket", f"arn:aws:s3:::{bucket}")
            if method == "GET" and not ({"uploads", "policy", "acl", "tagging", "cors", "website", "lifecycle",
                                         "encryption", "replication", "notification", "ownershipControls"}
                                        & set(params)):
                prefix = (params.get("prefix") or [""])[0]
                if grant.allows(bucket, prefix, write=False):  # every key listed lies in a granted place
                    return
                raise Denied("s3", "s3:ListBucket", f"arn:aws:s3:::{bucket} (prefix {prefix!r})")
            if method == "POST" and "delete" in params:
                for deleted in _deleted_keys(environ):
                    if not grant.allows(bucket, deleted, write=True):
                        raise Denied("s3", "s3:DeleteObject", f"arn:aws:s3:::{bucket}/{deleted}")
                return
            raise Denied("s3", f"s3:{method} bucket", f"arn:aws:s3:::{bucket}")
        if method in ("GET", "HEAD"):
            if grant.allows(bucket, key, write=False):
                return
            raise Denied("s3", "s3:GetObject", resource)
        if method in ("PUT", "POST", "DELETE"):
            if not grant.allows(bucket, key, write=True):
                raise Denied("s3", "s3:DeleteObject" if method == "DELETE" else "s3:PutObject", resource)
            source = str(environ.get("HTTP_X_AMZ_COPY_SOURCE", ""))
            if source:
                src_bucket, _, src_key = urllib.parse.unquote(source.partition("?")[0]).lstrip("/").partition("/")
                if not grant.allows(src_bucket, src_key, write=False):
                    raise Denied("s3", "s3:GetObject", f"arn:aws:s3:::{src_bucket}/{src_key}")
            return
        raise Denied("s3", f"s3:{method}", resource)


def _deleted_keys(environ: dict[str, Any]) -> list[str]:
    """The keys of a DeleteObjects body (read here, then handed on to moto unchanged)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > _DELETE_BODY_MAX:
        raise Denied("s3", "s3:DeleteObject (a body over 4 MiB)")
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(body)
    text = body.decode("utf-8", "replace")
    return [html.unescape(k) for k in re.findall(r"<Key>(.*?)</Key>", text, flags=re.DOTALL)]


def _denial(environ: Mapping[str, Any], denied: Denied, start_response: Any) -> list[bytes]:
    """AccessDenied as the service would say it: S3's XML (403), a JSON protocol's `__type` (400), Lambda's
    `x-amzn-ErrorType` (403), the query protocols' `ErrorResponse` (403)."""
    request_id = uuid.uuid4().hex
    content_type = str(environ.get("CONTENT_TYPE", ""))
    if denied.service == "s3" or denied.service == "moto":
        status, kind = "403 Forbidden", "application/xml"
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>'
                f"{html.escape(denied.message)}</Message><RequestId>{request_id}</RequestId></Error>")
        headers = [("x-amz-request-id", request_id)]
    elif denied.service in _REST_JSON_SERVICES:
        status, kind = "403 Forbidden", "application/json"
        body = json.dumps({"Message": denied.message, "Type": "User"})
        headers = [("x-amzn-ErrorType", "AccessDeniedException"), ("x-amzn-RequestId", request_id)]
    elif denied.service in _JSON_SERVICES or "json" in content_type:
        status, kind = "400 Bad Request", content_type if "json" in content_type else "application/x-amz-json-1.0"
        body = json.dumps({"__type": "com.amazon.coral.service#AccessDeniedException", "message": denied.message})
        headers = [("x-amzn-RequestId", request_id)]
    else:
        status, kind = "403 Forbidden", "text/xml"
        body = (f"<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>"
                f"{html.escape(denied.message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>")
        headers = [("x-amzn-RequestId", request_id)]
    data = b"" if environ.get("REQUEST_METHOD") == "HEAD" else body.encode("utf-8")
    start_response(status, [("Content-Type", kind), ("Content-Length", str(len(data))), *headers])
    return [data]


class RunningGate:
    def __init__(self, server: Any, thread: threading.Thread, grants_dir: Path) -> None:
        self._server = server
        self._thread = thread
        self.grants_dir = grants_dir
        self.endpoint_url = f"http://127.0.0.1:{server.server_port}"

    def environment(self) -> dict[str, str]:
        """What the launch reads (`StepAccess.from_environment`)."""
        return {environment.STEP_ENDPOINT: self.endpoint_url, environment.STEP_GRANTS: str(self.grants_dir)}

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
            self._server.server_close()
        self._thread.join(timeout=5)


def start_step_gate(moto_app: Any, grants_dir: Path) -> RunningGate:
    """Serve the gate on a free port of 127.0.0.1, in front of `moto_app` (the embedded server's WSGI app)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    grants_dir = Path(grants_dir)
    grants_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(grants_dir, 0o700)
    server = make_server("127.0.0.1", 0, StepGate(moto_app, grants_dir), threaded=True,
                         request_handler=MotoRequestHandler)
    # Same poll interval as the embedded server's (embedded_aws.moto_server): a stop is noticed at once.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              name="npa-step-gate", daemon=True)
    thread.start()
    return RunningGate(server, thread, grants_dir)
