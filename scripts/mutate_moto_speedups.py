"""Mutations of every moto speed-up (`embedded_aws/moto_speedups.py`, 1-15), each run against
tests/unit/test_moto_speedups.py: every mutation must fail a test. Most are a cache that ignores what it must not
(the data for a path, a name's case, the names or values of an expression, the table, the walker, the class); the
rest hand out what must not be shared (one program, one deque, one list, the original tree) or convert less.

    .venv/bin/python scripts/mutate_moto_speedups.py [NAME ...]

Each mutation is written into the module, the test file run, and the module restored (also on Ctrl-C).
Exit status 1 if a mutation survived.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODULE = Path(__file__).resolve().parents[1] / "layers/engine/npa_workflow/embedded_aws/moto_speedups.py"
TESTS = "tests/unit/test_moto_speedups.py"

_NAMES = "names = tuple(sorted((self.expression_attribute_names or {}).items()))"
_JSONPATH = """    def cached(parse: Any) -> Any:
        return functools.lru_cache(maxsize=JSONPATH_CACHE)(parse)"""
_UPDATE = """        def cached(cls: type, expression_str: str) -> Any:
            return parsed(cls, expression_str)"""

MUTATIONS = {
    # 1: an AttributeValue's list items written as they are (a blob set not base64-encoded); a None map entry kept
    "1-list-items-raw": ("""            return [None if v is None else _member(serializer, v, item) for v in value]
        return [_member(serializer, v, item) for v in value]""",
                         """            return [None if v is None else _member(serializer, v, item) for v in value]
        return list(value)"""),
    "1-none-entries-kept": ("""        return {k: _member(serializer, v, shape.value) for k, v in value.items()
                if not (v is None and shape.value.type_name == "structure")}""",
                            """        return {k: _member(serializer, v, shape.value) if v is not None else None
                for k, v in value.items()}"""),
    # 11: the verdict of the expression's own checks carried to other names, other table keys, other case
    "11-names-ignored": (_NAMES, "names = ()"),
    "11-keys-ignored": ("return id(expression), names, tuple(self.table.table_key_attrs)",
                        "return id(expression), names, ()"),
    "11-names-case": (_NAMES, "names = tuple(sorted((k, v.lower()) for k, v in "
                              "(self.expression_attribute_names or {}).items()))"),
    # 5: one parse for texts that differ in a name's case
    "5-case": (_UPDATE, """        def cached(cls: type, expression_str: str) -> Any:
            return parsed(cls, expression_str.lower())"""),
    # 3: the validated program handed to every execution; any validated program to an execution of another text
    "3-program-shared": ("program = kept.pop(self._evaluation_details.state_machine_details.definition, None)",
                         "program = kept.get(self._evaluation_details.state_machine_details.definition)"),
    "3-definition-ignored": ("program = kept.pop(self._evaluation_details.state_machine_details.definition, None)",
                             "program = kept.popitem()[1] if kept else None"),
    # 4: one client for every port, or every region
    "4-port-ignored": ("return kept(region, service, str(moto_server_port()), bool(botocore_stubber.enabled))",
                       'return kept(region, service, "", bool(botocore_stubber.enabled))'),
    "4-region-ignored": ("return kept(region, service, str(moto_server_port()), bool(botocore_stubber.enabled))",
                         'return kept("us-east-1", service, str(moto_server_port()), bool(botocore_stubber.enabled))'),
    # 6: the first host's backend for every host
    "6-host-ignored": ("""                if host in found:
                    return found[host]""", """                if found:
                    return next(iter(found.values()))"""),
    # 7: one token list for texts that differ in a name's case; one deque shared by every parse
    "7-case": ("return deque(tokens(self.condition_expression))",
               "return deque(tokens(self.condition_expression.lower()))"),
    "7-deque-shared": ("""            return tuple(lex(ConditionExpressionParser(expression, None, None)))""",
                       """            return lex(ConditionExpressionParser(expression, None, None))"""),
    # 8: the partition's items unsorted; another partition's; an index query read as a key query
    "8-unsorted": ("return sorted(bucket.values(), key=lambda item: item.range_key)", "return list(bucket.values())"),
    "8-partition-ignored": ("bucket = self.items.get(partition[1]) or {}",
                            "bucket = next(iter(self.items.values()), None) or {}"),
    "8-index-ignored": ("if index_name or hash_key is None or not self.range_key_attr:",
                        "if hash_key is None or not self.range_key_attr:"),
    # 9: one list for a class and its bases; the kept list handed out, not a copy
    "9-class-ignored": ("return list(listed(clazz)) if isinstance(clazz, type) else list_names(clazz)",
                        "return list(listed(clazz.__mro__[-2])) if isinstance(clazz, type) else list_names(clazz)"),
    "9-not-copied": ("""        def listed(clazz: type) -> tuple[str, ...]:
            return tuple(list_names(clazz))

        def method_names_from_class(clazz: Any) -> list[str]:
            return list(listed(clazz)) if isinstance(clazz, type) else list_names(clazz)""",
                     """        def listed(clazz: type) -> list[str]:
            return list_names(clazz)

        def method_names_from_class(clazz: Any) -> list[str]:
            return listed(clazz) if isinstance(clazz, type) else list_names(clazz)"""),
    # 10: one walker's table of node kinds or processors used by every walker
    "10-kinds-shared": ("""            built = self.__dict__.get("_npa_kinds")
            if built is None:
                built = self.__dict__["_npa_kinds"] = kinds(self)""",
                        """            built = kinds.__dict__.get("_npa_kinds")
            if built is None:
                built = kinds.__dict__["_npa_kinds"] = kinds(self)"""),
    "10-processors-shared": ("""            table = self.__dict__.get("_npa_processors")
            if table is None:
                table = self.__dict__["_npa_processors"] = tuple(self._processing_map().items())""",
                             """            table = process.__dict__.get("_npa_processors")
            if table is None:
                table = process.__dict__["_npa_processors"] = tuple(self._processing_map().items())"""),
    # 12: a list element read as a name; a name found in another case
    "12-list-index-as-name": ("if not all(len(path) == 1 and not _LIST_INDEX.match(path[0]) for path in "
                              "projection_expressions):",
                              "if not all(len(path) == 1 for path in projection_expressions):"),
    "12-case": ("attribute = self.attrs.get(name)",
                "attribute = next((v for k, v in self.attrs.items() if k.lower() == name.lower()), None)"),
    # 13: the first tree's pickle for every tree; the tree itself instead of a copy
    "13-tree-ignored": ("""                kept = pickled.get(id(value))
                if kept is not None and kept[0] is value:""",
                        """                kept = next(iter(pickled.values()), None)
                if kept is not None:"""),
    "13-not-copied": ("return pickle.loads(blob) if blob is not None else _tree_copy(value, {}, Node)",
                      "return value if blob is not None else _tree_copy(value, {}, Node)"),
    # 14: a walk's answers kept per node class only, whatever the walker
    "14-walker-ignored": ("""            key = (type(self), type(node))
            known = _DECIDED.get(key)""", """            key = (DepthFirstTraverser, type(node))
            known = _DECIDED.get(key)"""),
    "14-choice-walker-ignored": ("key = (type(self), type(node))  # speed-up 14",
                                 "key = (DepthFirstTraverser, type(node))  # speed-up 14"),
    # 15: a parse reused for other values, other names, a text in another case
    "15-values-ignored": ("kept[0] == text and kept[1] is names and kept[2] is values",
                          "kept[0] == text and kept[1] is names"),
    "15-names-ignored": ("kept[0] == text and kept[1] is names and kept[2] is values",
                         "kept[0] == text and kept[2] is values"),
    "15-case": ("kept[0] == text and kept[1] is names and kept[2] is values",
                "kept[0].lower() == text.lower() and kept[1] is names and kept[2] is values"),
    # 2: one parse for paths that differ in a name's case; what a path found kept instead of its parse
    "2-case": (_JSONPATH, """    def cached(parse: Any) -> Any:
        kept: dict[str, Any] = {}
        return lambda path: kept.setdefault(path.lower(), parse(path))"""),
    "2-data": (_JSONPATH, """    def cached(parse: Any) -> Any:
        found: dict[str, Any] = {}

        class Kept:
            def __init__(self, path: str) -> None:
                self.path, self.expr = path, parse(path)

            def find(self, data: Any) -> Any:
                return found.setdefault(self.path, self.expr.find(data))

            def __getattr__(self, name: str) -> Any:
                return getattr(self.expr, name)

        return Kept"""),
}


def _forget_bytecode() -> None:
    """A mutant and the original can share a size and a second of mtime: no compiled copy may stand for either."""
    for compiled in (MODULE.parent / "__pycache__").glob(f"{MODULE.stem}.*.pyc"):
        compiled.unlink(missing_ok=True)


def main(names: list[str]) -> int:
    original = MODULE.read_text()
    survived = []
    try:
        for name in names or list(MUTATIONS):
            before, after = MUTATIONS[name]
            if before not in original:
                print(f"{name}: the code it mutates is gone; update {__file__}")
                survived.append(name)
                continue
            MODULE.write_text(original.replace(before, after))
            _forget_bytecode()
            # -x: the first failing test kills it (the rest would only say so again)
            result = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-x", "-p", "no:cacheprovider",
                                     TESTS], env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                                    capture_output=True, text=True, cwd=MODULE.parents[4])
            failed = [line.split("::", 1)[1].split(" ")[0] for line in result.stdout.splitlines()
                      if line.startswith("FAILED")]
            print(f"{name}: {'killed by ' + ', '.join(failed) if failed else 'SURVIVED'}")
            if not failed:
                survived.append(name)
    finally:
        MODULE.write_text(original)
        _forget_bytecode()
    tried = len(names or MUTATIONS)
    print(f"{tried - len(survived)} of {tried} mutations fail a test")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
