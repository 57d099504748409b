"""botocore's data files (service models, endpoints) parsed once per process while the embedded stack lives.

Each botocore session has its own loader, and each loader parses the JSON files it needs anew: the stack's
process makes several sessions (the deploy's, the engine's clients', boto3's default one moto's interpreter
uses, one per moto backend asking which regions a service has), so `endpoints.json` was parsed four times and
the S3, Lambda, DynamoDB and Step Functions models three or four times each: about a third of a second of a
one-state `run`; and each loader lists the data folders (hundreds of services, a `stat` each) to know which
services exist. While :func:`sdk_models_parsed_once` is active, a loader's `load_data_with_path(name)` and
`list_available_services(type_name)` are shared by every loader of the same class that searches the same paths
with the same file loader and applies the same extras: each is the loader's own cached answer (botocore caches
them per loader), now cached per process. The models' only in-place change is the extras
merge (`ExtrasProcessor`, a recursive dict update): applying the same extras again gives the same model, so a
shared model is the model each loader would have built. moto's own loader (its data folder first, its
`moto` extras) has its own entries: its extras never reach the SDK's clients.

Seams: `botocore.loaders.Loader.load_data_with_path(self, name)` and `Loader.list_available_services(self,
type_name)`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["sdk_models_parsed_once"]

_cache: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def _shared(name: str, original: Any) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = (name, args, tuple(sorted(kwargs.items())), type(self), tuple(self.search_paths),
               tuple(self.extras_types), type(self.file_loader))
        with _lock:
            found = _cache.get(key)
        if found is None:
            found = original(self, *args, **kwargs)  # an error (DataNotFoundError) propagates, uncached
            with _lock:
                found = _cache.setdefault(key, found)
        return found

    method.__name__ = name
    method.npa_shared = True  # type: ignore[attr-defined]
    return method


_METHODS = ("load_data_with_path", "list_available_services")


@contextlib.contextmanager
def sdk_models_parsed_once() -> Iterator[None]:
    from botocore.loaders import Loader

    originals = {name: Loader.__dict__[name] for name in _METHODS}
    if any(getattr(f, "npa_shared", False) for f in originals.values()):  # already active (a nested stack)
        yield
        return
    for name, original in originals.items():
        setattr(Loader, name, _shared(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(Loader, name, original)
        with _lock:
            _cache.clear()
