"""Mutations of moto speed-ups 2, 5 and 11 (`embedded_aws/moto_speedups.py`), each run against
tests/unit/test_moto_speedups.py: every mutation must fail a test (a cache that ignores what it must not).

    .venv/bin/python scripts/mutate_moto_speedups.py [NAME ...]

Each mutation is written into the module, the test file run, and the module restored (also on Ctrl-C).
Exit status 1 if a mutation survived.
"""

from __future__ import annotations

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
    # 11: the verdict of the expression's own checks carried to other names, other table keys, other case
    "11-names-ignored": (_NAMES, "names = ()"),
    "11-keys-ignored": ("return id(expression), names, tuple(self.table.table_key_attrs)",
                        "return id(expression), names, ()"),
    "11-names-case": (_NAMES, "names = tuple(sorted((k, v.lower()) for k, v in "
                              "(self.expression_attribute_names or {}).items()))"),
    # 5: one parse for texts that differ in a name's case
    "5-case": (_UPDATE, """        def cached(cls: type, expression_str: str) -> Any:
            return parsed(cls, expression_str.lower())"""),
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
            result = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", TESTS],
                                    capture_output=True, text=True, cwd=MODULE.parents[4])
            failed = [line.split("::", 1)[1].split(" ")[0] for line in result.stdout.splitlines()
                      if line.startswith("FAILED")]
            print(f"{name}: {'killed by ' + ', '.join(failed) if failed else 'SURVIVED'}")
            if not failed:
                survived.append(name)
    finally:
        MODULE.write_text(original)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
