"""The tool catalog: data (a YAML file), not code, so teams add tools without a release.

Chosen by `--catalog FILE`, else `$NPA_WORKFLOW_CATALOG`, else `tools.yaml` next to the spec.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.hints import did_you_mean
from npa_workflow.spec.loader import load_yaml_file, load_yaml_text
from npa_workflow.spec.model import known_keys
from npa_workflow.spec.paths import pydantic_problems

CATALOG_API_VERSION = "npa.workflow.tools/v1"
CATALOG_ENV = "NPA_WORKFLOW_CATALOG"


# defer_build: a spec without a catalog (most of them) never pays for building these validators.
class Tool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)

    description: str = ""
    argv: list[str] = Field(min_length=1)
    image: str = ""
    setup: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    multi_node_mode: Literal["forbidden", "sharded"] = Field(
        default="forbidden", validation_alias=AliasChoices("multiNodeMode", "multi_node_mode")
    )
    config_defaults: dict[str, Any] = Field(
        default_factory=dict, validation_alias=AliasChoices("configDefaults", "config_defaults")
    )
    omit_flags_when_empty: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("omitFlagsWhenEmpty", "omit_flags_when_empty")
    )
    # Names of secrets the tool needs in its environment: values are resolved at launch (Secrets
    # Manager in the cloud, the process environment locally), never written into a document.
    secret_env: list[str] = Field(
        default_factory=list, validation_alias=AliasChoices("secretEnv", "secret_env")
    )


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    tools: dict[str, Tool] = Field(default_factory=dict)
    # Image families (`images: {ltx2: registry/ltx2:1.4}`): what a profile's `image: tool://ltx2` means.
    images: dict[str, str] = Field(default_factory=dict)
    # The folder of the steps' code, relative to the catalog file: what submit ships (default: the spec's folder).
    workdir: str = ""
    source: str = ""

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def tool_image(self, ref: str) -> str:
        """The image `tool://REF` names: the family map's entry, else the image of the tool entry REF; "" if none."""
        if self.images.get(ref):
            return self.images[ref]
        tool = self.tools.get(ref)
        return tool.image if tool is not None else ""

    def image_names(self) -> list[str]:
        """Everything `tool://` may name."""
        return sorted(set(self.images) | {name for name, tool in self.tools.items() if tool.image})

    def close_names(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, list(self.tools), n=3, cutoff=0.8)


EMPTY_CATALOG = Catalog.model_construct()  # every field its default; validating nothing builds nothing


def _with_suggestions(problems: list[Problem]) -> list[Problem]:
    """An unknown entry field gets the closest field a tool entry has (`imgae` -> `image`)."""
    fields = known_keys(Tool)
    out = []
    for p in problems:
        key = p.path.rsplit(".", 1)[-1]
        if p.message == f"unknown field '{key}'":  # the generic fix gives way to the closest field
            p = Problem(p.path, p.message, did_you_mean(key, fields) or "fields: " + ", ".join(
                Tool.model_fields), p.severity, p.file)
        out.append(p)
    return out


def parse_catalog(raw: Any, file: str = "") -> Catalog:
    if not isinstance(raw, dict):
        raise SpecError.single("$", "tool catalog must be a mapping", "start with 'apiVersion:'", file)
    problems: list[Problem] = []
    if raw.get("apiVersion") != CATALOG_API_VERSION:
        problems.append(
            Problem("apiVersion", f"unsupported catalog apiVersion {raw.get('apiVersion')!r}",
                    f"use {CATALOG_API_VERSION}", file=file)
        )
    tools_raw = raw.get("tools", {})
    tools: dict[str, Tool] = {}
    if not isinstance(tools_raw, dict):
        problems.append(Problem("tools", "must be a mapping of tool name to entry",
                                "write tools: then one indented entry per tool name", file=file))
    else:
        for name, body in tools_raw.items():
            try:
                tools[str(name)] = Tool.model_validate(body)
            except ValidationError as exc:
                problems.extend(_with_suggestions(pydantic_problems(exc, f"tools.{name}", file)))
    images_raw = raw.get("images", {})
    images: dict[str, str] = {}
    if not isinstance(images_raw, dict) or not all(isinstance(v, str) and v.strip() for v in images_raw.values()):
        problems.append(Problem("images", "must be a mapping of image family to image", "write 'images: {ltx2: "
                                "registry.example.com/ltx2:1.4}'", file=file))
    else:
        images = {str(k): v.strip() for k, v in images_raw.items()}
    for key in raw:
        if key not in ("apiVersion", "tools", "images", "workdir"):
            problems.append(Problem(str(key), f"unknown catalog key '{key}'",
                                    did_you_mean(str(key), ("apiVersion", "tools", "images", "workdir")) or
                                    "a catalog has apiVersion, tools, images and workdir", file=file))
    workdir = raw.get("workdir", "")
    if not isinstance(workdir, str):
        problems.append(Problem("workdir", "workdir must be a folder path (relative to the catalog)",
                                "write 'workdir: steps' (a folder next to the catalog)", file=file))
        workdir = ""
    if problems:
        raise SpecError(problems)
    return Catalog(tools=tools, images=images, workdir=workdir, source=file)


# A catalog is parsed once per process (a loop over specs names the same one): by resolved path, and
# mtime and size so an edited file is read again. A Catalog is frozen, so sharing it is safe.
_FILE_CACHE: dict[tuple[str, int, int], Catalog] = {}
_FILE_CACHE_MAX = 16


def load_catalog_file(path: str | Path) -> Catalog:
    try:
        stat = os.stat(path)
    except OSError:
        return parse_catalog(load_yaml_file(path), str(path))  # the loader names the file and the problem
    key = (str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)
    cached = _FILE_CACHE.get(key)
    if cached is not None and cached.source == str(path):
        return cached
    catalog = parse_catalog(load_yaml_file(path), str(path))
    if len(_FILE_CACHE) >= _FILE_CACHE_MAX:
        _FILE_CACHE.clear()
    _FILE_CACHE[key] = catalog
    return catalog


def load_catalog_text(text: str, file: str = "") -> Catalog:
    return parse_catalog(load_yaml_text(text, file), file)


def find_catalog(explicit: str | Path | None, spec_path: str | Path | None) -> Path | None:
    """The catalog file to use, by precedence; None when there is none to find."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(CATALOG_ENV)
    if env:
        return Path(env)
    if spec_path:
        beside = Path(spec_path).parent / "tools.yaml"
        if beside.is_file():
            return beside
    return None
