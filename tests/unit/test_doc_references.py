"""Every file and module the docs name exists in this repository.

Read: `README.md`, `docs/*.md`, and the module docstring of every Python file of the package, the handlers, the
CDK app, the benchmarks and the scripts. What counts as a reference, and how it must resolve:

- a name ending in `.md`: a document of the repository, from the repository's root, from the citing document's
  folder (a Markdown link `[x](decisions.md)`), or under `docs/`. A document outside the repository (another
  project's architecture notes, a reference folder next to the checkout) is not something a reader of the
  repository can open, so it fails too;
- a path with a folder and a file name (`local_jobs/executor.py`, `tests/e2e/test_gc.py`, `bench/serve_idle.py`)
  whose first folder is a folder of the repository or of the package: that file, from the root or from the
  package's folder. Paths with placeholders (`runs/<run-id>/meta.json`, `functions/<name>/handler.py`) and
  paths of what a run writes (`jobs/…`, `serve/aws/…`: no such folder here) are not files of the repository;
- a dotted name in backticks whose first part is a module or subpackage of the package (`engine.start.start_run`,
  `npa_workflow.local_jobs.job_wrapper`, `embedded_aws.durable_aws.DurableAws.item_written`), or of `infra`:
  the module, and then each further part a name it defines (a function, class, constant or import), down to a
  class's own attributes.

Static and deterministic: the files are parsed, nothing is imported or run.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "layers" / "engine" / "npa_workflow"
# Where module docstrings are read (the handlers, the CDK app, benchmarks and scripts cite docs and modules too).
DOCSTRING_ROOTS = (PACKAGE, REPO / "functions", REPO / "infra", REPO / "bench", REPO / "scripts", REPO / "tests")

CODE_SUFFIXES = ("py", "mjs", "js", "ts", "sh")
IGNORED = ("node_modules", "cdk.out", "__pycache__", "npa_workflow.egg-info")
# Citations of documents kept outside this repository: the architecture notes and language reference the project
# started from (numbered decisions and sections, `§`) and the seeds' guides. No document here is numbered so.
_OUTSIDE = re.compile(r"§|\blanguage reference\b|\bthe reference's\b|\barchitecture decision\b|"
                      r"\bdecision \d+\b(?=\)|,|;|\.)|\boperator guide\b|\bseeds\b|/work/|\bshared/", re.IGNORECASE)
_BACKTICKED = re.compile(r"`+([^`\n]+?)`+")
# A file name as prose writes it: folders, a name, a known extension; not part of a URL or of a longer word.
_PATH = re.compile(r"(?<![\w/.:~$<{-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:md|py|mjs|js|ts|json|ya?ml|toml|sh|html|css|txt))"
                   r"(?![\w/-])")
_DOTTED = re.compile(r"^(?:[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)+$")
# A dotted name's trailing call or signature: `engine.start.start_run(...)` names `engine.start.start_run`.
_CALL = re.compile(r"\(.*\)$")


@dataclass(frozen=True)
class Source:
    """One text that may cite: a document (`path` is the file) or a module's docstring."""

    path: Path
    text: str
    line: int = 1  # the first line of `text` in `path`


def _repo_folders() -> frozenset[str]:
    return frozenset(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))


@cache
def _repo_file_names() -> frozenset[str]:
    return frozenset(path.name for path in _walk(REPO))


def _walk(root: Path, suffix: str = "") -> list[Path]:
    """The files under `root` (ending in `suffix`), sorted, without the folders of tools and caches."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in IGNORED and not d.startswith(".")]
        found += [Path(folder) / name for name in files if name.endswith(suffix)]
    return sorted(found)


def _package_names() -> frozenset[str]:
    return frozenset(p.stem for p in PACKAGE.iterdir()
                     if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.stem != "__init__"))


def _where(source: Source, offset: int) -> str:
    line = source.line + source.text.count("\n", 0, offset)
    return f"{source.path.relative_to(REPO)}:{line}"


def _path_problem(source: Source, ref: str) -> str | None:
    ref = ref.removeprefix("./")
    if any(c in ref for c in "<>*{}…"):
        return None
    if ref.endswith(".md"):
        here = source.path.parent
        if any((base / ref).is_file() for base in (REPO, here, REPO / "docs")):
            return None
        return f"names the document {ref!r}, which is not in this repository"
    if "/" not in ref:
        # A bare name of code (`decisions.py`, `console.js`) is a file somewhere in the repository; a bare data
        # file name (`serve.json`, `tools.yaml`) is what a run or a user writes, not a citation.
        if ref.rsplit(".", 1)[-1] in CODE_SUFFIXES and ref not in _repo_file_names():
            return f"names the file {ref!r}, which no folder of this repository holds"
        return None
    first = ref.split("/", 1)[0]
    if first in _repo_folders():
        return None if (REPO / ref).exists() else f"names {ref!r}, which is not in this repository"
    if first in _package_names():
        return None if (PACKAGE / ref).exists() else f"names {ref!r}, which is not a file of the package"
    return None


@cache
def _module_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _defined_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module or class body binds (definitions, assignments, imports), each with its node."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Name):
                        names[t.id] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):  # `if TYPE_CHECKING:`, `try: import …`
            inner = list(node.body) + list(getattr(node, "orelse", [])) + list(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                inner += handler.body
            names.update(_defined_names(inner))
    return names


def _instance_names(cls: ast.ClassDef) -> set[str]:
    """Attributes a class's methods set on `self` (`self.pump = …`)."""
    found = set()
    for node in ast.walk(cls):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found.add(target.attr)
    return found


def _module_file(root: Path, parts: list[str]) -> Path | None:
    path = root.joinpath(*parts)
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


def _dotted_problem(ref: str) -> str | None:
    ref = _CALL.sub("", ref.strip())
    if not _DOTTED.match(ref) or _PATH.fullmatch(ref):  # `stack_client.py` is a file name: `_path_problem`
        return None
    parts = ref.split(".")
    if parts[0] == "npa_workflow":
        root, parts = PACKAGE, parts[1:]
    elif parts[0] == "infra":
        root, parts = REPO / "infra", parts[1:]
    elif parts[0] in _package_names():
        root = PACKAGE
    else:
        return None  # not a module of ours: `boto3.client`, `run.id`, `os.environ.setdefault`
    if not parts:
        return None
    # The longest prefix that is a module; the rest are names defined in it.
    for split in range(len(parts), 0, -1):
        module = _module_file(root, parts[:split])
        if module is not None:
            break
    else:
        return f"names {ref!r}, but there is no module {'.'.join(parts[:1])!r} of the package"
    names = _defined_names(_module_tree(module).body)
    scope = f"module {'.'.join(parts[:split])!r}"
    for name in parts[split:]:
        node = names.get(name)
        if node is None:
            return f"names {ref!r}, but {scope} defines no {name!r}"
        if isinstance(node, ast.ClassDef):
            names = _defined_names(node.body)
            names.update({attr: node for attr in _instance_names(node)})
            scope = f"class {name!r}"
        else:
            return None  # a function, a constant or an import: what it holds is not followed
    return None


def problems(source: Source) -> list[str]:
    """Every reference of `source` that does not resolve, as `file:line: what`."""
    found: list[tuple[int, str]] = []  # (offset, problem)
    for match in _PATH.finditer(source.text):
        if (problem := _path_problem(source, match.group(1))) is not None:
            found.append((match.start(1), problem))
    for match in _BACKTICKED.finditer(source.text):
        if (problem := _dotted_problem(match.group(1))) is not None:
            found.append((match.start(1), problem))
    for match in _OUTSIDE.finditer(source.text):
        found.append((match.start(), f"cites {match.group()!r}, a document outside this repository (cite a docs/ "
                                     "page, or say the fact)"))
    return [f"{_where(source, offset)}: {problem}" for offset, problem in sorted(found)]


# A module's docstring: its first statement, after comments and blank lines (read without parsing the whole file).
_MODULE_DOCSTRING = re.compile(r'\A(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*([rRuU]?("""|\'\'\')(?:.|\n)*?\2)')


def _docstring_sources() -> list[Source]:
    sources = []
    for root in DOCSTRING_ROOTS:
        for path in _walk(root, ".py"):
            text = path.read_text(encoding="utf-8")
            match = _MODULE_DOCSTRING.match(text)
            if match:
                doc = ast.literal_eval(match.group(1))
                sources.append(Source(path, doc, 1 + text.count("\n", 0, match.start(1))))
    return sources


def _document_sources() -> list[Source]:
    paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return [Source(p, p.read_text(encoding="utf-8")) for p in paths]


def test_the_documents_cite_only_what_the_repository_holds() -> None:
    broken = [p for source in _document_sources() for p in problems(source)]
    assert not broken, "\n".join(broken)


def test_module_docstrings_cite_only_what_the_repository_holds() -> None:
    sources = _docstring_sources()
    assert len(sources) > 100  # the package's modules were found
    broken = [p for source in sources for p in problems(source)]
    assert not broken, "\n".join(broken)


def test_the_check_finds_a_broken_reference_of_each_kind() -> None:
    """The checker itself: each kind of broken reference is reported, and its working twin is not."""
    doc = Source(REPO / "docs" / "local.md", "\n".join([
        "See docs/architecture.md and [decisions](decisions.md).",       # fine: from the root, from docs/
        "See ARCHITECTURE.md, decision 8.",                             # a document of another repository
        "Code: `local_jobs/executor.py`, `local_jobs/no_such.py`.",      # one package file, one missing
        "Tests: tests/e2e/test_gc.py and tests/e2e/test_nothing_here.py.",
        "Kept: `runs/<run-id>/meta.json`, `serve.json`, `jobs/x.log`.",  # what a run writes: not checked
        "`engine.start.start_run`, `local.moto_lambda`, `engine.start.no_such_function`,",
        "`embedded_aws.durable_aws.DurableAws.item_written`, `embedded_aws.durable_aws.DurableAws.nope`,",
        "`npa_workflow.local_jobs.job_wrapper`, `boto3.client`, `run.id`.",
    ]))
    found = problems(doc)
    # line 2 twice: the file name, and the numbered decision it cites
    assert [p.split(": ", 1)[0] for p in found] == ["docs/local.md:2", "docs/local.md:2", "docs/local.md:3",
                                                     "docs/local.md:4", "docs/local.md:6", "docs/local.md:6",
                                                     "docs/local.md:7"]
    text = "\n".join(found)
    for broken in ("ARCHITECTURE.md", "local_jobs/no_such.py", "tests/e2e/test_nothing_here.py",
                   "local.moto_lambda", "engine.start.no_such_function", "DurableAws.nope"):
        assert broken in text, broken
    for fine in ("docs/architecture.md", "decisions.md'", "local_jobs/executor.py'", "test_gc.py",
                 "engine.start.start_run'", "item_written'", "job_wrapper", "boto3", "run.id"):
        assert fine not in text, fine
