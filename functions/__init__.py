"""Lambda handlers: one thin module per function. Each parses its event, calls one engine function
(`npa_workflow.engine.*`) with the engine built from the environment, logs, and returns the result."""
