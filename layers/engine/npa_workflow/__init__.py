"""npa-workflow: runs npa.workflow/v0.0.1 specs as AWS Step Functions state machines."""

__version__ = "0.1.0"
