"""The environment variable names the engine functions read (set by the CDK app and by the local twin), and
the variables every step's job sees, on SkyPilot and locally alike (`job_identity`)."""

from __future__ import annotations

import hashlib

LEDGER_TABLE = "NPA_WORKFLOW_LEDGER_TABLE"
BUCKET = "NPA_WORKFLOW_BUCKET"
EXECUTOR = "NPA_WORKFLOW_EXECUTOR"
RETENTION_DAYS = "NPA_WORKFLOW_RETENTION_DAYS"
LOCAL_STATE_DIR = "NPA_WORKFLOW_LOCAL_STATE_DIR"
HOME = "NPA_WORKFLOW_HOME"
STEP_SECRETS_ARN = "NPA_WORKFLOW_SECRETS_ARN"
SKYPILOT_ENDPOINT = "SKYPILOT_API_SERVER_ENDPOINT"
SKYPILOT_TOKEN_SECRET_ARN = "SKYPILOT_TOKEN_SECRET_ARN"

# The inbox only: the deployed machines and what it needs to create ad-hoc ones.
STATE_MACHINES = "NPA_WORKFLOW_STATE_MACHINES"
ALLOW_AD_HOC = "NPA_WORKFLOW_ALLOW_AD_HOC"
AD_HOC_MACHINE_PREFIX = "NPA_WORKFLOW_AD_HOC_MACHINE_PREFIX"
AD_HOC_ROLE_ARN = "NPA_WORKFLOW_AD_HOC_ROLE_ARN"
AD_HOC_LOG_GROUP_ARN = "NPA_WORKFLOW_AD_HOC_LOG_GROUP_ARN"
HEARTBEAT_SECONDS = "NPA_WORKFLOW_HEARTBEAT_SECONDS"
MAX_WAIT_SECONDS = "NPA_WORKFLOW_MAX_WAIT_SECONDS"
WATCH_INTERVAL_SECONDS = "NPA_WORKFLOW_WATCH_INTERVAL_SECONDS"  # the watch schedule (trigger bounds)
MACHINE_ARN_PREFIX = "NPA_WORKFLOW_MACHINE_ARN_PREFIX"  # a machine name of catalog/machines.json → its ARN

# The local twin only: its step gate (embedded_aws.step_gate), which the wiring hands each local job.
STEP_ENDPOINT = "NPA_WORKFLOW_STEP_ENDPOINT"  # the gate's URL: what a step's AWS_ENDPOINT_URL is
STEP_GRANTS = "NPA_WORKFLOW_STEP_GRANTS"  # the folder of the grants the gate honours

# Every function: where the engine's resources are.
ENGINE = (LEDGER_TABLE, BUCKET, EXECUTOR, RETENTION_DAYS)


# --- what a step's job sees -----------------------------------------------------------------------------------
# One definition for both executors: the SkyPilot task's `envs` (render.skypilot) are built from it, and a local
# job is started with exactly that task's `envs` (engine.launch), so a step sees the same variables wherever it
# runs (tests/unit/test_job_environment_parity.py compares them for every example).
JOB_WORKFLOW = "NPA_WORKFLOW_NAME"  # the spec's metadata.name
JOB_RUN_ID = "NPA_WORKFLOW_RUN_ID"
JOB_STATE = "NPA_WORKFLOW_STATE"  # the task name: the state, `-<round>` for a round of a leaf loop
JOB_ATTEMPT_ID = "NPA_WORKFLOW_ATTEMPT_ID"  # unique per wave and attempt (loop rounds included)
JOB_FENCE_SEQUENCE = "NPA_WORKFLOW_FENCE_SEQUENCE"  # grows with every attempt of the state in the run
JOB_FENCE_ATTEMPT = "NPA_WORKFLOW_FENCE_ATTEMPT"
JOB_ATTEMPT = "NPA_WORKFLOW_ATTEMPT"  # 1-based attempt of this wave (retries)
JOB_WAVE_KEY = "NPA_WORKFLOW_WAVE_KEY"  # the wave's ledger key: the state and its loop counters
JOB_IDENTITY = (JOB_WORKFLOW, JOB_RUN_ID, JOB_STATE, JOB_ATTEMPT_ID, JOB_FENCE_SEQUENCE, JOB_FENCE_ATTEMPT,
                JOB_ATTEMPT, JOB_WAVE_KEY)
JOB_IMAGE = "NPA_TASK_IMAGE"  # the step's image, when it has one
JOB_CODE_URI = "NPA_WORKFLOW_CODE_URI"  # the run's staged step code, when it has some


def attempt_id(workflow: str, run_id: str, identity: str, attempt: int) -> str:
    return hashlib.sha256(f"{workflow}/{run_id}/{identity}/{attempt}".encode()).hexdigest()


def job_identity(*, workflow: str, run_id: str, task_name: str, identity: str, wave_key: str, fence_sequence: int,
                 attempt: int) -> dict[str, str]:
    """The identity variables of one attempt of one step, in `JOB_IDENTITY`'s order. `identity` (the launch's
    wave key, or the task name where no launch keys it) makes the attempt id unique per wave and attempt."""
    return {
        JOB_WORKFLOW: workflow,
        JOB_RUN_ID: run_id,
        JOB_STATE: task_name,
        JOB_ATTEMPT_ID: attempt_id(workflow, run_id, identity, attempt),
        JOB_FENCE_SEQUENCE: str(fence_sequence),
        JOB_FENCE_ATTEMPT: str(attempt),
        JOB_ATTEMPT: str(attempt),
        JOB_WAVE_KEY: wave_key,
    }
