"""The embedded AWS of `run` and `serve`: moto in this process, its patches, and what makes it outlive the process.

- `moto_server`, `in_process_calls`: moto's server on 127.0.0.1, and the process's own calls reaching it in place;
- `moto_lambda`: the deployed functions invoked in-process (no Docker);
- `moto_fixes`: where moto's Step Functions interpreter differs from AWS, the AWS behaviour restored;
- `moto_speedups`, `sdk_models`, `heap`: the same answers, faster;
- `pause_aware_waits`, `execution_ends`: the interpreter's waits and ends as the runtime needs them;
- `durable_aws`: DynamoDB items and S3 objects written through to disk;
- `event_pump`: the events AWS would send (S3 through EventBridge, execution ends), delivered to the functions;
- `step_gate`: what a local step may reach of all this.

Nothing here knows a job process (`local_jobs`) or a run (`local`)."""
