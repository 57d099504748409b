"""The contract between the compiled state machine and the engine, written once.

- `functions`: the function table (slot, ARN placeholder, handler path, environment, timeout, memory);
- `payloads`: what each Task sends its Lambda and what the machine reads back;
- `execution`: the state data (the execution input, a Map member's item);
- `events`: the EventBridge events the functions consume (S3 Object Created, Execution Status Change);
- `errors`: every error name the machine retries, catches or is stopped with, and the Lambda exceptions;
- `keys`: loop/group keys in the state data and the structured wave key;
- `run_ids`: the one run-id rule (and execution names of resumed runs);
- `stack`: the deployed stack's outputs and which spec files a stack deploys;
- `environment`: the environment variable names the functions read.

Importing this package loads nothing heavier than pydantic (payloads, events): no boto3, no YAML, no spec
stack, so every Lambda handler may import it within its cold-start budget (tests/unit/test_handler_modules.py).
Submodules are imported explicitly (`from npa_workflow.protocol.errors import WAVE_FAILED`).
"""
