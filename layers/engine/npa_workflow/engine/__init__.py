"""The engine functions behind the Lambda handlers: inbox, launch, decide, trigger, watch, cleanup/reap.

Each takes an `Engine` (the ports it talks through) and the event its function receives. The cloud's handlers
(`functions/`) call them, and so does the twin: the same handlers, invoked in-process by its moto Lambda
(`embedded_aws.moto_lambda`); `run` calls `engine.start.start_run` (the inbox's own sequence) and, on Ctrl-C,
`engine.cleanup.reap` itself.
"""
