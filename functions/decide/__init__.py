"""The decide Lambda: read and record a decision artifact."""
