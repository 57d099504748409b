"""The reap Lambda: cancels the jobs of an execution that ended FAILED, TIMED_OUT or ABORTED."""
