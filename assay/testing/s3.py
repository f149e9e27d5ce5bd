"""A real S3 API server on 127.0.0.1 for tests and benchmarks: moto's `ThreadedMotoServer`.

It speaks the S3 REST API over HTTP (signed requests, `ListObjectsV2`, and `If-None-Match: *` on
PUT answered 412 when the key exists), keeping objects in memory for the server's lifetime.

    with S3Server(bucket="evals") as s3:
        s3.env            # the variables a client needs: ASSAY_S3_ENDPOINT, AWS_* (dummy keys)
        s3.url("assay")   # "s3://evals/assay"
"""

from __future__ import annotations

import logging
from typing import Self

from assay.testing._background import Started


class S3Server(Started):
    """moto's S3 server in a thread of this process, one bucket created.

    Args:
        bucket: the bucket to create (3 to 63 characters).
    """

    def __init__(self, bucket: str = "evals") -> None:
        self.bucket = bucket
        self.endpoint = ""
        self._server = None

    @property
    def env(self) -> dict[str, str]:
        """The environment under which Assay (and Polars, DuckDB, boto3) reach this server."""
        return {
            "ASSAY_S3_ENDPOINT": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def url(self, prefix: str = "") -> str:
        """`s3://<bucket>/<prefix>`."""
        return f"s3://{self.bucket}/{prefix}".rstrip("/")

    def start(self) -> Self:
        import boto3
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        self._server, self.endpoint = server, f"http://{host}:{port}"
        env = self.env
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            region_name=env["AWS_REGION"],
        ).create_bucket(Bucket=self.bucket)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
