"""Safe YAML loading with limits, so a hostile file fails fast with a clear error.

PyYAML's safe loader already refuses arbitrary objects; what it does not bound is size, how
deep documents nest, and how far aliases expand ("billion laughs"). Aliases are shared
nodes in the composed graph, so we measure the *expanded* size and depth with memoisation
instead of building it. We also refuse what PyYAML lets through silently: a repeated key
(the last one would win) and a key that is not a string (`on:` reads as `True`).

The limits (README "Limits", docs/faults.md): at most `max_bytes` (1 MiB) — checked on the bytes, before
anything is decoded or parsed; at most `max_depth` (64) levels of nesting and `max_expanded_nodes`
(200 000) nodes with every alias expanded — checked while parsing, before a node is constructed; and at
most `max_seconds` (10 s) of parsing, so no document, whatever its shape, holds a caller longer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from npa_workflow.errors import SpecError

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Limits:
    max_bytes: int = 1024 * 1024
    max_depth: int = 64
    max_expanded_nodes: int = 200_000
    max_seconds: float = 10.0


DEFAULT_LIMITS = Limits()


class _LimitExceeded(Exception):
    def __init__(self, message: str, hint: str = "flatten the document") -> None:
        super().__init__(message)
        self.hint = hint


class _KeyNotString(Exception):
    def __init__(self, key_node: Node) -> None:
        mark = key_node.start_mark
        text = key_node.value if isinstance(key_node, ScalarNode) else "(a collection)"
        super().__init__(f"line {mark.line + 1}, column {mark.column + 1}: mapping key {text} is not a string")
        self.hint = f"quote the key: '{text}'" if isinstance(key_node, ScalarNode) else "use a string key"


# libyaml is several times faster; the pure-Python loader behaves the same where it is missing.
_BASE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=deep) if isinstance(key_node, ScalarNode) else None
            if not isinstance(key, str):
                raise _KeyNotString(key_node)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _time_up(limits: Limits, started: float) -> None:
    if time.monotonic() - started > limits.max_seconds:
        raise _LimitExceeded(f"parsing took longer than {limits.max_seconds:g} s",
                             "make the document smaller and simpler")


def _check_depth(text: str, limits: Limits, started: float) -> None:
    """Composing recurses once per level: measure nesting on the (iterative) event stream first."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=_BASE_LOADER)):
        if count % 4096 == 0:
            _time_up(limits, started)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise _LimitExceeded(f"nesting deeper than {limits.max_depth} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_expansion(root: Node, limits: Limits, started: float) -> None:
    """Raise _LimitExceeded if the document, with every alias expanded, is too big, too deep or
    refers to itself. Each node is measured once, so this is linear in the composed graph."""
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, height)
    active: set[int] = set()

    def measure(node: Node, depth: int) -> tuple[int, int]:
        if depth > limits.max_depth:
            raise _LimitExceeded(f"nesting deeper than {limits.max_depth} levels (counting aliases)")
        key = id(node)
        if key in active:
            raise _LimitExceeded("an alias refers to a node that contains it", "remove the self-reference")
        if key not in measured:
            if len(measured) % 4096 == 0:
                _time_up(limits, started)
            active.add(key)
            if isinstance(node, SequenceNode):
                children = list(node.value)
            elif isinstance(node, MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = []
            size, height = 1, 0
            for child in children:
                child_size, child_height = measure(child, depth + 1)
                size += child_size
                height = max(height, child_height + 1)
                if size > limits.max_expanded_nodes:
                    raise _LimitExceeded(f"expands to more than {limits.max_expanded_nodes} nodes",
                                         "do not nest aliases that multiply the document")
            active.discard(key)
            measured[key] = (size, height)
        size, height = measured[key]
        if depth + height > limits.max_depth:
            raise _LimitExceeded(f"nesting deeper than {limits.max_depth} levels (counting aliases)")
        return size, height

    measure(root, 0)


def _too_large(limits: Limits, file: str) -> SpecError:
    return SpecError.single("$", f"file is larger than {limits.max_bytes} bytes", "split the spec or trim it", file)


_SYNTAX_FIX = ("fix the YAML at that line: indent with spaces, put ': ' after each key, close every quote and "
               "bracket")


def _char_at(text: str, mark: Any) -> str:
    lines = text.splitlines()
    if mark is None or mark.line >= len(lines) or mark.column >= len(lines[mark.line]):
        return ""
    return lines[int(mark.line)][int(mark.column)]


def _syntax_problem(exc: yaml.MarkedYAMLError, text: str) -> tuple[str, str]:
    """(message, fix) for a YAML syntax error, in words a person can act on."""
    mark = exc.problem_mark or exc.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = exc.problem or exc.context or "syntax error"
    opened = (f" opened at line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
              if exc.context_mark is not None and exc.context_mark is not exc.problem_mark else "")
    if "nesting depth" in problem:  # libyaml's own bound (1000 levels) is met before ours on flow collections
        return f"YAML rejected{where}: nesting deeper than {DEFAULT_LIMITS.max_depth} levels", "flatten the document"
    if "cannot start any token" in problem:
        char = _char_at(text, exc.problem_mark)
        if char == "\t":
            return (f"not valid YAML{where}: a tab character; YAML indentation must be spaces",
                    "replace the tab with spaces (for example 2 per level)")
        what = f"{char!r} cannot start a value" if char else problem
        return f"not valid YAML{where}: {what}", "quote the value (put it in double quotes)"
    if exc.context and exc.problem and exc.context not in problem:
        problem = f"{problem} ({exc.context}{opened})"
    message = f"not valid YAML{where}: {problem}"
    if "duplicate key" in problem:
        return message, "keep one of the two keys (the second would silently win)"
    if "quoted scalar" in problem:
        return message, f"close the quote{opened}"
    if "flow sequence" in problem or "flow mapping" in problem:
        return message, f"close the bracket{opened} (or quote a value that contains ',', '[' or '{{')"
    if "mapping values are not allowed" in problem:
        return message, "quote a value that contains ': ', or start the nested mapping on its own line"
    if "block" in problem or "expected <block end>" in problem:
        return message, "indent this line like the other entries of the same list or mapping"
    return message, _SYNTAX_FIX


def load_yaml_bytes(body: bytes, file: str = "", limits: Limits = DEFAULT_LIMITS) -> Any:
    """`load_yaml_text` for raw bytes (an uploaded object): the size is checked before anything is decoded."""
    if len(body) > limits.max_bytes:
        raise _too_large(limits, file)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError.single("$", f"file is not UTF-8 text (byte {exc.start})", "save it as UTF-8", file) from None
    return load_yaml_text(text, file, limits)


def load_yaml_text(text: str, file: str = "", limits: Limits = DEFAULT_LIMITS) -> Any:
    """Parse one YAML document. Empty (or null) → {}. Raises SpecError naming the file and the reason."""
    if len(text) > limits.max_bytes or len(text.encode("utf-8", errors="replace")) > limits.max_bytes:
        raise _too_large(limits, file)
    try:
        document = _parse(text, limits)
    except _LimitExceeded as exc:
        raise SpecError.single("$", f"YAML rejected: {exc}", exc.hint, file) from None
    except _KeyNotString as exc:
        raise SpecError.single("$", str(exc), exc.hint, file) from None
    except yaml.MarkedYAMLError as exc:
        message, fix = _syntax_problem(exc, text)
        raise SpecError.single("$", message, fix, file) from None
    except yaml.reader.ReaderError as exc:  # a control character (NUL, …): PyYAML's message spans two lines
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        character = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise SpecError.single("$", f"not valid YAML at line {line}, column {column}: control character "
                               f"U+{ord(character):04X}", "remove it (YAML allows no control characters "
                               "besides tab and line breaks)", file) from None
    except yaml.YAMLError as exc:
        raise SpecError.single("$", f"not valid YAML: {exc}", _SYNTAX_FIX, file) from None
    except RecursionError:
        raise SpecError.single("$", f"YAML rejected: nesting deeper than {limits.max_depth} levels",
                               "flatten the document", file) from None
    return {} if document is None else document


def _parse(text: str, limits: Limits) -> Any:
    started = time.monotonic()
    _check_depth(text, limits, started)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, limits, started)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Any:
    p = Path(path)
    file = str(path)
    try:
        size = p.stat().st_size
        if size > limits.max_bytes:
            raise _too_large(limits, file)
        with p.open("rb") as fh:  # bounded read: a device or pipe (/dev/zero, `<(…)`) has no size to check first
            body = fh.read(limits.max_bytes + 1)
        if len(body) > limits.max_bytes:
            raise _too_large(limits, file)
    except FileNotFoundError:
        raise SpecError.single("$", "file not found", "check the path (it is relative to the current directory)",
                               file) from None
    except IsADirectoryError:
        raise SpecError.single("$", "is a directory, not a file", "name the .yaml file itself, not its folder",
                               file) from None
    except OSError as exc:
        raise SpecError.single("$", f"cannot read file: {exc.strerror}",
                               "check that the file exists and is readable by you", file) from None
    return load_yaml_bytes(body, file, limits)
