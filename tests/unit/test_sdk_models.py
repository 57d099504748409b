"""`embedded_aws.sdk_models`: botocore's data parsed once per process, each loader still getting its own answer."""

from __future__ import annotations

import botocore.session
from botocore.loaders import Loader

from npa_workflow.embedded_aws.sdk_models import sdk_models_parsed_once


def model(loader: Loader, service: str = "dynamodb") -> dict:
    return loader.load_service_model(service, "service-2")


def test_loaders_share_what_they_would_each_build() -> None:
    fresh = model(Loader())
    with sdk_models_parsed_once():
        first, second = Loader(), Loader()
        shared = model(first)
        assert model(second) is shared  # parsed once
        assert shared == fresh  # the same model a loader builds alone (the sdk extras merged once or twice)
        assert first.list_available_services("service-2") == Loader().list_available_services("service-2")
        other = Loader(extra_search_paths=["/nonexistent-models"], include_default_extras=False)
        assert model(other) is not shared  # another search path or other extras: its own entry
        session = botocore.session.get_session()
        client = session.create_client("dynamodb", region_name="us-east-1")
        assert client.meta.service_model.operation_model("Query").name == "Query"
    assert model(Loader()) is not shared  # undone on exit
    assert Loader.__dict__["load_data_with_path"].__name__ == "_wrapper"  # botocore's own method back
