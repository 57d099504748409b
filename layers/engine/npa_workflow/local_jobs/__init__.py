"""Local jobs: the laptop stand-in for SkyPilot managed jobs, each job a real subprocess with a durable id.

- `executor`, `job_wrapper`: launch, look up, cancel and reap a job; its exit recorded durably;
- `job_executor`: the engine's `JobExecutor` port over them;
- `containment`, `job_exits`: a job's whole process tree held, and its exit noticed at once;
- `gpu_devices`, `accelerators`, `gang`: devices per job, multi-node steps as N processes;
- `job_environment`, `code_checkout`: the environment and the staged code a job starts in.

Nothing here knows a run's runtime (`local`); of the embedded AWS only the step gate's grant writer
(`embedded_aws.step_gate.StepAccess`), which a launch calls to hand a job its keys."""
