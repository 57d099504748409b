"""The trigger Lambda: register a watch on a prefix (Task token), or take an S3 Object Created event."""
