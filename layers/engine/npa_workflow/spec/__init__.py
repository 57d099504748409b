"""The npa.workflow/v0.0.1 language: loading, the model, tokens, validation and the tool catalog."""
