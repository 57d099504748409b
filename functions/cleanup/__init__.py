"""The cleanup Lambda: the Catch target of every state; cancels the run's jobs and names the root cause."""
