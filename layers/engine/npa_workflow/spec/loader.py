"""Safe YAML loading with limits, so a hostile file fails fast with a clear error.

PyYAML's safe loader already refuses arbitrary objects; what it does not bound is size, how
deep documents nest, and how far aliases expand ("billion laughs"). Aliases are shared
nodes in the composed graph, so we measure the *expanded* size and depth with memoisation
instead of building it. We also refuse what PyYAML lets through silently: a repeated key
(the last one would win) and a key that is not a string (`on:` reads as `True`).
"""

from __future__ import annotations

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


def _check_depth(text: str, limits: Limits) -> None:
    """Composing recurses once per level: measure nesting on the (iterative) event stream first."""
    depth = 0
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.max_depth:
                raise _LimitExceeded(f"nesting deeper than {limits.max_depth} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _check_expansion(root: Node, limits: Limits) -> None:
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
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise SpecError.single("$", f"not valid YAML{where}: {problem}", "", file) from None
    except yaml.YAMLError as exc:
        raise SpecError.single("$", f"not valid YAML: {exc}", "", file) from None
    return {} if document is None else document


def _parse(text: str, limits: Limits) -> Any:
    _check_depth(text, limits)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, limits)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml_file(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Any:
    p = Path(path)
    file = str(path)
    try:
        if p.stat().st_size > limits.max_bytes:
            raise _too_large(limits, file)
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise SpecError.single("$", "file not found", "check the path", file) from None
    except UnicodeDecodeError as exc:
        raise SpecError.single(
            "$", f"file is not UTF-8 text (byte {exc.start})", "save it as UTF-8", file
        ) from None
    except OSError as exc:
        raise SpecError.single("$", f"cannot read file: {exc.strerror}", "", file) from None
    return load_yaml_text(text, file, limits)
