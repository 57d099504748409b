"""What a deployed stack and its clients agree on: the CloudFormation outputs the CDK app emits and
`stack_client` reads, and which files of a spec folder a stack deploys (the CDK app and `serve` both use it)."""

from __future__ import annotations

from pathlib import Path

# -- CloudFormation outputs of the stack (infra/stack.py emits each; stack_client.py reads them by these names)
BUCKET_NAME = "BucketName"
INBOX_URI = "InboxUri"
LEDGER_TABLE_NAME = "LedgerTableName"
SKYPILOT_TOKEN_SECRET_ARN = "SkyPilotTokenSecretArn"
DEAD_LETTER_QUEUE_URL = "DeadLetterQueueUrl"
FAILED_INVOCATIONS_QUEUE_URL = "FailedInvocationsQueueUrl"
OUTPUTS = (BUCKET_NAME, INBOX_URI, LEDGER_TABLE_NAME, SKYPILOT_TOKEN_SECRET_ARN, DEAD_LETTER_QUEUE_URL,
           FAILED_INVOCATIONS_QUEUE_URL)
REQUIRED_BY_CLIENTS = (BUCKET_NAME, LEDGER_TABLE_NAME)  # what following a run needs
# -- a local stack (`npa-workflow run` and `serve`, on the embedded AWS): its engine bucket and ledger table, the
# names `stack_client.StackClient.local` follows it by
LOCAL_BUCKET = "npa-workflow-local"
LOCAL_LEDGER_TABLE = "npa-workflow-ledger"
# -- a local `serve` stack: where its home (job records and logs) is, `{"home": "/abs/path", "pid": N}` in its bucket
SERVE_HOME_KEY = "catalog/serve.json"

# -- CloudFormation's 500 resources per stack. The stack has STACK_OWN_RESOURCES of its own and each spec adds
# RESOURCES_PER_SPEC (machine, role, policy, log group, alarm); tests/infra/test_infra_scale.py pins both against
# the default synth. `validate` estimates a folder's stack from them; the synth counts its own resources.
MAX_STACK_RESOURCES = 500
STACK_OWN_RESOURCES = 66
RESOURCES_PER_SPEC = 5


def estimated_resources(specs: int) -> int:
    return STACK_OWN_RESOURCES + RESOURCES_PER_SPEC * specs


def stack_resources_problem(resources: int, specs: int) -> tuple[str, str] | None:
    """(what, fix) for a stack of `resources` resources holding `specs` specs, or None when it fits: what says how
    many specs fit, the fix what to do with the others."""
    if resources <= MAX_STACK_RESOURCES:
        return None
    own = max(resources - RESOURCES_PER_SPEC * specs, 0)
    fit = max((MAX_STACK_RESOURCES - own) // RESOURCES_PER_SPEC, 0)
    what = (f"{specs} specs make a stack of {resources} CloudFormation resources, above CloudFormation's limit of "
            f"{MAX_STACK_RESOURCES} per stack ({own} for the engine, {RESOURCES_PER_SPEC} per spec): {fit} specs "
            "fit in one stack")
    fix = ("move the others to a folder of their own and deploy it as a second stack, `cdk deploy -c "
           "stackName=<another name>` from a checkout whose specs/ holds them")
    return what, fix


# -- deployable specs
SPEC_SUFFIXES = (".yaml", ".yml")
SPEC_API_PREFIX = "npa.workflow/"  # a workflow spec's apiVersion; the tool catalog's is npa.workflow.tools/…


def is_spec_document(doc: object) -> bool:
    """A workflow spec (not a tool catalog, not a run request)."""
    api = str(doc.get("apiVersion", "")) if isinstance(doc, dict) else ""
    return api.startswith(SPEC_API_PREFIX)


def deployable_spec_files(folder: Path) -> list[Path]:
    """The workflow specs a stack deploys from `folder`: every `*.yaml` / `*.yml` file whose document is a
    workflow spec, sorted by name. A file that does not parse is kept, so deploying it reports why."""
    from npa_workflow.spec.loader import load_yaml_file  # YAML only when a folder is read (not at import)

    found = []
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in SPEC_SUFFIXES):
        try:
            doc = load_yaml_file(path)
        except Exception:  # noqa: BLE001 - the spec's own load reports the problem with its location
            found.append(path)
            continue
        if is_spec_document(doc):
            found.append(path)
    return found
