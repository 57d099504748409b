"""The launch Lambda: the Task of every wave."""
