"""The exact versions of moto, botocore and werkzeug whose insides the embedded AWS replaces, checked at start.

The twin replaces attributes of all three: moto's Step Functions interpreter, DynamoDB and server internals
(`moto_fixes`, `moto_speedups`, `moto_lambda`, `pause_aware_waits`, `execution_ends`, `durable_aws`), botocore's
`Endpoint._send`, `SigV4Auth.add_auth`, `Loader.load_data_with_path` and `Loader.list_available_services`
(`in_process_calls`, `sdk_models`) and werkzeug's `Rule._compile_builder` (`moto_server`). None of them is an
interface its package promises to keep: another release may rename, move or change one without a word, and the
twin would then run wrong rather than fail. So `pyproject.toml` pins these exact versions where the twin is
installed (its `local` and `dev` extras), and `start_moto_server` refuses other ones in one line that says which
and the fix. `replaced_attributes()` lists what the patches replace (`scripts/list_moto_seams.py` prints it for a
running stack).
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

__all__ = ["PATCHED_VERSIONS", "PatchedVersionError", "check_patched_versions", "replaced_attributes"]

# what the patches are written against; pyproject.toml's pins say the same (tests/integration/test_moto_seams.py)
PATCHED_VERSIONS = {"moto": "5.2.5", "botocore": "1.44.8", "werkzeug": "3.1.9"}


class PatchedVersionError(RuntimeError):
    """An installed moto, botocore or werkzeug is not the version the embedded AWS patches."""


def check_patched_versions() -> None:
    """Raise `PatchedVersionError` unless each package of `PATCHED_VERSIONS` is installed at its version."""
    from importlib.metadata import PackageNotFoundError, version

    wrong = []
    for name, wanted in PATCHED_VERSIONS.items():
        try:
            found = version(name)
        except PackageNotFoundError:
            found = "(not installed)"
        if found != wanted:
            wrong.append(f"{name} {found} (patched: {wanted})")
    if wrong:
        pins = " ".join(f"'{name}=={wanted}'" for name, wanted in PATCHED_VERSIONS.items())
        raise PatchedVersionError(
            f"the local AWS (moto) cannot start: it replaces private parts of exact versions, and installed is "
            f"{', '.join(wrong)} (fix: pip install {pins}, or pip install -e '.[local]')")


def _ours(value: Any) -> bool:
    """Whether `value`, found on a module or class of moto, botocore or werkzeug, was put there by this package."""
    if isinstance(value, staticmethod | classmethod):
        value = value.__func__
    if isinstance(value, types.ModuleType):  # a module swapped for a marked copy (pause_aware_waits' `threading`)
        return any(key.startswith("npa_") for key in vars(value))
    if not (inspect.isfunction(value) or inspect.isclass(value) or callable(value)):
        return False
    if str(getattr(value, "__module__", "") or "").startswith("npa_workflow"):
        return True
    # a wrapper made elsewhere (functools.lru_cache keeps the wrapped function's module): marked by its maker
    marks = getattr(value, "__dict__", None)
    return isinstance(marks, dict) and any(key.startswith(("npa_", "_npa_")) for key in marks)


def replaced_attributes() -> list[str]:
    """`module.attribute` / `module.Class.attribute` of every attribute of a loaded moto, botocore or werkzeug
    module or class whose value is this package's now, and every such module this package replaced in
    `sys.modules` (`module (replaced)`), sorted."""
    found: set[str] = set()
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or name.split(".", 1)[0] not in PATCHED_VERSIONS:
            continue
        if any(key.startswith("npa_") for key in vars(module)):
            found.add(f"{name} (replaced)")
        for attribute, value in list(vars(module).items()):
            if attribute.startswith("__"):
                continue
            if _ours(value):
                found.add(f"{name}.{attribute}")
            elif inspect.isclass(value) and value.__module__ == name:
                found.update(f"{name}.{value.__qualname__}.{member}" for member, item in list(vars(value).items())
                             if member not in ("__module__", "__doc__") and _ours(item))
    return sorted(found)
