"""Every AWS limit the compiler enforces, as problems rather than a raised error: what `validate` reports, so a
spec it calls valid is one `compile`, the inbox and the synth accept.

The checks are the compiler's own, so each message and fix is written once:

- the worst-case history against Step Functions' 25,000 events (`compile/history.py`, `history_problem`: the
  compiler raises it, this reports it) — always, it is a walk of the spec;
- a Distributed Map's concurrency against its 10,000 child executions and the definition against 1 MiB with every
  function ARN at its longest (`compile/asl.py`) — through `compile_spec` itself, and only for a spec that can
  reach them: a group of more than 10,000 members (the language caps an explicit `maxConcurrency` at 64, so only
  a group's default, its member count, can pass 10,000), or `SIZE_CHECK_MIN_STATES` states or more. Below that a
  definition stays under half of 1 MiB even with 80-character state names and every retry budget
  (`tests/unit/test_validate_limits.py` pins it), and `validate` does not pay for importing and running the
  compiler (`bench/cli_startup.py`).
"""

from __future__ import annotations

import dataclasses

from npa_workflow.compile.history import history_problem
from npa_workflow.compile.options import DISTRIBUTED_MAX_CONCURRENCY, CompileOptions
from npa_workflow.errors import Problem, SpecError
from npa_workflow.spec.validate import LoadedSpec

SIZE_CHECK_MIN_STATES = 100


def _may_reach_compile_limits(loaded: LoadedSpec) -> bool:
    states = loaded.spec.states
    return len(states) >= SIZE_CHECK_MIN_STATES or any(
        len(st.parallel) > DISTRIBUTED_MAX_CONCURRENCY for st in states.values() if st.parallel)


def compile_limit_problems(loaded: LoadedSpec, options: CompileOptions | None = None) -> list[Problem]:
    """The limit problems of `loaded` compiled with `options` (default: the compiler's, as `compile` and the stack
    use for these limits)."""
    from npa_workflow.spec.config import resolve_config

    options = options or CompileOptions()
    run_ctx, _ = resolve_config(loaded.spec.config, loaded.spec.name, "compile", loaded.spec.run)
    history = history_problem(loaded, options, run_ctx)
    problems = [history] if history is not None else []
    if _may_reach_compile_limits(loaded):
        from npa_workflow.compile.asl import compile_spec

        try:
            compile_spec(loaded, dataclasses.replace(options, history_limit=0))  # history: reported above
        except SpecError as exc:
            problems += exc.problems
    return problems
