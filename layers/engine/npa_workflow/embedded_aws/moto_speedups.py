"""Speed, not behaviour: where moto 5.2.5 spends the twin's time for nothing, the same result, computed faster.

Each speed-up names its seam and why the result is the same; `moto_speedups()` applies them all for as long as a
local stack lives (moto's classes are process-wide). `tests/unit/test_moto_speedups.py` compares each with moto's
own path. Figures: `bench/local_overhead.py`.

1. DynamoDB responses without a shape walk per attribute value. moto serializes every response by walking the
   operation's output shape, and for each member of each structure it searches the value under up to a dozen
   candidate names (`XFormedAttributePicker`: the model's name, its snake_case form, shape-name and prefix
   aliases). A DynamoDB item is a map of `AttributeValue` structures of ten members each: a `Query` of 20 ledger
   items cost about 100 ms of CPU in that search alone, and the ledger is read and written at every wave.
   An `AttributeValue` in a DynamoDB result is already in wire form (`dynamo_to_dict`): a dict keyed by its type
   codes (`S`, `N`, `B`, `SS`, `NS`, `BS`, `M`, `L`, `NULL`, `BOOL`). For such a dict the search can only find
   the exact key (no candidate alias of a type code is ever a key of it), so it is written directly, each member
   converted as the walk's type serializers do (strings through the same string rule, blobs base64-encoded, sets
   and lists item by item, `M` and `L` recursively, `NULL`/`BOOL` as they are; a `None` member, map entry or list
   item handled as the walk handles it). Anything else (a key that is not a type code, a value of another type)
   goes through moto's own walk. Seam: `moto.core.serialize.BaseJSONSerializer._serialize_type_structure(self,
   serialized, value, shape, key)`, for DynamoDB's `AttributeValue` shape only.
2. A JSONPath parsed once per path. moto's interpreter calls `jsonpath_ng.parse(path)` at every evaluation of an
   `InputPath`, `ResultPath`, `TimeoutSecondsPath`, `"x.$"` binding…, and each call builds a new PLY parser
   (its grammar tables read anew): milliseconds per path, several paths per Task. A parsed `JSONPath` is an
   immutable expression tree (`find`/`update` read it, never change it), so the parse of a path string is kept
   (bounded) and shared. Seams: the `parse` names imported by `moto.stepfunctions.parser.asl.utils.json_path`
   and `...asl.component.common.path.result_path`.
3. A definition parsed once, not twice. `CreateStateMachine` parses the definition to validate it and throws the
   program away; the execution's worker parses the same text again (ANTLR: the larger part of a second for a
   20-state machine). The validation's program, never evaluated, is kept for the first execution of that
   definition (used once: a program is never shared between two executions). Seams:
   `StepFunctionsParserBackend._validate_definition(definition)` and
   `ExecutionWorker._get_evaluation_entrypoint(self)`.
4. The interpreter's SDK clients made once. moto's interpreter makes a new boto3 client for every Lambda Task it
   invokes and every Distributed Map item list it reads (`boto_client_for`: ~4 ms of CPU each). A botocore
   client is thread-safe and holds nothing of a call, so one is kept per what moto's `boto_client_for` reads —
   region, service, `MOTO_PORT` (read at every call, as moto reads it: a new server port gets new clients) and
   whether `mock_aws` intercepts (its `state_credentials` argument is unused in 5.2.5) — and reused. Seams: the
   `boto_client_for` names imported by `...state_task.lambda_eval_utils` and
   `...state_map.item_reader.eval.resource_eval_s3`.
5. An update expression parsed once per text. moto tokenizes and parses a DynamoDB `UpdateExpression` twice per
   `UpdateItem` (the handler reads which names and values it uses; the backend validates and applies it), and
   the ledger sends the same few expressions at every wave. The parse depends on the text only, and its AST is
   never changed by its users: the handler only reads it (`find_clauses`), the backend's validator works on a
   deep copy (`Validator.__init__`). So the AST of a text is kept (bounded) and shared; a text that fails to
   parse fails every time, as before (an exception is not kept). Seam:
   `moto.dynamodb.parsing.expressions.UpdateExpressionParser.make(cls, expression_str)`.
6. The backend of a host found once. moto's server looks up which service a request is for at every request:
   the host it infers from the request's signature is checked against a listing of moto's package folder (a
   `listdir` and a `stat` per entry, about 150) and then against every service's URL patterns. The answer
   depends on the host text only (the folder and the patterns are fixed for the process), so a host's backend,
   once found, is kept (bounded); a host that finds none is looked up each time, as before (moto prints a hint
   for it). Seam: `moto.moto_server.werkzeug_app.DomainDispatcherApplication.get_backend_for_host(self, host)`.
7. A condition expression tokenized once per text. Each `ConditionExpression` (every conditional write of the
   ledger) and `FilterExpression` is tokenized by a loop that builds its pattern list anew for every token. The
   tokens depend on the text only and are immutable (named tuples whose `children` lists the later stages read
   and never change: they build new nodes); the stages after it (names and values substituted, the tree built)
   run at every call as before. So the tokens of a text are kept (bounded) and each parse gets its own deque of
   them; a text that does not tokenize raises every time. Seam:
   `moto.dynamodb.comparisons.ConditionExpressionParser._lex_condition_expression(self)`.
8. A table query reads its partition, not the whole table. moto answers a `Query` on a table's key (not an index)
   by collecting and sorting every item of the table, then keeping those of the asked partition and sorting them
   by sort key: O(items of the table) per query, four queries per wave of a run whose ledger grows by an item
   or two per wave. Where the table has a sort key, the items of one partition are exactly those moto keeps in
   that partition's bucket, so while its own `Table.query` runs for a key query, the items it collects are that
   bucket's, sorted by sort key (the order moto's sort of the whole table gives them). Everything after (the
   key condition, limits, pages, filters, projections, copies) is moto's own code. Index queries are left as they
   are. The swap is per thread (the server answers requests on several). Seams: `Table.query(self, hash_key,
   ...)` and `Table.all_items(self)` of `moto.dynamodb.models.table`.
9. A handler's action names listed once per class. To find the method of a request's action, moto lists the
   functions of the service's response class with `inspect.getmembers` at every request (its whole class tree,
   ~10 % of a `GetItem`'s CPU). The functions of a class are fixed once it is defined (the twin's patches
   replace methods, never add or remove one), so the list is kept per class (bounded) and a copy handed out.
   Seam: the `method_names_from_class` name imported by `moto.core.responses`.
10. An update expression's validation walks without rebuilding its tables. moto validates and applies an
   `UpdateExpression` with ten tree walks per `UpdateItem`; at every node of every walk the walker calls its
   `_processing_map()` twice (which node types it handles, and with which of its methods), building a new dict of
   bound methods each time. Every walker's map is a literal of its own methods, the same at every call, so it is
   built once per walker (a walker lives for one validation) and read from there. Seams:
   `DepthFirstTraverser.nodes_to_be_processed(self)` and `DepthFirstTraverser.process(self, node)` of
   `moto.dynamodb.parsing.ast_nodes`.
11. An update expression's own checks passed once. Three of those walks only check the expression and change
   nothing: at most one clause of each kind (`ActionCountValidator`, which searches the tree three times), no two
   actions on overlapping paths (`OverlappingPathsValidator`, with the attribute names) and no key attribute
   updated (`UpdateHashRangeKeyValidator`, with the names and the table's keys). Their verdict depends on the
   expression (one shared AST per text: speed-up 5), its attribute names and the table's key attributes, never on
   the item or the values. Once they passed for such a triple they are not run again for it; a triple that fails
   is checked, and fails, every time. The other walks (values, paths resolved against the item, functions,
   types, empty keys) run at every update. Seams: `UpdateExpressionValidator.get_ast_processors`, and
   `Validator.__init__` and `Validator.validate` (its base's) of `moto.dynamodb.parsing.validators`.
12. A projection of top-level names converts only those attributes. To project an item (a `Query` or `GetItem`
   with a `ProjectionExpression`: the watch reads ten fields of every active attempt), moto converts the whole item
   to plain JSON once per projected path, keeps the path's part of each conversion and converts the result back.
   For a path that is one plain name (no list index, no nested part), the part kept is exactly that attribute's
   conversion (or nothing when the item lacks it), so where every path is one, each named attribute is converted
   once, in the same order and merged the same way, and the same result converted back. Any other projection is
   moto's own. Seam: `moto.dynamodb.models.dynamo_type.Item.project(self, projection_expressions)`.
13. An update expression's tree copied at C speed. The validator works on a deep copy of the (shared: 5) tree,
   made by `copy.deepcopy`'s generic path for every node (reduce, reconstruct, a state dict per node): 0.5-0.7 ms
   per `UpdateItem` for the ledger's longer expressions. A node of moto's update-expression tree is a plain object
   (its `__dict__`: type, children, parent; no copy or pickle hooks of its own), and `pickle` rebuilds such an
   object the way that path does (`__reduce_ex__`: a new instance of its class, its state dict set; one object per
   original, parent links kept by its memo). So a tree is pickled once (kept, bounded, with the tree itself, so
   that its id names it; speed-up 5 never changes a shared tree) and each copy is unpickled (~0.15 ms). A tree
   that does not pickle is copied node by node as `copy.deepcopy` does it, in Python; anything but a tree node,
   or a call with a memo, goes to `copy.deepcopy`. Seam: the `deepcopy` name imported by
   `moto.dynamodb.parsing.validators`.
14. A walk decides per node type once. At every node of each of an update's walks, moto asks whether it is a node
   and whether the walker processes it (`isinstance` against the walker's node types — abstract classes, so each
   check goes through `ABCMeta.__instancecheck__`), and the processing picks its function by more such checks:
   about 2,000 checks per `UpdateItem`, a fifth of its CPU. Those answers depend on the walker's class and the
   node's class only (a walker's node types are the keys of its map, a literal of its class: speed-up 10; no class
   of the tree registers virtual subclasses or hooks the check), so they are kept per pair of classes, and the walk
   is moto's `traverse_node_recursively`: children first, in order, each after the walker's
   `pre_processing_of_child` hook, then the node processed and put in its parent's place. Seams:
   `DepthFirstTraverser.traverse_node_recursively(self, node, child_id)` and (with speed-up 10)
   `DepthFirstTraverser.process(self, node)`.
15. A condition parsed once per request. moto parses a write's `ConditionExpression` twice: the handler to check
   which names and values it uses, the backend to evaluate it — the same text with the very same names and values
   dicts (the handler passes its own on). The parse (tokens: 7; then names and values substituted, the tree
   built) depends on those three only, and its result is only evaluated, never changed. So each thread keeps its
   last parse with the objects it was made from (held, so their ids are not reused), and a parse of the same text
   with those same two objects gets that result and the same names and values found; any other parse is moto's.
   Seam: `moto.dynamodb.comparisons.ConditionExpressionParser.parse(self)`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import pickle
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from enum import Enum
from typing import Any

__all__ = ["backends_found_once", "conditions_parsed_once_per_request", "conditions_tokenized_once",
           "definition_parsed_once", "fast_attribute_values", "interpreter_clients_kept", "jsonpath_parsed_once",
           "method_names_listed_once", "moto_speedups", "partition_queries", "projections_of_names",
           "trees_copied_directly", "update_checks_passed_once", "update_expressions_parsed_once",
           "walkers_built_once", "walks_decided_per_type"]

JSONPATH_CACHE = 2048  # distinct path strings kept (a machine has a few dozen)
KEPT_PROGRAMS = 8  # validated definitions waiting for their first execution (serve deploys one per spec)
UPDATE_EXPRESSIONS = 512  # distinct update expression texts kept (the ledger sends a dozen)
KEPT_CLIENTS = 16  # (region, service, endpoint) triples: a run uses two or three
KEPT_HOSTS = 64  # request hosts (service.region.amazonaws.com): a stack uses half a dozen
CONDITION_EXPRESSIONS = 512  # distinct condition/filter texts kept (the ledger sends a dozen)
RESPONSE_CLASSES = 64  # moto response classes whose action names are kept (a stack uses five)
PASSED_UPDATES = 512  # (expression, names, table keys) whose own checks passed (the ledger sends a dozen)
PICKLED_TREES = 512  # update-expression trees kept pickled (one per text: the ledger sends a dozen)

_SHAPE = "AttributeValue"
_SERVICES = frozenset({"dynamodb"})


class _NotWireForm(Exception):  # noqa: N818 - a signal to fall back, not an error
    pass


def _string(value: Any) -> Any:
    # BaseJSONSerializer._serialize_type_string's rule, exactly
    if isinstance(value, Enum):
        value = value.value
    return str(value) if value not in [None, {}, []] else value


def _attribute_value(serializer: Any, value: Any, shape: Any) -> dict[str, Any]:
    if type(value) is not dict or not value.keys() <= shape.members.keys():
        raise _NotWireForm
    out: dict[str, Any] = {}
    for name, member in shape.members.items():
        if name not in value or value[name] is None:
            continue  # the walk skips a member it finds None (or does not find)
        if member.serialization.get("name", name) != name:
            raise _NotWireForm
        out[name] = _member(serializer, value[name], member)
    return out


def _member(serializer: Any, value: Any, shape: Any) -> Any:
    kind = shape.type_name
    if kind == "string":
        return _string(value)
    if kind == "blob":
        return serializer._base64(value)
    if kind == "boolean":
        return value
    if kind == "structure" and shape.name == _SHAPE:
        return _attribute_value(serializer, value, shape)
    if kind == "list" and isinstance(value, list):
        item = shape.member
        if item.type_name == "structure":
            # the walk appends the raw item when the item's serializer wrote nothing (a None item)
            return [None if v is None else _member(serializer, v, item) for v in value]
        return [_member(serializer, v, item) for v in value]
    if kind == "map" and isinstance(value, dict):
        # the walk leaves out an entry whose structure value is None
        return {k: _member(serializer, v, shape.value) for k, v in value.items()
                if not (v is None and shape.value.type_name == "structure")}
    raise _NotWireForm


@contextlib.contextmanager
def moto_speedups() -> Iterator[None]:
    with fast_attribute_values(), jsonpath_parsed_once(), definition_parsed_once(), interpreter_clients_kept(), \
            update_expressions_parsed_once(), backends_found_once(), conditions_tokenized_once(), partition_queries(), \
            method_names_listed_once(), walkers_built_once(), update_checks_passed_once(), projections_of_names(), \
            trees_copied_directly(), walks_decided_per_type(), conditions_parsed_once_per_request():
        yield


@contextlib.contextmanager
def fast_attribute_values() -> Iterator[None]:
    """While active, a DynamoDB `AttributeValue` in wire form is serialized directly (see the module doc)."""
    from moto.core.serialize import BaseJSONSerializer

    original = BaseJSONSerializer.__dict__["_serialize_type_structure"]

    def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if (key and shape.name == _SHAPE and type(value) is dict
                and self.operation_model.service_model.service_name in _SERVICES):
            try:
                out = _attribute_value(self, value, shape)
            except _NotWireForm:
                pass
            else:
                serialized[self.get_serialized_name(shape, key)] = out  # as `_default_serialize` does
                return
        original(self, serialized, value, shape, key)

    _serialize_type_structure.npa_fast = True  # type: ignore[attr-defined]
    if getattr(original, "npa_fast", False):  # already active (nested stacks in one process)
        yield
        return
    BaseJSONSerializer._serialize_type_structure = _serialize_type_structure  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseJSONSerializer._serialize_type_structure = original  # type: ignore[method-assign]


def _swap(target: Any, name: str, make: Any) -> Any:
    """Replace `target.name` with `make(original)` unless it is already ours; returns the undo (or None).
    A staticmethod or classmethod is read and put back as one (`__dict__`, not `getattr`); `make` gets its
    function."""
    raw = target.__dict__[name] if isinstance(target, type) else getattr(target, name)
    original = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    if getattr(original, "npa_speedup", False):
        return None
    replacement = make(original)
    (replacement.__func__ if isinstance(replacement, staticmethod | classmethod) else replacement).npa_speedup = True
    setattr(target, name, replacement)
    return lambda: setattr(target, name, raw)


@contextlib.contextmanager
def _swapped(*swaps: tuple[Any, str, Any]) -> Iterator[None]:
    """`_swap` each (target, name, make) for the block; undone in reverse order."""
    undo = [_swap(target, name, make) for target, name, make in swaps]
    try:
        yield
    finally:
        for step in reversed(undo):
            if step is not None:
                step()


@contextlib.contextmanager
def jsonpath_parsed_once() -> Iterator[None]:
    """Speed-up 2 (see the module doc)."""
    from moto.stepfunctions.parser.asl.component.common.path import result_path
    from moto.stepfunctions.parser.asl.utils import json_path

    def cached(parse: Any) -> Any:
        return functools.lru_cache(maxsize=JSONPATH_CACHE)(parse)

    with _swapped((json_path, "parse", cached), (result_path, "parse", cached)):
        yield


@contextlib.contextmanager
def definition_parsed_once() -> Iterator[None]:
    """Speed-up 3 (see the module doc). While moto validates a definition (its own code, its own errors), the
    program its parse returns is kept; the first execution of that text takes it instead of parsing again."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    kept: OrderedDict[str, Any] = OrderedDict()  # definition text -> its validated, never evaluated program
    lock = threading.Lock()
    validating = threading.local()

    def make_parse(original: Any) -> Any:
        def parse(definition: str) -> Any:
            parsed = original(definition)
            if getattr(validating, "on", False):
                with lock:
                    kept[definition] = parsed[0]
                    kept.move_to_end(definition)
                    while len(kept) > KEPT_PROGRAMS:
                        kept.popitem(last=False)
            return parsed
        return staticmethod(parse)

    def make_validate(original: Any) -> Any:
        def _validate_definition(definition: str) -> None:
            validating.on = True
            try:
                original(definition)
            finally:
                validating.on = False
        return staticmethod(_validate_definition)

    def make_entrypoint(original: Any) -> Any:
        def _get_evaluation_entrypoint(self: Any) -> Any:
            with lock:
                program = kept.pop(self._evaluation_details.state_machine_details.definition, None)
            return program if program is not None else original(self)
        return _get_evaluation_entrypoint

    with _swapped((AmazonStateLanguageParser, "parse", make_parse),
                  (StepFunctionsParserBackend, "_validate_definition", make_validate),
                  (ExecutionWorker, "_get_evaluation_entrypoint", make_entrypoint)):
        yield


@contextlib.contextmanager
def interpreter_clients_kept() -> Iterator[None]:
    """Speed-up 4 (see the module doc)."""
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval import resource_eval_s3
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

    def make(original: Any) -> Any:
        @functools.lru_cache(maxsize=KEPT_CLIENTS)
        def kept(region: str, service: str, port: str, stubbed: bool) -> Any:
            return original(region, service)

        def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
            return kept(region, service, str(moto_server_port()), bool(botocore_stubber.enabled))
        return boto_client_for

    with _swapped((lambda_eval_utils, "boto_client_for", make), (resource_eval_s3, "boto_client_for", make)):
        yield


@contextlib.contextmanager
def update_expressions_parsed_once() -> Iterator[None]:
    """Speed-up 5 (see the module doc)."""
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    def make(parse: Any) -> Any:
        @functools.lru_cache(maxsize=UPDATE_EXPRESSIONS)
        def parsed(cls: type, expression_str: str) -> Any:
            return parse(cls, expression_str)

        def cached(cls: type, expression_str: str) -> Any:
            return parsed(cls, expression_str)

        return classmethod(cached)

    with _swapped((UpdateExpressionParser, "make", make)):
        yield


@contextlib.contextmanager
def backends_found_once() -> Iterator[None]:
    """Speed-up 6 (see the module doc)."""
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    def make(find: Any) -> Any:
        found: OrderedDict[str, Any] = OrderedDict()
        lock = threading.Lock()

        def get_backend_for_host(self: Any, host: str | None) -> Any:
            if host is None:
                return find(self, host)
            with lock:
                if host in found:
                    return found[host]
            backend = find(self, host)
            if backend is not None:
                with lock:
                    found[host] = backend
                    while len(found) > KEPT_HOSTS:
                        found.popitem(last=False)
            return backend

        return get_backend_for_host

    with _swapped((DomainDispatcherApplication, "get_backend_for_host", make)):
        yield


@contextlib.contextmanager
def conditions_tokenized_once() -> Iterator[None]:
    """Speed-up 7 (see the module doc)."""
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser

    def make(lex: Any) -> Any:
        @functools.lru_cache(maxsize=CONDITION_EXPRESSIONS)
        def tokens(expression: str) -> tuple[Any, ...]:
            return tuple(lex(ConditionExpressionParser(expression, None, None)))

        def _lex_condition_expression(self: Any) -> Any:
            if not isinstance(self.condition_expression, str):
                return lex(self)
            return deque(tokens(self.condition_expression))

        return _lex_condition_expression

    with _swapped((ConditionExpressionParser, "_lex_condition_expression", make)):
        yield


_INDEX_NAME_AT = 6  # Table.query(self, hash_key, range_comparison, range_objs, limit, exclusive_start_key,
#                     scan_index_forward, projection_expressions, index_name, ...): index_name is args[6]


@contextlib.contextmanager
def partition_queries() -> Iterator[None]:
    """Speed-up 8 (see the module doc)."""
    from moto.dynamodb.models.table import Table

    asked = threading.local()  # (table, hash key) of the key query running on this thread, if any

    def make_query(query: Any) -> Any:
        def table_query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
            index_name = kwargs.get("index_name", args[_INDEX_NAME_AT] if len(args) > _INDEX_NAME_AT else None)
            if index_name or hash_key is None or not self.range_key_attr:
                return query(self, hash_key, *args, **kwargs)
            outer = getattr(asked, "partition", None)
            asked.partition = (self, hash_key)
            try:
                return query(self, hash_key, *args, **kwargs)
            finally:
                asked.partition = outer

        return table_query

    def make_all_items(all_items: Any) -> Any:
        def table_all_items(self: Any) -> Any:
            partition = getattr(asked, "partition", None)
            if partition is None or partition[0] is not self:
                return all_items(self)
            bucket = self.items.get(partition[1]) or {}  # .get: the buckets are a defaultdict
            return sorted(bucket.values(), key=lambda item: item.range_key)

        return table_all_items

    with _swapped((Table, "query", make_query), (Table, "all_items", make_all_items)):
        yield


@contextlib.contextmanager
def method_names_listed_once() -> Iterator[None]:
    """Speed-up 9 (see the module doc)."""
    from moto.core import responses

    def make(list_names: Any) -> Any:
        @functools.lru_cache(maxsize=RESPONSE_CLASSES)
        def listed(clazz: type) -> tuple[str, ...]:
            return tuple(list_names(clazz))

        def method_names_from_class(clazz: Any) -> list[str]:
            return list(listed(clazz)) if isinstance(clazz, type) else list_names(clazz)

        return method_names_from_class

    with _swapped((responses, "method_names_from_class", make)):
        yield


@contextlib.contextmanager
def walkers_built_once() -> Iterator[None]:
    """Speed-up 10 (see the module doc)."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser

    def make_kinds(kinds: Any) -> Any:
        def nodes_to_be_processed(self: Any) -> Any:
            built = self.__dict__.get("_npa_kinds")
            if built is None:
                built = self.__dict__["_npa_kinds"] = kinds(self)
            return built

        return nodes_to_be_processed

    def make_process(process: Any) -> Any:
        def process_node(self: Any, node: Any) -> Any:
            table = self.__dict__.get("_npa_processors")
            if table is None:
                table = self.__dict__["_npa_processors"] = tuple(self._processing_map().items())
            key = (type(self), type(node))  # speed-up 14: the processor's place, found once per pair of classes
            if key not in _CHOSEN:
                # moto's `process`, on the kept table: the first processor whose class the node is an instance of
                _CHOSEN[key] = next((i for i, (node_type, _) in enumerate(table) if isinstance(node, node_type)),
                                    None)
            index = _CHOSEN[key]
            return table[index][1](node) if index is not None else None

        return process_node

    with _swapped((DepthFirstTraverser, "nodes_to_be_processed", make_kinds),
                  (DepthFirstTraverser, "process", make_process)):
        yield


# (walker class, node class) -> (a node?, processed by that walker?) / the processor's place in its table. Finite:
# the classes of moto's walkers and tree nodes. (Filled concurrently, always with the same answer.)
_DECIDED: dict[tuple[type, type], tuple[bool, bool]] = {}
_CHOSEN: dict[tuple[type, type], int | None] = {}


@contextlib.contextmanager
def walks_decided_per_type() -> Iterator[None]:
    """Speed-up 14 (see the module doc; the processor choice per class is in speed-up 10's `process`)."""
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser, Node

    def make(traverse: Any) -> Any:
        def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
            key = (type(self), type(node))
            known = _DECIDED.get(key)
            if known is None:
                known = _DECIDED[key] = (isinstance(node, Node), isinstance(node, self.nodes_to_be_processed()))
            is_node, processed = known
            if is_node:  # moto's walk, with the two answers kept
                parent_node = node.parent
                if node.children is not None:
                    for i, child_node in enumerate(node.children):
                        self.pre_processing_of_child(node, i)
                        self.traverse_node_recursively(child_node, i)
                if processed:
                    node = self.process(node)
                    node.parent = parent_node
                    if parent_node:
                        parent_node.children[child_id] = node
            return node

        return traverse_node_recursively

    with _swapped((DepthFirstTraverser, "traverse_node_recursively", make)):
        yield


@contextlib.contextmanager
def update_checks_passed_once() -> Iterator[None]:
    """Speed-up 11 (see the module doc)."""
    from moto.dynamodb.parsing.validators import (
        ActionCountValidator,
        OverlappingPathsValidator,
        UpdateExpressionValidator,
        UpdateHashRangeKeyValidator,
        Validator,
    )

    own_checks = (ActionCountValidator, OverlappingPathsValidator, UpdateHashRangeKeyValidator)
    # id of the shared AST -> (the AST, kept so that its id is not reused, names, key attributes) that passed
    passed: OrderedDict[tuple[int, Any, Any], Any] = OrderedDict()
    lock = threading.Lock()

    def verdict_key(self: Any) -> tuple[int, Any, Any] | None:
        expression = self.__dict__.get("_npa_expression")
        if expression is None:
            return None
        names = tuple(sorted((self.expression_attribute_names or {}).items()))
        return id(expression), names, tuple(self.table.table_key_attrs)

    def make_init(init: Any) -> Any:
        def __init__(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - moto's name
            self.__dict__["_npa_expression"] = expression  # read by get_ast_processors, which init calls
            init(self, expression, *args, **kwargs)

        return __init__

    def make_processors(processors: Any) -> Any:
        def get_ast_processors(self: Any) -> Any:
            walkers = processors(self)
            key = verdict_key(self)
            with lock:
                known = key is not None and key in passed and passed[key] is self.__dict__["_npa_expression"]
            return [w for w in walkers if not isinstance(w, own_checks)] if known else walkers

        return get_ast_processors

    def make_validate(validate: Any) -> Any:
        def run_validate(self: Any) -> Any:
            result = validate(self)  # raises when a check fails: nothing is kept then
            key = verdict_key(self)
            if key is not None:
                with lock:
                    passed[key] = self.__dict__["_npa_expression"]
                    while len(passed) > PASSED_UPDATES:
                        passed.popitem(last=False)
            return result

        return run_validate

    with _swapped((Validator, "__init__", make_init),  # (defined on the base)
                  (UpdateExpressionValidator, "get_ast_processors", make_processors),
                  (Validator, "validate", make_validate)):  # (defined on the base; others have no verdict key)
        yield


_LIST_INDEX = re.compile(r"(.+)\[(\d+)\]$")  # moto's `find_nested_key` reads such a path part as a list element


@contextlib.contextmanager
def projections_of_names() -> Iterator[None]:
    """Speed-up 12 (see the module doc)."""
    from moto.dynamodb.models import dynamo_type

    def make(project: Any) -> Any:
        def project_names(self: Any, projection_expressions: list[list[str]]) -> Any:
            if not all(len(path) == 1 and not _LIST_INDEX.match(path[0]) for path in projection_expressions):
                return project(self, projection_expressions)
            result: dict[str, Any] = {}
            for (name,) in projection_expressions:
                attribute = self.attrs.get(name)
                if attribute is not None:  # as `find_nested_key([name], item.to_regular_json())` finds it
                    dynamo_type.merge_dicts(result, {name: dynamo_type.deserializer.deserialize(
                        attribute.to_regular_json())})
            return dynamo_type.Item(hash_key=self.hash_key, range_key=self.range_key,
                                    attrs=dynamo_type.serializer.serialize(result)["M"])

        return project_names

    with _swapped((dynamo_type.Item, "project", make)):
        yield


_ATOMS = frozenset({str, int, float, bool, type(None), bytes})


def _tree_copy(value: Any, memo: dict[int, Any], node_type: type) -> Any:
    """`copy.deepcopy(value, memo)` for a tree of moto's update-expression nodes (speed-up 13)."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    found = memo.get(id(value))
    if found is not None:
        return found
    if kind is list:
        copied_list: list[Any] = []
        memo[id(value)] = copied_list
        copied_list.extend(_tree_copy(item, memo, node_type) for item in value)
        return copied_list
    if kind is dict:
        copied_dict: dict[Any, Any] = {}
        memo[id(value)] = copied_dict
        for key, item in value.items():
            copied_dict[_tree_copy(key, memo, node_type)] = _tree_copy(item, memo, node_type)
        return copied_dict
    if isinstance(value, node_type) and getattr(kind, "__deepcopy__", None) is None:
        copied = kind.__new__(kind)
        memo[id(value)] = copied
        copied.__dict__.update({name: _tree_copy(item, memo, node_type) for name, item in value.__dict__.items()})
        return copied
    return copy.deepcopy(value, memo)


@contextlib.contextmanager
def trees_copied_directly() -> Iterator[None]:
    """Speed-up 13 (see the module doc)."""
    from moto.dynamodb.parsing import validators
    from moto.dynamodb.parsing.ast_nodes import Node

    pickled: OrderedDict[int, tuple[Any, bytes | None]] = OrderedDict()  # id -> (the tree, its pickle or None)
    lock = threading.Lock()

    def make(deepcopy: Any) -> Any:
        def tree_deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
            if not isinstance(value, Node) or memo is not None:
                return deepcopy(value, memo)
            with lock:
                kept = pickled.get(id(value))
                if kept is not None and kept[0] is value:
                    pickled.move_to_end(id(value))
                    blob = kept[1]
                else:
                    try:
                        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                    except (pickle.PicklingError, TypeError, AttributeError):
                        blob = None  # copied in Python, every time
                    pickled[id(value)] = (value, blob)
                    while len(pickled) > PICKLED_TREES:
                        pickled.popitem(last=False)
            return pickle.loads(blob) if blob is not None else _tree_copy(value, {}, Node)  # noqa: S301 - ours

        return tree_deepcopy

    with _swapped((validators, "deepcopy", make)):
        yield


@contextlib.contextmanager
def conditions_parsed_once_per_request() -> Iterator[None]:
    """Speed-up 15 (see the module doc)."""
    from moto.dynamodb.comparisons import ConditionExpressionParser

    last = threading.local()  # .kept: (text, names, values, result, names found, values found)

    def make(parse: Any) -> Any:
        def parse_once(self: Any) -> Any:
            text, names, values = (self.condition_expression, self.expression_attribute_names,
                                   self.expression_attribute_values)
            kept = getattr(last, "kept", None)
            if kept is not None and kept[0] == text and kept[1] is names and kept[2] is values:
                self.expr_attr_names_found.extend(kept[4])
                self.expr_attr_values_found.extend(kept[5])
                return kept[3]
            result = parse(self)  # raises for a bad expression: nothing is kept then
            last.kept = (text, names, values, result, list(self.expr_attr_names_found),
                         list(self.expr_attr_values_found))
            return result

        return parse_once

    with _swapped((ConditionExpressionParser, "parse", make)):
        yield
