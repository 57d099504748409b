"""The `npa-workflow` command line (typer + rich)."""
