"""The names a spec deploys as: its state machine and log group, derived from the stack name and the spec's
`metadata.name` alone, deterministically (the same spec always gets the same names, on every synth). The CDK app
(`infra.names`) names what it deploys with these; `npa-workflow validate` prints them, so a spec whose name AWS's
character sets do not allow is seen to be renamed before a deploy.

AWS facts the mapping relies on:

- a state machine name is 1–80 characters, and "to enable logging with CloudWatch Logs, the name should only
  contain 0-9, A-Z, a-z, - and _" (Step Functions CreateStateMachine, `name`); every machine here logs at ALL;
- a CloudWatch Logs log group name is 1–512 characters of `[\\.\\-_/#A-Za-z0-9]` (CreateLogGroup, `logGroupName`;
  cfn-lint E1155/E3031 check it in the template);
- a CloudFormation stack name is `[A-Za-z][A-Za-z0-9-]*`: it never contains `_`;
- IAM resource ARNs and EventBridge patterns match by prefix (`...:stateMachine:<stack>_*`, `{"prefix": ...}`).

So a machine name uses only `[A-Za-z0-9_-]` (legal for a logged machine and for a log group): `<stack>_<spec name>`
when the spec name is made of those characters already, else the name folded to ASCII (`résumé` → `resume`), every
other character (`.` included) replaced by `-`, and 8 hex characters of the original name's SHA-256 appended so two
names that fold alike stay distinct (`train(v2)` → `train-v2--<hash>`). The `_` after the stack name cannot occur in
a stack name, so the machine prefix `<stack>_` never matches another stack's machines: every policy and the reap
rule name the prefix, not each machine, and stay the same size whatever the number of specs.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

DEFAULT_STACK_NAME = "NpaWorkflow"  # the CDK app's context `stackName` when none is given
MAX_MACHINE_NAME = 80
MACHINE_SEPARATOR = "_"
# Characters legal in a logged state machine's name (and so in its log group's name).
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
TAG_HEX = 8
LOG_GROUP_PREFIX = "/aws/vendedlogs/states/"
# The ad-hoc machines the inbox creates are `<stack>_adhoc_<16 hex>`: no deployed spec may take it.
AD_HOC_INFIX = "adhoc_"


class NoRoomForSpecNames(ValueError):
    """The stack name is so long that a folded spec name no longer fits in 80 characters."""


def machine_prefix(stack_name: str) -> str:
    return stack_name + MACHINE_SEPARATOR


def ad_hoc_prefix(stack_name: str) -> str:
    return machine_prefix(stack_name) + AD_HOC_INFIX


def name_tag(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:TAG_HEX]


def _ascii(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def machine_name(stack_name: str, spec_name: str) -> str:
    """`<stack>_<spec name>`, mapped to `[A-Za-z0-9_-]` and at most 80 characters (see the module doc)."""
    prefix = machine_prefix(stack_name)
    room = MAX_MACHINE_NAME - len(prefix)
    if spec_name and not _UNSAFE.search(spec_name) and len(spec_name) <= room:
        return prefix + spec_name
    tag = name_tag(spec_name)
    keep = room - len(tag) - 1
    if keep < 1:
        raise NoRoomForSpecNames(f"stack name {stack_name!r} leaves no room for spec names in 80-character machine "
                                 "names (fix: a shorter context stackName)")
    folded = _UNSAFE.sub("-", _ascii(spec_name))[:keep]
    return f"{prefix}{folded}-{tag}"


def log_group_name(machine: str) -> str:
    return LOG_GROUP_PREFIX + machine


@dataclass(frozen=True)
class DeployedNames:
    state_machine: str
    log_group: str
    renamed: bool  # the spec name was mapped (folded, shortened, hashed), not kept as written

    def to_json(self) -> dict[str, object]:
        return {"stateMachine": self.state_machine, "logGroup": self.log_group, "renamed": self.renamed}


def deployed_names(spec_name: str, stack_name: str = DEFAULT_STACK_NAME) -> DeployedNames:
    machine = machine_name(stack_name, spec_name)
    return DeployedNames(machine, log_group_name(machine), machine != machine_prefix(stack_name) + spec_name)
