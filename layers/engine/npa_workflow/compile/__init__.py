"""Compiling specs to Amazon States Language (JSONPath), a pure function."""
