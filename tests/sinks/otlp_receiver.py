"""A test OTLP/HTTP receiver on 127.0.0.1: accepts ``POST /v1/logs`` as a collector does
(protobuf body, gzip or not) and decodes each request with the opentelemetry-proto
definitions, so tests check what was really sent."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)


class Receiver:
    """What the receiver got: decoded requests, their headers, and the answers to give."""

    def __init__(self) -> None:
        self.requests: list[ExportLogsServiceRequest] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.fail_next = 0  # answer this many requests with 400 (not retried by the SDK)
        self.url = ""

    def log_records(self) -> list[tuple[Any, Any, Any]]:
        """Every received log record with its resource and scope."""
        return [(rl.resource, sl.scope, rec) for req in self.requests
                for rl in req.resource_logs for sl in rl.scope_logs for rec in sl.log_records]


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            encoding = self.headers.get("Content-Encoding")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if got.fail_next:
                got.fail_next -= 1
                self.send_response(400)
                self.end_headers()
                return
            assert self.headers.get("Content-Type") == "application/x-protobuf"
            request = ExportLogsServiceRequest()
            request.ParseFromString(body)
            got.requests.append(request)
            got.headers.append({k.lower(): v for k, v in self.headers.items()})
            got.paths.append(self.path)
            answer = ExportLogsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
