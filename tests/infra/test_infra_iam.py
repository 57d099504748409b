"""One role per function, scoped to exactly what the function touches."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from infra_support import (
    DATA_KEY_ARN,
    SECRET_ARN,
    STEP_SECRETS_ARN,
    STEP_SECRETS_KEY_ARN,
    TOKEN_KEY_ARN,
    Synth,
)

from npa_workflow.protocol import environment

XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
LOG_DELIVERY = {
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
}
TASK_RESPONSES = {"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}


def _text(value: Any) -> str:
    """A resource as readable text: `<Logical.Arn>`, `<AWS::Region>`, joins flattened."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        return "".join(_text(p) for p in value["Fn::Join"][1])
    if "Fn::GetAtt" in value:
        return "<" + ".".join(value["Fn::GetAtt"]) + ">"
    if "Ref" in value:
        return "<" + value["Ref"] + ">"
    if isinstance(value.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", value["Fn::Sub"])
    return json.dumps(value)


def grants(synth: Synth, name: str) -> dict[str, set[str]]:
    """action → resources (as text) granted to function `name`'s role, from every policy on it."""
    return role_grants(synth, synth.stack.engine.roles[name])


def role_grants(synth: Synth, role: Any) -> dict[str, set[str]]:
    """action → resources (as text) granted to `role`, from every policy on it."""
    role_id = synth.logical_id(role)
    found: dict[str, set[str]] = {}
    for policy in synth.resources("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"]["Roles"]:
            continue
        for st in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert st["Effect"] == "Allow"
            actions = [st["Action"]] if isinstance(st["Action"], str) else st["Action"]
            resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            for action in actions:
                found.setdefault(action, set()).update(_text(r) for r in resources)
    return found


def _ids(synth: Synth) -> dict[str, str]:
    s = synth.stack
    return {
        "bucket": f"<{synth.logical_id(s.storage.bucket)}.Arn>",
        "table": f"<{synth.logical_id(s.storage.table)}.Arn>",
    }


REGION_ACCOUNT = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
# Every machine of the stack, deployed or ad hoc, and the child machines of their Distributed Maps.
STACK_MACHINES = f"{REGION_ACCOUNT}:stateMachine:NpaWorkflow_*"
AD_HOC_MACHINES = f"{REGION_ACCOUNT}:stateMachine:NpaWorkflow_adhoc_*"


def _machines(synth: Synth) -> set[str]:
    return {STACK_MACHINES}


NAMES = ("inbox", "launch", "decide", "trigger", "watch", "cleanup", "reap")


@pytest.mark.parametrize("name", NAMES)
def test_no_action_wildcards_and_star_resources_only_for_xray(default_synth: Synth, name: str) -> None:
    for action, resources in grants(default_synth, name).items():
        assert "*" not in action, (name, action)
        if "*" in resources:
            assert action in XRAY, (name, action)


@pytest.mark.parametrize("name", NAMES)
def test_every_function_uses_the_ledger_and_its_two_indexes_by_exact_arn(default_synth: Synth, name: str) -> None:
    table = _ids(default_synth)["table"]
    g = grants(default_synth, name)
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert g[action] == {table}
    assert g["dynamodb:Query"] == {table, f"{table}/index/active", f"{table}/index/runs"}
    assert not {a for a in g if a.startswith("dynamodb:")} - {
        "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query"
    }


@pytest.mark.parametrize("name", NAMES)
def test_logs_only_to_its_own_log_group(default_synth: Synth, name: str) -> None:
    g = grants(default_synth, name)
    own = f"<{default_synth.logical_id(default_synth.stack.engine.log_groups[name])}.Arn>"
    assert g["logs:CreateLogStream"] == g["logs:PutLogEvents"] == {own}


def test_s3_access_follows_the_prefixes_each_function_uses(default_synth: Synth) -> None:
    bucket = _ids(default_synth)["bucket"]
    s3 = {name: {a: r for a, r in grants(default_synth, name).items() if a.startswith("s3:")} for name in NAMES}
    assert s3["inbox"] == {
        "s3:ListBucket": {bucket},
        "s3:GetObject": {f"{bucket}/inbox/*", f"{bucket}/runs/*", f"{bucket}/catalog/*"},
        "s3:GetObjectVersion": {f"{bucket}/inbox/*"},
        "s3:PutObject": {f"{bucket}/inbox-rejected/*", f"{bucket}/runs/*"},
    }
    for name in ("launch", "trigger"):
        assert s3[name] == {"s3:ListBucket": {bucket}, "s3:GetObject": {f"{bucket}/runs/*"}}, name
    # Output checkers (the watch; cleanup and reap, for a job that exited 0 just before its cancel) and decide
    # read wherever a spec points: the engine bucket beyond runs/.
    for name in ("decide", "watch", "cleanup", "reap"):
        assert s3[name] == {"s3:ListBucket": {bucket}, "s3:GetObject": {f"{bucket}/*"}}, name


def test_data_buckets_are_readable_by_decide_trigger_and_the_output_checkers_only(ad_hoc_synth: Synth) -> None:
    data = {f"arn:<AWS::Partition>:s3:::{b}" for b in ("team-data", "team-models")}
    for name in NAMES:
        g = grants(ad_hoc_synth, name)
        listed = {r for r in g.get("s3:ListBucket", set()) if r.startswith("arn:")}
        read = {r for r in g.get("s3:GetObject", set()) if r.startswith("arn:")}
        assert listed == (data if name in ("decide", "trigger", "watch", "cleanup", "reap") else set()), name
        readers = ("decide", "watch", "cleanup", "reap")
        assert read == ({f"{d}/*" for d in data} if name in readers else set()), name


def test_the_secret_is_readable_only_by_launch_watch_cleanup_reap(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    secret = f"<{default_synth.logical_id(default_synth.stack.secret)}>"
    for name in NAMES:
        g = grants(default_synth, name)
        readers = name in ("launch", "watch", "cleanup", "reap")
        assert g.get("secretsmanager:GetSecretValue") == ({secret} if readers else None), name
        given = grants(ad_hoc_synth, name).get("secretsmanager:GetSecretValue", set()) - {f"{STEP_SECRETS_ARN}-??????"}
        assert given == ({SECRET_ARN} if readers else set()), name


def test_task_responses_only_from_launch_trigger_watch_on_the_stacks_machines(default_synth: Synth) -> None:
    """Issue 11 item 7: a Distributed Map member's token belongs to a child execution of `stateMachine:<name>/<label>`;
    AWS authorizes SendTask* against that machine, which an exact parent ARN would not match."""
    machines = _machines(default_synth)
    for name in NAMES:
        g = grants(default_synth, name)
        for action in TASK_RESPONSES:
            if name in ("launch", "trigger", "watch"):
                assert g[action] == machines, (name, action)
            else:
                assert action not in g, (name, action)


def test_only_the_inbox_starts_executions_and_creates_no_machines_by_default(default_synth: Synth) -> None:
    for name in NAMES:
        g = grants(default_synth, name)
        assert ("states:StartExecution" in g) == (name == "inbox"), name
        assert not any(a in g for a in ("states:CreateStateMachine", "iam:PassRole")), name
        assert not LOG_DELIVERY & set(g), name
    assert grants(default_synth, "inbox")["states:StartExecution"] == _machines(default_synth)


def test_ad_hoc_specs_let_the_inbox_create_machines_under_its_prefix_only(ad_hoc_synth: Synth) -> None:
    g = grants(ad_hoc_synth, "inbox")
    assert g["states:CreateStateMachine"] == {AD_HOC_MACHINES}
    # An ad-hoc machine is named by its definition's digest: created once, never updated or tagged.
    assert not {"states:UpdateStateMachine", "states:TagResource"} & set(g)
    assert g["states:StartExecution"] == {STACK_MACHINES}
    role = f"<{ad_hoc_synth.logical_id(ad_hoc_synth.stack.ad_hoc_role)}.Arn>"
    assert g["iam:PassRole"] == {role}
    assert all(g[a] == {"*"} for a in LOG_DELIVERY)
    for name in ("launch", "trigger", "watch"):
        assert grants(ad_hoc_synth, name)["states:SendTaskSuccess"] == {STACK_MACHINES}
    pass_role = [
        st
        for p in ad_hoc_synth.resources("AWS::IAM::Policy").values()
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if st["Action"] == "iam:PassRole"
    ]
    assert pass_role[0]["Condition"] == {"StringEquals": {"iam:PassedToService": "states.amazonaws.com"}}
    env = ad_hoc_synth.template["Resources"][ad_hoc_synth.logical_id(ad_hoc_synth.stack.engine.functions["inbox"])]
    variables = env["Properties"]["Environment"]["Variables"]
    assert variables["NPA_WORKFLOW_AD_HOC_MACHINE_PREFIX"] == "NpaWorkflow_adhoc_"
    assert {"NPA_WORKFLOW_AD_HOC_ROLE_ARN", "NPA_WORKFLOW_AD_HOC_LOG_GROUP_ARN", "NPA_WORKFLOW_LAUNCH_FUNCTION_ARN",
            "NPA_WORKFLOW_DECIDE_FUNCTION_ARN", "NPA_WORKFLOW_TRIGGER_FUNCTION_ARN",
            "NPA_WORKFLOW_CLEANUP_FUNCTION_ARN"} <= set(variables)


def test_the_inbox_describes_exactly_the_deployed_machines(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    """It compares an upload's compiled definition with the deployed one (DescribeStateMachine)."""
    assert grants(default_synth, "inbox")["states:DescribeStateMachine"] == {STACK_MACHINES}
    assert grants(ad_hoc_synth, "inbox")["states:DescribeStateMachine"] == {STACK_MACHINES, AD_HOC_MACHINES}
    for name in NAMES[1:]:
        assert "states:DescribeStateMachine" not in grants(default_synth, name), name
        assert "states:DescribeStateMachine" not in grants(ad_hoc_synth, name), name


def test_ad_hoc_machines_may_run_a_distributed_map_of_themselves_and_nothing_more(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    assert default_synth.stack.ad_hoc_role is None
    region_account = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
    bucket = _ids(ad_hoc_synth)["bucket"]
    g = role_grants(ad_hoc_synth, ad_hoc_synth.stack.ad_hoc_role)
    assert g["states:StartExecution"] == {f"{region_account}:stateMachine:NpaWorkflow_adhoc_*"}
    assert g["states:DescribeExecution"] == g["states:StopExecution"] == {
        f"{region_account}:execution:NpaWorkflow_adhoc_*:*", f"{region_account}:execution:NpaWorkflow_adhoc_*/*:*"
    }
    assert g["states:RedriveExecution"] == {f"{region_account}:execution:NpaWorkflow_adhoc_*/*:*"}
    assert {a for a in g if a.startswith("states:")} == {
        "states:StartExecution", "states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"
    }
    assert {a: r for a, r in g.items() if a.startswith("s3:")} == {"s3:GetObject": {f"{bucket}/runs/*"}}


def test_a_deployed_machine_with_a_distributed_map_gets_the_same_grants_on_its_own_name() -> None:
    """The deployed machines and the ad-hoc ones share `grant_distributed_map` (no spec in specs/ has a group large
    enough for a Distributed Map today, so it is checked on its own). What AWS documents for Distributed Maps and
    aws-cdk-lib grants: StartExecution on the machine, Describe/StopExecution on its executions and its children
    (`execution:<name>/<label>:*`), RedriveExecution on the children."""
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from infra.state_machines import grant_distributed_map

    stack = cdk.Stack(cdk.App(), "Grants")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    bucket = s3.Bucket(stack, "Bucket")
    grant_distributed_map(role, stack, "Grants.sweep", bucket)
    template = stack.resolve(role.node.find_child("DefaultPolicy").document.to_json())
    found = {
        (a if isinstance(a, str) else tuple(a)): {
            _text(r) for r in (st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]])
        }
        for st in template["Statement"]
        for a in [st["Action"]]
    }
    region_account = "arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>"
    bucket_arn = f"<{stack.resolve(stack.get_logical_id(bucket.node.default_child))}.Arn>"
    assert found == {
        "states:StartExecution": {f"{region_account}:stateMachine:Grants.sweep"},
        ("states:DescribeExecution", "states:StopExecution"): {
            f"{region_account}:execution:Grants.sweep:*", f"{region_account}:execution:Grants.sweep/*:*"
        },
        "states:RedriveExecution": {f"{region_account}:execution:Grants.sweep/*:*"},
        "s3:GetObject": {f"{bucket_arn}/runs/*"},
    }


def test_the_catalog_deployment_role_reads_its_asset_and_writes_only_under_catalog(default_synth: Synth) -> None:
    catalog = default_synth.stack.catalog
    bucket = _ids(default_synth)["bucket"]
    assets_bucket = "arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-<AWS::AccountId>-<AWS::Region>"
    asset = f"{assets_bucket}/{catalog.asset.s3_object_key}"
    own_logs = f"<{default_synth.logical_id(catalog.log_group)}.Arn>"
    g = role_grants(default_synth, catalog.role)
    assert g == {
        "logs:CreateLogStream": {own_logs},
        "logs:PutLogEvents": {own_logs},
        "s3:GetObject": {asset},
        "s3:ListBucket": {bucket},
        "s3:PutObject": {f"{bucket}/catalog/*"},
        "s3:DeleteObject": {f"{bucket}/catalog/*"},
    }
    listing = [
        st
        for p in default_synth.resources("AWS::IAM::Policy").values()
        if {"Ref": default_synth.logical_id(catalog.role)} in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"]
        if st["Action"] == "s3:ListBucket"
    ]
    assert [st["Condition"] for st in listing] == [{"StringLike": {"s3:prefix": ["catalog/*"]}}]
    # BucketDeployment's own grants (whole asset bucket, read-write on the whole engine bucket) are not there, and
    # its role is the only one the handler has.
    handler = default_synth.template["Resources"][default_synth.logical_id(catalog.handler)]["Properties"]
    assert handler["Role"] == {"Fn::GetAtt": [default_synth.logical_id(catalog.role), "Arn"]}


def _statements(synth: Synth, role: Any) -> list[dict[str, Any]]:
    role_id = {"Ref": synth.logical_id(role)}
    return [
        st
        for p in synth.resources("AWS::IAM::Policy").values()
        if role_id in p["Properties"]["Roles"]
        for st in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_step_secrets_are_set_and_readable_by_launch_and_inbox_only(default_synth: Synth, ad_hoc_synth: Synth) -> None:
    """Issue 11 item 15: `secretEnv` needs NPA_WORKFLOW_SECRETS_ARN on the function that fills it (launch,
    npa_workflow.wiring) and GetSecretValue on that secret; before, neither was there. Issue 21 item 5: the
    inbox reads it too, to refuse a run missing one of its names before anything launches (engine.preflight)."""
    for name in NAMES:
        fn = ad_hoc_synth.template["Resources"][ad_hoc_synth.logical_id(ad_hoc_synth.stack.engine.functions[name])]
        env = fn["Properties"]["Environment"]["Variables"]
        expected = STEP_SECRETS_ARN if name in ("launch", "inbox") else None
        assert env.get(environment.STEP_SECRETS_ARN) == expected, name
        read = grants(ad_hoc_synth, name).get("secretsmanager:GetSecretValue", set())
        # A partial ARN (no 6-character suffix) matches the one secret only with `-??????`.
        assert (f"{STEP_SECRETS_ARN}-??????" in read) == (name in ("launch", "inbox")), name
        plain = default_synth.template["Resources"][
            default_synth.logical_id(default_synth.stack.engine.functions[name])]
        assert environment.STEP_SECRETS_ARN not in plain["Properties"]["Environment"]["Variables"]


def test_kms_decrypt_only_for_the_keys_named_and_only_to_their_readers(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    """Issue 11 item 16: a CMK-encrypted secret or SSE-KMS object is unreadable without kms:Decrypt on its key."""
    expected = {
        "launch": {TOKEN_KEY_ARN, STEP_SECRETS_KEY_ARN},
        "watch": {TOKEN_KEY_ARN, DATA_KEY_ARN},
        "cleanup": {TOKEN_KEY_ARN, DATA_KEY_ARN},
        "reap": {TOKEN_KEY_ARN, DATA_KEY_ARN},
        "decide": {DATA_KEY_ARN},
        "inbox": {STEP_SECRETS_KEY_ARN},
    }
    for name in NAMES:
        assert "kms:Decrypt" not in grants(default_synth, name), name
        assert grants(ad_hoc_synth, name).get("kms:Decrypt", set()) == expected.get(name, set()), name
        for st in _statements(ad_hoc_synth, ad_hoc_synth.stack.engine.roles[name]):
            if st["Action"] == "kms:Decrypt":
                service = "s3" if st["Resource"] == DATA_KEY_ARN else "secretsmanager"
                via = st["Condition"]["StringEquals"]["kms:ViaService"]
                assert _text(via) == f"{service}.<AWS::Region>.amazonaws.com", name


def test_distributed_map_child_executions_are_covered_by_the_grants_aws_checks(
    default_synth: Synth, ad_hoc_synth: Synth
) -> None:
    """Issue 11 item 7, evaluated rather than string-matched (moto's IAM policy evaluator on the synthesized roles): a
    member of a Distributed Map runs in the child execution `execution:<machine>/<label>:<id>` of the child machine
    `stateMachine:<machine>/<label>`, the label being the group's key (`g<n>`, compile/asl.py). AWS authorizes
    SendTask* against the token's machine and Describe/Stop/RedriveExecution against the execution ARN."""
    from iam_conformance import ACCOUNT, REGION, Resolver, allowed
    from infra_support import REPO_ROOT

    from npa_workflow.protocol.keys import group_keys
    from npa_workflow.spec.load import load_spec

    [label] = group_keys(load_spec(REPO_ROOT / "specs" / "sweep.yaml").spec).values()
    arn = f"arn:aws:states:{REGION}:{ACCOUNT}"
    run_id = "0f8c2d9e-1b7a-4c3e-9d55-2a6b1e0c7f41"
    ad_hoc = "NpaWorkflow_adhoc_0123456789abcdef"
    stranger = "Other.sweep"  # another stack's machine, same account
    for synth in (default_synth, ad_hoc_synth):
        resolver = Resolver(synth.template, {})
        machines = [*synth.stack.workflows.names.values(), ad_hoc]
        for name in NAMES:
            policies = resolver.role_policies(synth.logical_id(synth.stack.engine.roles[name]))
            for action in sorted(TASK_RESPONSES):
                answers = name in ("launch", "trigger", "watch")
                for machine in machines:
                    child = f"{arn}:stateMachine:{machine}/{label}"
                    assert allowed(policies, action, child) == answers, (name, action, child)
                assert not allowed(policies, action, f"{arn}:stateMachine:{stranger}/{label}"), (name, action)

    # The machine role of ad-hoc machines (any of which may hold a Distributed Map): its own executions and their
    # children, nothing of the deployed machines or another stack.
    resolver = Resolver(ad_hoc_synth.template, {})
    policies = resolver.role_policies(ad_hoc_synth.logical_id(ad_hoc_synth.stack.ad_hoc_role))
    parent = f"{arn}:execution:{ad_hoc}:{run_id}"
    child = f"{arn}:execution:{ad_hoc}/{label}:{run_id}"
    for action in ("states:DescribeExecution", "states:StopExecution"):
        assert allowed(policies, action, parent) and allowed(policies, action, child), action
    assert allowed(policies, "states:RedriveExecution", child)
    assert allowed(policies, "states:StartExecution", f"{arn}:stateMachine:{ad_hoc}")
    deployed = next(iter(ad_hoc_synth.stack.workflows.names.values()))
    for action in ("states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"):
        for other in (f"{arn}:execution:{deployed}/{label}:{run_id}", f"{arn}:execution:{stranger}/{label}:{run_id}"):
            assert not allowed(policies, action, other), (action, other)

    # A deployed machine with a Distributed Map (none in specs/ has one today): `grant_distributed_map` on its name.
    import aws_cdk as cdk
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3
    from aws_cdk.assertions import Template

    from infra.state_machines import grant_distributed_map

    stack = cdk.Stack(cdk.App(), "Grants")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("states.amazonaws.com"))
    grant_distributed_map(role, stack, deployed, s3.Bucket(stack, "Bucket"))
    template = Template.from_stack(stack).to_json()
    policies = Resolver(template, {}).role_policies(stack.resolve(stack.get_logical_id(role.node.default_child)))
    own_child = f"{arn}:execution:{deployed}/{label}:{run_id}"
    for action in ("states:DescribeExecution", "states:StopExecution", "states:RedriveExecution"):
        assert allowed(policies, action, own_child), action
        assert not allowed(policies, action, f"{arn}:execution:{deployed}x/{label}:{run_id}"), action


def test_only_the_watch_describes_executions_of_the_stacks_machines(default_synth: Synth) -> None:
    """The watch pass asks whether a run's execution has ended when a wave's token is gone (a missed reap event,
    `engine.watch`): DescribeExecution on `execution:<stack>.*`; no other function calls it."""
    assert grants(default_synth, "watch")["states:DescribeExecution"] == {f"{REGION_ACCOUNT}:execution:NpaWorkflow_*:*"}
    for name in NAMES:
        if name != "watch":
            assert "states:DescribeExecution" not in grants(default_synth, name), name
