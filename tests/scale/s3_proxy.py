"""A proxy on 127.0.0.1 in front of the S3 test server that cuts uploads short: a PUT (a
whole object, or one part of a multipart upload) whose path matches ``cut`` is passed on
for its first ``after`` bytes, then both connections are dropped, as a network failure
mid-file does; after ``times`` such cuts, the client's further attempts at it are answered
``400 IncompleteBody`` (S3's answer to a body cut short, which clients do not retry: the
test then waits for no retry schedule). Everything else is passed on whole."""

from __future__ import annotations

import http.client
import re
import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP = {"connection", "keep-alive", "expect", "transfer-encoding", "proxy-connection"}


class CuttingProxy:
    """``with CuttingProxy(upstream_port, cut=r"part-00001", after=512) as proxy:`` ...
    ``proxy.port``; ``proxy.cuts`` counts the uploads it cut."""

    def __init__(self, upstream: int, cut: str, after: int, times: int = 2) -> None:
        self.upstream, self.cut, self.after, self.times = upstream, re.compile(cut), after, times
        self.cuts = 0
        self.requests: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while size := int(self.rfile.readline().split(b";")[0], 16):
                        data += self.rfile.read(size)
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b""):
                        pass  # (trailers)
                    return data
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _pass(self) -> None:
                proxy.requests.append((self.command, self.path))
                if self.command == "PUT" and proxy.cut.search(self.path):
                    return self._drop() if proxy.cuts < proxy.times else self._refuse()
                body = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    reply = conn.getresponse()
                    data = reply.read()
                finally:
                    conn.close()
                self.send_response_only(reply.status, reply.reason)
                head = self.command == "HEAD"  # (its Content-Length is the object's)
                for k, v in reply.getheaders():
                    if k.lower() not in _HOP and (head or k.lower() != "content-length"):
                        self.send_header(k, v)
                if not head:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def _drop(self) -> None:
                """Pass the head and ``after`` bytes of the body on, then reset both ends."""
                proxy.cuts += 1
                head = f"{self.requestline}\r\n{self.headers}".encode("latin-1")
                part = self.rfile.read(min(proxy.after,
                                           int(self.headers.get("Content-Length") or 0)))
                with socket.create_connection(("127.0.0.1", proxy.upstream)) as up:
                    up.sendall(head + part)
                    _reset(up)
                _reset(self.connection)
                self.close_connection = True

            def _refuse(self) -> None:
                self._body()
                error = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>IncompleteBody"
                         b"</Code><Message>You did not provide the number of bytes specified "
                         b"by the Content-Length HTTP header</Message></Error>")
                self.send_response_only(400, "Bad Request")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]

    def __enter__(self) -> CuttingProxy:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP reset (no orderly end): the peer sees the connection drop."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
