"""The inbox Lambda: an object under inbox/ (a spec or a run request) starts a run, or is rejected with every error."""
