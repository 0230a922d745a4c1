# SPDX-License-Identifier: LGPL-2.1-or-later
"""A loopback HTTP upstream for the managed-network tests.

GET and POST answer 200 "hello from upstream" (followed by the request's path
when with_path is set); nothing is logged. Standard library only."""

import http.server
import threading

BODY = b"hello from upstream"


def serve_upstream(ctx=None, with_path=False):
    """Start the upstream on 127.0.0.1, an ephemeral port, in a daemon thread
    (TLS when ctx, an ssl.SSLContext for the server side, is given); returns
    the server (its port: server.server_address[1])."""

    class Upstream(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = BODY + (b" " + self.path.encode() if with_path else b"")
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    if ctx:
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
