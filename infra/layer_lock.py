"""The engine layer's lock file: the exact version of every distribution the layer ships.

pyproject.toml gives ranges (`pydantic>=2.7,<3`); built from those, the layer is whatever pip resolves on the day of
the synth, while CDK's asset hash sees only the ranges: a synth that resolves another pydantic keeps the hash, so
`cdk deploy` skips the upload and the fix never reaches Lambda. So the layer is built from
`layers/engine/requirements.lock` (every distribution, transitive ones included, `name==version`, installed with
`--no-deps`), and the pins are part of the asset hash (`infra/functions.py`): a changed pin is a new layer.

Regenerate it after changing the dependencies in pyproject.toml (pip resolves them for the Lambda platform):

    .venv/bin/python -m infra.layer_lock
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LAYER_LOCK = REPO_ROOT / "layers" / "engine" / "requirements.lock"
REGENERATE = ".venv/bin/python -m infra.layer_lock"
# Lambda's arm64 (Graviton) platform and the runtime's Python (infra/functions.py: RUNTIME, ARCHITECTURE).
LAYER_PLATFORM = "manylinux2014_aarch64"
LAYER_PYTHON_VERSION = "3.14"
# Project dependencies that stay out of the layer: boto3 is in the Lambda runtime, typer/rich are CLI-only.
NOT_IN_LAYER = frozenset({"boto3", "botocore", "typer", "rich"})
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)$")
HEADER = (
    "# The engine layer's exact distributions for {platform} / CPython {python} (infra/layer_lock.py).\n"
    f"# Generated from pyproject.toml's dependencies by `{REGENERATE}`; do not edit by hand.\n"
)


class LockError(ValueError):
    """The lock file is missing, malformed or does not cover pyproject.toml's layer dependencies."""


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503: case and runs of `-_.` do not matter)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution(requirement: str) -> str:
    """The canonical distribution name of a requirement (`PyYAML>=6.0` → `pyyaml`)."""
    return canonical(re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0])


def project_layer_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The project's runtime dependencies that the layer must carry, as pyproject.toml (the one source) ranges them."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return [req for req in project["dependencies"] if distribution(req) not in NOT_IN_LAYER]


def read_lock(path: Path = LAYER_LOCK) -> list[str]:
    """The lock's pins, `name==version`, in file order (comments and blank lines skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LockError(f"{path}: cannot read the layer's lock file ({exc.strerror}) (fix: {REGENERATE})") from None
    pins: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if not _PIN.match(line):
            raise LockError(f"{path}:{number}: {line!r} is not an exact pin `name==version` (fix: {REGENERATE})")
        pins.append(line)
    if not pins:
        raise LockError(f"{path}: the layer's lock file pins nothing (fix: {REGENERATE})")
    return pins


def check_covers(pins: list[str], requirements: list[str], path: Path = LAYER_LOCK) -> None:
    """Every layer dependency of pyproject.toml has a pin (its version range is checked by the tests)."""
    pinned = {canonical(pin.split("==", 1)[0]) for pin in pins}
    missing = [req for req in requirements if distribution(req) not in pinned]
    if missing:
        raise LockError(f"{path}: pins nothing for {', '.join(missing)} of pyproject.toml (fix: {REGENERATE})")


def resolve(requirements: list[str], platform: str, python_version: str) -> list[str]:
    """`name==version` of everything pip would install for `requirements` on the layer's platform, sorted."""
    with tempfile.TemporaryDirectory(prefix="npa-layer-lock-") as tmp:
        report = Path(tmp) / "report.json"
        command = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
            "--ignore-installed", "--report", str(report), "--target", str(Path(tmp) / "target"),
            "--platform", platform, "--python-version", python_version, "--implementation", "cp",
            "--only-binary=:all:", *requirements,
        ]
        subprocess.run(command, check=True, capture_output=True, text=True)
        installs = json.loads(report.read_text(encoding="utf-8"))["install"]
    return [f"{name}=={version}" for name, version in
            sorted((canonical(i["metadata"]["name"]), i["metadata"]["version"]) for i in installs)]


def write_lock(pins: list[str], platform: str, python_version: str, path: Path = LAYER_LOCK) -> None:
    path.write_text(HEADER.format(platform=platform, python=python_version) + "".join(p + "\n" for p in pins),
                    encoding="utf-8")


def main() -> int:
    try:
        pins = resolve(project_layer_requirements(), LAYER_PLATFORM, LAYER_PYTHON_VERSION)
    except subprocess.CalledProcessError as exc:
        print(f"error: pip could not resolve the layer's dependencies:\n{exc.stderr.strip()}", file=sys.stderr)
        return 1
    write_lock(pins, LAYER_PLATFORM, LAYER_PYTHON_VERSION)
    print(f"{LAYER_LOCK.relative_to(REPO_ROOT)}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
