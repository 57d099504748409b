"""Compute-hours of one run and their price: each step's resources × an assumed duration × a price table.

Pure. The spec says nothing about how long a step runs, so the duration is an assumption the caller
makes (`default_minutes`, with per-state overrides). A step's hours are

- per accelerator type: count × nodes × minutes / 60 (`accelerators: H100:2` on 2 nodes for 30 min =
  2 H100-hours);
- otherwise vCPU-hours: cpus × nodes × minutes / 60 (a `cpus: 4+` lower bound counts as 4; none: 1).

Prices are USD per accelerator-hour (or per vCPU-hour) of one instance, on demand. The default table
below is a small set of indicative list prices of GPU clouds, for an order of magnitude, not a quote:
give your own with a prices file (`accelerators: {H100: 2.1}`, `vcpu_hour: 0.03`). An accelerator the
table does not name is counted in hours and priced 0, and the estimate says so.

The run's duration (for the watch schedule's ticks) follows the waves: serial waves add up; a group's
members run `max_concurrency` at a time (each starting as soon as a slot is free, as the Map's sliding
window does).
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from npa_workflow.plan.model import PlanStep, WavePlan

VCPU = "vCPU"
# Indicative on-demand USD per accelerator-hour (late-2025 public list prices of GPU clouds, rounded).
DEFAULT_ACCELERATOR_USD_PER_HOUR: dict[str, float] = {
    "B200": 5.50,
    "H200": 3.50,
    "H100": 2.95,
    "A100": 1.80,
    "L40S": 1.50,
    "RTXPRO6000": 1.60,
    "A10G": 1.00,
    "L4": 0.80,
    "T4": 0.40,
}
DEFAULT_VCPU_USD_PER_HOUR = 0.04


class PricesError(ValueError):
    """A prices file that cannot be used; the message names the file and the fix."""


@dataclass(frozen=True)
class ComputePrices:
    accelerators: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_ACCELERATOR_USD_PER_HOUR))
    vcpu_hour: float = DEFAULT_VCPU_USD_PER_HOUR
    source: str = "default table"

    def price(self, kind: str) -> float | None:
        if kind == VCPU:
            return self.vcpu_hour
        if kind in self.accelerators:
            return self.accelerators[kind]
        # `RTXPRO-6000-BLACKWELL-SERVER-EDITION` and `RTXPRO6000` name one card: compare letters and digits.
        squeezed = _squeeze(kind)
        for name, usd in self.accelerators.items():
            if squeezed.startswith(_squeeze(name)):
                return usd
        return None

    def to_json(self) -> dict[str, Any]:
        return {"accelerators": dict(self.accelerators), "vcpu_hour": self.vcpu_hour, "source": self.source}


def _squeeze(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "", name.upper())


def parse_prices(raw: Any, source: str) -> ComputePrices:
    """`{accelerators: {TYPE: usd_per_hour}, vcpu_hour: usd}`; the file's entries replace the defaults'."""
    if not isinstance(raw, Mapping):
        raise PricesError(f"{source}: a prices file is a mapping (accelerators: {{H100: 2.5}}, vcpu_hour: 0.04)")
    unknown = sorted(set(raw) - {"accelerators", "vcpu_hour"})
    if unknown:
        raise PricesError(f"{source}: unknown key(s) {', '.join(unknown)} (the keys are accelerators, vcpu_hour)")
    table = dict(DEFAULT_ACCELERATOR_USD_PER_HOUR)
    accelerators = raw.get("accelerators", {})
    if not isinstance(accelerators, Mapping):
        raise PricesError(f"{source}: accelerators must map an accelerator type to USD per hour")
    for name, usd in accelerators.items():
        if isinstance(usd, bool) or not isinstance(usd, int | float) or usd < 0:
            raise PricesError(f"{source}: accelerators.{name} must be a number >= 0 (USD per hour), got {usd!r}")
        table[str(name)] = float(usd)
    vcpu = raw.get("vcpu_hour", DEFAULT_VCPU_USD_PER_HOUR)
    if isinstance(vcpu, bool) or not isinstance(vcpu, int | float) or vcpu < 0:
        raise PricesError(f"{source}: vcpu_hour must be a number >= 0 (USD per vCPU-hour), got {vcpu!r}")
    return ComputePrices(table, float(vcpu), source)


def load_prices(path: str | Path) -> ComputePrices:
    from npa_workflow.errors import SpecError
    from npa_workflow.spec.loader import load_yaml_file

    try:
        raw = load_yaml_file(path)
    except SpecError as exc:
        raise PricesError(str(exc)) from None
    return parse_prices(raw, str(path))


def _number(value: Any, default: float) -> float:
    try:
        return float(str(value).strip().rstrip("+"))
    except ValueError:
        return default


def step_units(step: PlanStep) -> dict[str, float]:
    """What one instance-hour of the step holds: accelerators by type, else vCPUs; × its nodes."""
    acc = step.resources_profile.get("accelerators")
    units: dict[str, float] = {}
    if isinstance(acc, str) and acc.strip():
        kind, _, count = acc.strip().rpartition(":")
        kind, count = (kind, count) if kind else (acc.strip(), "1")
        units[kind.strip()] = _number(count, 1.0)
    elif isinstance(acc, Mapping):
        for kind, count in acc.items():
            units[str(kind)] = _number(count, 1.0)
    if not units:
        units[VCPU] = max(_number(step.resources_profile.get("cpus", 1), 1.0), 1.0)
    return {kind: n * step.num_nodes for kind, n in units.items()}


@dataclass(frozen=True)
class StepMinutes:
    default: float = 0.0
    by_state: dict[str, float] = field(default_factory=dict)

    def of(self, state: str) -> float:
        return self.by_state.get(state, self.default)

    @property
    def given(self) -> bool:
        return self.default > 0 or any(v > 0 for v in self.by_state.values())


@dataclass(frozen=True)
class ComputeCost:
    hours: dict[str, float]  # accelerator type (or vCPU) → hours
    usd: float
    unpriced: list[str]  # types the price table does not name
    run_minutes: float  # the run's duration under these step durations

    def to_json(self) -> dict[str, Any]:
        return {"hours": {k: round(v, 4) for k, v in self.hours.items()}, "usd": round(self.usd, 4),
                "unpriced": list(self.unpriced), "run_minutes": round(self.run_minutes, 3)}


def run_minutes(waves: WavePlan, minutes: StepMinutes) -> float:
    total = 0.0
    for wave in waves.waves:
        durations = [minutes.of(s.state) if s.command else 0.0 for s in wave.steps]
        if wave.kind != "parallel":
            total += sum(durations)
            continue
        slots = [0.0] * max(1, min(wave.max_concurrency, len(durations)))  # the Map's sliding window
        for d in durations:
            heapq.heappush(slots, heapq.heappop(slots) + d)
        total += max(slots)
    return total


def compute_cost(steps: Iterable[PlanStep], waves: WavePlan, minutes: StepMinutes,
                 prices: ComputePrices) -> ComputeCost:
    hours: dict[str, float] = {}
    for step in steps:
        if not step.command:
            continue
        for kind, units in step_units(step).items():
            hours[kind] = hours.get(kind, 0.0) + units * minutes.of(step.state) / 60
    usd = 0.0
    unpriced = []
    for kind, h in hours.items():
        price = prices.price(kind)
        if price is None:
            unpriced.append(kind)
        else:
            usd += h * price
    return ComputeCost(hours=hours, usd=usd, unpriced=sorted(unpriced), run_minutes=run_minutes(waves, minutes))


def watch_ticks(run_min: float, interval_minutes: int) -> int:
    return math.ceil(run_min / interval_minutes) if run_min > 0 else 0
