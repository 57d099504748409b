"""`AwsClients`: the AWS SDK clients of one engine, from one boto3 session (the only place the engine's wiring
touches boto3/botocore; the engine itself talks through the ports in `engine.ports`).

Clients are created once per engine and reused: creating a client is not thread-safe, using one is. The watch
pass tends waves on a thread pool, so clients get a connection pool as large as that pool (`pool_size`) instead
of botocore's default of 10 (more threads than connections only queue and churn connections).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")


def forget_blank_regions(environ: MutableMapping[str, str] = os.environ) -> None:
    """An empty (or blank) AWS_REGION / AWS_DEFAULT_REGION — CI templates often set one so — is unset:
    botocore takes "" as the region (`https://cloudformation..amazonaws.com`) instead of looking further."""
    for name in REGION_VARIABLES:
        if name in environ and not environ[name].strip():
            del environ[name]


class AwsClients:
    def __init__(self, *, endpoint_url: str | None, region: str | None, pool_size: int) -> None:
        import boto3
        from botocore.config import Config

        forget_blank_regions()
        region = (region or "").strip() or None

        self.endpoint_url = endpoint_url
        self._session = boto3.session.Session(region_name=region)
        self._pooled = Config(max_pool_connections=pool_size)

    def client(self, service: str, *, pooled: bool = True) -> Any:
        """A new client of `service` at the engine's endpoint (the local twin's moto server, else AWS)."""
        return self._session.client(service, endpoint_url=self.endpoint_url,
                                    config=self._pooled if pooled else None)
