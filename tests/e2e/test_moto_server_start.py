"""The start-up shortcuts of `embedded_aws.moto_server` move work, they do not drop behaviour."""

from __future__ import annotations

from werkzeug.routing import Map, Rule

from npa_workflow.embedded_aws.moto_server import _lazy_url_builders


def test_lazy_url_builders_still_build_and_match() -> None:
    _lazy_url_builders()
    _lazy_url_builders()  # idempotent: not wrapped twice
    adapter = Map([Rule("/functions/<name>/invocations", endpoint="invoke"),
                   Rule("/items/<int:n>", endpoint="item")]).bind("localhost")
    assert adapter.build("invoke", {"name": "a b"}) == "/functions/a%20b/invocations"
    assert adapter.build("item", {"n": 3, "q": "z"}) == "/items/3?q=z"  # the append-unknown builder
    assert adapter.match("/functions/f1/invocations") == ("invoke", {"name": "f1"})

