"""The JSON Schema of a spec document, generated from the model, for editors."""

from __future__ import annotations

from typing import Any

from npa_workflow.spec.model import Spec


def spec_json_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "npa.workflow/v0.0.1 spec"
    return schema
