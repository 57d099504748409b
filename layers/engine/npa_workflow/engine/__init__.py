"""The engine functions behind the Lambda handlers: launch, decide, trigger, watch, cleanup/reap.

Each takes an `Engine` (the ports it talks through) and the event the state machine sends;
the cloud handlers and the local runtime call the very same functions.
"""
