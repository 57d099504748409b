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

from collections.abc import Callable, Mapping, Sequence
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


def environment_presence(environ: Mapping[str, str] | None = None) -> SecretPresence:
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


def local_secret_problems(loaded: LoadedSpec, command: str, run_secret_names: Sequence[str] = (),
                          environ: Mapping[str, str] | None = None) -> list[Problem]:
    """`run` / `serve`: the secrets checked in this process's environment, which the local jobs inherit."""
    return secret_problems(loaded, environment_presence(environ), where=f"the environment of npa-workflow {command}",
                           fix=local_fix(command), run_secret_names=run_secret_names)


def local_problems(loaded: LoadedSpec, command: str, job_path: str, run_secret_names: Sequence[str] = (),
                   environ: Mapping[str, str] | None = None) -> list[Problem]:
    """Everything a local job of the plan needs from this process (`environ`: its environment; `job_path`: the
    PATH its jobs get, `wiring.local_job_env`), in state order: its programs, its secrets."""
    problems = (program_problems(loaded, command, job_path)
                + local_secret_problems(loaded, command, run_secret_names, environ))
    order = {f"states.{name}": i for i, name in enumerate(loaded.spec.states)}
    return sorted(problems, key=lambda p: order.get(p.path, len(order)))


def _program(loaded: LoadedSpec, state: str) -> str:
    """argv[0] of the state's command, as the plan takes it (the tool's argv, else `run.argv`); "" for none."""
    st = loaded.spec.states[state]
    tool = loaded.catalog.get(st.tool_ref) if st.tool_ref else None
    argv = tool.argv if tool is not None else (st.run.argv if st.run is not None else [])
    return str(argv[0]) if argv else ""


def program_problems(loaded: LoadedSpec, command: str, job_path: str) -> list[Problem]:
    """Local jobs only: the program each command starts is where the job will look for it — a bare name on
    `job_path` (the PATH local jobs get), an absolute path on this machine — one problem per program, at the first
    state that starts it. Left to the launch: a templated program, a path relative to the step's code folder
    (not checked out yet where the inbox runs), a tool whose `env` sets its own PATH, and `run.shell`."""
    import os
    import shutil

    needs: dict[str, list[str]] = {}
    for name, st in loaded.spec.states.items():
        program = _program(loaded, name) if st.has_command else ""
        tool = loaded.catalog.get(st.tool_ref) if st.tool_ref else None
        if tool is not None and "PATH" in tool.env:
            continue
        if program and "{{" not in program and ("/" not in program or os.path.isabs(program)):
            needs.setdefault(program, []).append(name)
    if command == "serve":
        fix = "install it (or put its folder on PATH) where `npa-workflow serve` starts, then restart serve"
    else:
        fix = f"install it, or put its folder on PATH before `npa-workflow {command}`"
    problems = []
    for program, states in needs.items():
        if os.path.isabs(program):
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                problems.append(Problem(f"states.{states[0]}", f"program {program} (for {_states(states)}) is not "
                                        "an executable file on this machine", "install it, or fix the path"))
        elif shutil.which(program, path=job_path) is None:
            problems.append(Problem(f"states.{states[0]}", f"program {program!r} (for {_states(states)}) is not "
                                    f"found on the PATH of npa-workflow {command}", fix))
    return problems
