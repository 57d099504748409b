"""The local runtime: `run` and `serve`, which wire the embedded AWS (`embedded_aws`) and local jobs (`local_jobs`)
into the deployed stack on one machine, and what reads a local run back (`report`, `run_waves`, `gc`)."""
