"""`embedded_aws.patched_versions`: the twin runs only on the exact moto, botocore and werkzeug its patches are
written against, pinned in pyproject.toml where the twin is installed, and says so in one line otherwise."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from npa_workflow.embedded_aws import patched_versions
from npa_workflow.embedded_aws.patched_versions import PATCHED_VERSIONS, PatchedVersionError, check_patched_versions

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.mark.parametrize("extra", ["local", "dev"])
def test_pyproject_pins_each_patched_package_at_the_patched_version(extra: str) -> None:
    requirements = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"][extra]
    pins = {}
    for requirement in requirements:
        found = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^;\s]+)", requirement.strip())
        if found:
            pins[found.group(1).lower()] = found.group(2)
    assert {name: pins.get(name) for name in PATCHED_VERSIONS} == PATCHED_VERSIONS


def test_the_installed_versions_are_the_patched_ones() -> None:
    check_patched_versions()  # this environment is installed from pyproject.toml's pins


def test_another_installed_version_is_refused_in_one_line_naming_it_and_the_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: "1.45.0" if name == "botocore" else real(name))
    with pytest.raises(PatchedVersionError) as raised:
        check_patched_versions()
    message = str(raised.value)
    assert "\n" not in message
    assert "botocore 1.45.0 (patched: 1.44.8)" in message and message.count("patched:") == 1  # only the wrong one
    assert "pip install 'moto==5.2.5' 'botocore==1.44.8' 'werkzeug==3.1.9'" in message


def test_a_package_that_is_missing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    real = metadata.version

    def version(name: str) -> str:
        if name == "werkzeug":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    with pytest.raises(PatchedVersionError, match=r"werkzeug \(not installed\) \(patched: 3\.1\.9\)"):
        check_patched_versions()


def test_the_server_does_not_start_on_another_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from npa_workflow.embedded_aws.moto_server import start_moto_server

    monkeypatch.setitem(patched_versions.PATCHED_VERSIONS, "werkzeug", "9.9.9")
    with pytest.raises(PatchedVersionError, match=r"werkzeug 3\.1\.9 \(patched: 9\.9\.9\)"):
        start_moto_server()
