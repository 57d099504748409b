"""Preflight: what the run's jobs will need from where they launch, checked before the first launch.

A secret a step needs (its tool's `secretEnv`, the run's `--secret-env`) is otherwise found missing only when
that step launches, after every step before it ran — an hour of fits, then "not set". So `run` checks the
process environment before it starts anything, and the inbox checks before it starts the execution: on `serve`
the serve process's environment, on a stack the step-secrets JSON secret's keys (the values are never read
into a message). One problem (one line) per missing secret names it, the states that need it and the command
(or the secret) that must have it; a missing tool is a validation error of the same load, before this.

Pure but for the `present` callable the caller hands in (`wiring.step_secret_presence`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from npa_workflow.errors import Problem
from npa_workflow.redact import MIN_SECRET_LENGTH
from npa_workflow.spec.validate import LoadedSpec

__all__ = ["SecretPresence", "Unreadable", "needed_secrets", "secret_problems"]


@dataclass(frozen=True)
class Unreadable:
    """The source is not there to read (a deleted secret, one this role may not read, a stack without one):
    every needed secret is refused, with `reason` (names only) and `fix`."""

    reason: str
    fix: str


# names → (missing, too short to redact); Unreadable; None when the source cannot be read just now (a blip:
# no verdict, the launch reads it again and says)
SecretPresence = Callable[[Sequence[str]], "tuple[list[str], list[str]] | Unreadable | None"]


def state_secrets(loaded: LoadedSpec, state: str, run_secret_names: Sequence[str] = ()) -> tuple[str, ...]:
    """The secrets a job of `state` is given (what the launch resolves): the run's `--secret-env` names, then
    the `secretEnv` of the state's tool."""
    tool_ref = loaded.spec.states[state].tool_ref
    tool = loaded.catalog.get(tool_ref) if tool_ref else None
    return tuple(dict.fromkeys([*run_secret_names, *(tool.secret_env if tool else [])]))


def needed_secrets(loaded: LoadedSpec, run_secret_names: Sequence[str] = ()) -> dict[str, list[str]]:
    """Secret name → the states whose jobs get it. States are one flat map (group members, loop bodies and
    branches are states of it), so this is every job the plan can launch; every state with a command gets
    the run's `--secret-env`."""
    needed: dict[str, list[str]] = {}
    for name, st in loaded.spec.states.items():
        if st.has_command:
            for secret in state_secrets(loaded, name, run_secret_names):
                needed.setdefault(secret, []).append(name)
    return needed


def _states(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"state{'s' if len(names) > 1 else ''} {shown}"


def secret_problems(loaded: LoadedSpec, present: SecretPresence, *, where: str, fix: str,
                    run_secret_names: Sequence[str] = ()) -> list[Problem]:
    """One problem per missing (or too short) secret, at the first state needing it. `where`: the source
    (`the environment of npa-workflow serve`); `fix`: what to do (`export it, then restart npa-workflow serve`),
    `{name}` in it standing for the secret's name."""
    needed = needed_secrets(loaded, run_secret_names)
    if not needed:
        return []
    found = present(list(needed))
    if found is None:
        return []
    if isinstance(found, Unreadable):
        return [Problem(f"states.{states[0]}", f"secret {n} (for {_states(states)}) cannot be given to its jobs: "
                        f"{found.reason}", found.fix.replace("{name}", n)) for n, states in needed.items()]
    missing, short = found
    problems = [Problem(f"states.{needed[n][0]}", f"secret {n} (for {_states(needed[n])}) is not set in {where}",
                        fix.replace("{name}", n)) for n in missing]
    problems += [Problem(f"states.{needed[n][0]}",
                         f"secret {n} (for {_states(needed[n])}) in {where} is shorter than {MIN_SECRET_LENGTH} "
                         "characters: too short to redact from logs safely", "use the real value")
                 for n in short if n not in missing]
    return problems


def environment_presence(environ: dict[str, str] | None = None) -> SecretPresence:
    """Presence in a process environment (`run`, `serve`)."""
    import os

    env = os.environ if environ is None else environ

    def present(names: Sequence[str]) -> tuple[list[str], list[str]]:
        missing = [n for n in names if not env.get(n)]
        return missing, [n for n in names if env.get(n) and len(env[n]) < MIN_SECRET_LENGTH]

    return present


def local_fix(command: str) -> str:
    """What to do about a missing secret of a local job: jobs get the environment of the command that runs them."""
    if command == "serve":
        return "export {name} where `npa-workflow serve` starts, then restart serve (its jobs get serve's environment)"
    return f"export {{name}} before `npa-workflow {command}`"


def local_secret_problems(loaded: LoadedSpec, command: str, run_secret_names: Sequence[str] = ()) -> list[Problem]:
    """`run` / `serve`: the secrets checked in this process's environment, which the local jobs inherit."""
    return secret_problems(loaded, environment_presence(), where=f"the environment of npa-workflow {command}",
                           fix=local_fix(command), run_secret_names=run_secret_names)
