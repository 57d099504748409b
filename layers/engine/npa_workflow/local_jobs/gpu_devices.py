"""Which GPUs this machine has: a small port whose real reader runs `nvidia-smi -L`.

`nvidia-smi -L` prints one line per device, numbered in PCI bus order::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5d1c0a8e-…)

The local executor gives each job its own devices by these numbers (`local_jobs.executor`, docs/local.md). A
machine without the tool, or whose driver does not answer (`nvidia-smi` exits non-zero, e.g. "couldn't
communicate with the NVIDIA driver"), has no GPUs for us: jobs then run without any device allocation.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Gpu", "GpuReader", "NvidiaSmi", "parse_nvidia_smi_list"]

_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)\s]+)\s*\))?\s*$")
_TIMEOUT_S = 10.0
# GPUs do not come and go during a run: one read per nvidia-smi executable (and version of it) per process.
_CACHE: dict[tuple[str, int], list[Gpu]] = {}


@dataclass(frozen=True)
class Gpu:
    index: int  # nvidia-smi's number: PCI bus order (jobs get CUDA_DEVICE_ORDER=PCI_BUS_ID to match it)
    name: str
    uuid: str  # stable across reboots and renumbering: names the device's lock file

    @property
    def lock_name(self) -> str:
        return self.uuid or f"index-{self.index}"


class GpuReader(Protocol):
    def gpus(self) -> list[Gpu]: ...


def parse_nvidia_smi_list(text: str) -> list[Gpu]:
    """The devices of `nvidia-smi -L` output; MIG lines (indented `MIG …`) and other lines are skipped."""
    found: dict[int, Gpu] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip()) if line[:1] not in (" ", "\t") else None
        if match:
            index = int(match.group(1))
            found.setdefault(index, Gpu(index, match.group(2), match.group(3) or ""))
    return [found[i] for i in sorted(found)]


class NvidiaSmi:
    """The real reader: `nvidia-smi -L` found on PATH, read once per (executable, modification time)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path  # the PATH to search; None: this process's

    def gpus(self) -> list[Gpu]:
        exe = shutil.which("nvidia-smi", path=self.path if self.path is not None else os.environ.get("PATH"))
        if exe is None:
            return []
        try:
            key = (exe, os.stat(exe).st_mtime_ns)
        except OSError:
            return []
        if key not in _CACHE:
            _CACHE[key] = self._read(exe)
        return list(_CACHE[key])

    @staticmethod
    def _read(exe: str) -> list[Gpu]:
        try:
            done = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError):
            return []
        return parse_nvidia_smi_list(done.stdout) if done.returncode == 0 else []
