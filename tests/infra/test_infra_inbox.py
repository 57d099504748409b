"""The inbox function's configuration, read back the way the inbox reads it (`InboxSettings.from_environment`).

The inbox compiles every upload and compares the result with the deployed machine's definition: the stack must
tell it the options the machines were compiled with, or no upload would ever match a deployed machine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from infra_support import REPO_ROOT, Synth

from infra.stack import compile_options
from infra.state_machines import spec_files
from npa_workflow.compile.asl import CompileOptions, compile_spec
from npa_workflow.engine import inbox
from npa_workflow.protocol import environment
from npa_workflow.protocol import functions as function_table
from npa_workflow.spec.load import load_spec

SPECS = REPO_ROOT / "specs"


def _as_text(value: Any) -> str:
    """An environment value as the function would see it: references become plausible ARNs."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_as_text(part) for part in value["Fn::Join"][1])
    pseudo = {"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012"}
    if "Ref" in value and value["Ref"] in pseudo:
        return pseudo[value["Ref"]]
    if "Ref" in value:
        return f"arn:aws:states:eu-west-1:123456789012:stateMachine:{value['Ref']}"
    if "Fn::GetAtt" in value:
        return f"arn:aws:lambda:eu-west-1:123456789012:function:{value['Fn::GetAtt'][0]}"
    raise AssertionError(f"unexpected value {value!r}")


def _inbox_env(synth: Synth) -> dict[str, str]:
    fn = synth.template["Resources"][synth.logical_id(synth.stack.engine.functions["inbox"])]
    return {k: _as_text(v) for k, v in fn["Properties"]["Environment"]["Variables"].items()}


def _heartbeats(definition: dict[str, Any]) -> set[int]:
    found: set[int] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "HeartbeatSeconds" in node:
                found.add(node["HeartbeatSeconds"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition)
    return found


def _definitions(synth: Synth) -> dict[str, dict[str, Any]]:
    return {name: synth.definition(m) for name, m in synth.stack.workflows.machines.items()}


@pytest.mark.parametrize(("variant", "heartbeat"), [("default_synth", 300), ("ad_hoc_synth", 900)])
def test_the_inbox_is_told_the_heartbeat_the_machines_are_compiled_with(
    variant: str, heartbeat: int, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    env = _inbox_env(synth)
    assert env[environment.HEARTBEAT_SECONDS] == str(heartbeat) == str(synth.stack.compile_options.heartbeat_seconds)
    for name, definition in _definitions(synth).items():
        assert _heartbeats(definition) == {heartbeat}, name
    assert inbox.InboxSettings.from_environment(env).heartbeat_seconds == heartbeat


def test_only_the_heartbeat_deadline_and_watch_interval_differ_from_the_compilers_defaults(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    """The inbox takes every other option from a run request, defaulting to the compiler's defaults."""
    for synth in (default_synth, ad_hoc_synth):
        options = compile_options(synth.stack.settings)
        assert synth.stack.compile_options == options
        assert options.max_wait_seconds == synth.stack.settings.max_wait_seconds == 7 * 24 * 3600
        assert options.watch_interval_seconds == 60 * synth.stack.settings.watch_interval_minutes
        assert dataclasses.replace(
            options, heartbeat_seconds=CompileOptions().heartbeat_seconds,
            max_wait_seconds=CompileOptions().max_wait_seconds,
            watch_interval_seconds=CompileOptions().watch_interval_seconds,
        ) == CompileOptions()


@pytest.mark.parametrize(("variant", "tick"), [("default_synth", 60), ("ad_hoc_synth", 300)])
def test_the_inbox_is_told_the_watch_interval_the_trigger_bounds_use(
    variant: str, tick: int, request: pytest.FixtureRequest
) -> None:
    """A trigger Task's bound depends on the watch interval: an ad-hoc upload of a deployed trigger spec compiled
    without it would never match the deployed machine (and would wait `maxPolls` × `pollSeconds` only)."""
    synth: Synth = request.getfixturevalue(variant)
    env = _inbox_env(synth)
    tick_told = env[environment.WATCH_INTERVAL_SECONDS]
    assert tick_told == str(tick) == str(synth.stack.compile_options.watch_interval_seconds)
    assert inbox.InboxSettings.from_environment(env).watch_interval_seconds == tick


def test_the_deployed_deadline_is_days_and_the_inbox_is_told_it(default_synth: Synth) -> None:
    """Issue 11 item 8: machines were compiled with the compiler's 1-hour default; a 2-hour training step was
    cancelled in the cloud. The stack's `maxWaitSeconds` (7 days by default) is every wave Task's TimeoutSeconds."""
    env = _inbox_env(default_synth)
    assert env[environment.MAX_WAIT_SECONDS] == str(7 * 24 * 3600)
    assert inbox.InboxSettings.from_environment(env).max_wait_seconds == 7 * 24 * 3600
    # Each wave Task reads the run's deadline from the execution input (compiled once, many runs): the inbox
    # puts the stack's 7 days there unless a run request says otherwise (tests/unit/test_inbox.py).
    timeouts = set()
    for definition in _definitions(default_synth).values():
        _walk(definition, lambda node: timeouts.add(node.get("TimeoutSeconds") or node["TimeoutSecondsPath"])
              if "HeartbeatSeconds" in node else None)
    assert timeouts == {"$.run.deadline", "$.deadline"}


def _walk(node: Any, visit: Any) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)


@pytest.mark.parametrize("variant", ["default_synth", "ad_hoc_synth"])
def test_an_unchanged_spec_compiled_by_the_inbox_matches_its_deployed_machine(
    variant: str, request: pytest.FixtureRequest
) -> None:
    """What the inbox does with an upload of a spec from specs/ (no vars, no options): compile it with the options
    its settings give and compare with the deployed definition, function ARNs masked. The digest a run freezes
    (`protocol.definitions`, from the compile) is the deployed definition's: `resume` compares exactly these."""
    from npa_workflow.protocol.definitions import definition_digest, masked

    synth: Synth = request.getfixturevalue(variant)
    settings = inbox.InboxSettings.from_environment(_inbox_env(synth))
    request = inbox.RunRequestOptions().model_copy(update={"max_wait_seconds": settings.max_wait_seconds})
    options = inbox._compile_options(request, settings)
    assert options == synth.stack.compile_options
    deployed = _definitions(synth)
    for path in spec_files(SPECS):
        loaded = load_spec(path)
        compiled = compile_spec(loaded, options)
        assert masked(compiled.definition) == masked(deployed[loaded.spec.name]), loaded.spec.name
        assert definition_digest(compiled.definition) == definition_digest(deployed[loaded.spec.name])


def test_the_inbox_settings_read_back_from_the_default_stack(default_synth: Synth) -> None:
    """The deployed machines: the ARN prefix from the environment, the names from catalog/machines.json."""
    settings = inbox.InboxSettings.from_environment(_inbox_env(default_synth))
    assert settings.state_machines == {}
    assert settings.allow_ad_hoc is False
    assert settings.retention_days == 30  # the stack's retentionDays: a run request's deadline is checked against it
    root = default_synth.outdir / default_synth.stack.catalog.asset.asset_path
    published = (root / inbox.DEPLOYED_MACHINES_KEY.removeprefix("catalog/")).read_bytes()

    class Store:
        def get(self, uri: str) -> bytes | None:
            return published if uri == f"s3://engine/{inbox.DEPLOYED_MACHINES_KEY}" else None

    class Runs:
        bucket = "engine"

    engine = type("E", (), {"store": Store(), "runs": Runs()})()
    machines = inbox.with_deployed_machines(engine, settings).state_machines
    assert machines == {
        spec: f"arn:aws:states:eu-west-1:123456789012:stateMachine:{name}"
        for spec, name in default_synth.stack.workflows.names.items()
    }


def test_every_variable_the_inbox_reads_is_set_when_ad_hoc_specs_are_allowed(ad_hoc_synth: Synth) -> None:
    env = _inbox_env(ad_hoc_synth)
    read = {
        environment.MACHINE_ARN_PREFIX, environment.MAX_WAIT_SECONDS,
        environment.ALLOW_AD_HOC, environment.AD_HOC_MACHINE_PREFIX, environment.AD_HOC_ROLE_ARN,
        environment.AD_HOC_LOG_GROUP_ARN, environment.HEARTBEAT_SECONDS, environment.WATCH_INTERVAL_SECONDS,
        *inbox.FUNCTION_ARN_ENVS.values(),
    }
    assert {name for name in read if env.get(name)} == read
    settings = inbox.InboxSettings.from_environment(env)  # raises when an ad-hoc variable is missing
    assert settings.allow_ad_hoc is True
    assert settings.ad_hoc_prefix == "NpaWorkflow_adhoc_"
    functions = ad_hoc_synth.stack.engine.functions
    assert {p: arn.rsplit(":", 1)[1] for p, arn in settings.function_arns.items()} == {
        slot.placeholder: ad_hoc_synth.logical_id(functions[slot.name]) for slot in function_table.MACHINE_INVOKED
    }
    assert {slot.name for slot in function_table.MACHINE_INVOKED} == {"launch", "decide", "trigger", "cleanup"}
