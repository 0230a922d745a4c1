# SPDX-License-Identifier: LGPL-2.1-or-later
"""A scripted stand-in for the model API the Codex CLI talks to.

It answers POST .../responses (the Responses API, streamed as server-sent
events) from a list of steps: step k is played when the request's input holds
the outputs of the k tool calls played before it. Every request is kept, so a
test can wait on the k-th one (an event, not a sleep) and read what the CLI
sent back for each call (function_call_output / custom_tool_call_output).
"""

import http.server
import json
import threading

USAGE = {"input_tokens": 1, "input_tokens_details": None, "output_tokens": 1,
         "output_tokens_details": None, "total_tokens": 2}


def sse(events):
    return "".join("event: %s\ndata: %s\n\n" % (e["type"], json.dumps(e))
                   for e in events).encode()


def call_outputs(body):
    """{call_id: output text} for the tool outputs in a request's input."""
    out = {}
    for item in body.get("input", []):
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output"):
            o = item.get("output")
            if isinstance(o, list):  # content items
                o = "".join(c.get("text", "") for c in o if isinstance(c, dict))
            elif isinstance(o, dict):
                o = o.get("content", json.dumps(o))
            out[item.get("call_id")] = o if isinstance(o, str) else json.dumps(o)
    return out


class MockModel:
    """steps: a list of callables step(body) -> output item (a dict), or None
    for the closing assistant message. Each item given a call_id."""

    def __init__(self, steps):
        self.steps = steps
        self.requests = []  # parsed bodies of POST .../responses, in order
        self.other = []  # any other request line, for the report
        self.cond = threading.Condition()
        self.call_ids = ["call_cordon_%d" % i for i in range(len(steps))]
        mock = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def reply(self, code, ctype, data):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                with mock.cond:
                    mock.other.append("GET " + self.path)
                self.reply(404, "application/json", b'{"error":"not mocked"}')

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(n)
                if not self.path.endswith("/responses"):
                    with mock.cond:
                        mock.other.append("POST " + self.path)
                    self.reply(404, "application/json", b'{"error":"not mocked"}')
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self.reply(400, "application/json", b'{"error":"bad json"}')
                    return
                self.reply(200, "text/event-stream", mock.answer(body))

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, body):
        outs = call_outputs(body)
        k = 0
        while k < len(self.steps) and self.call_ids[k] in outs:
            k += 1
        rid = "resp_%d" % len(self.requests)
        if k < len(self.steps):
            item = dict(self.steps[k](body), call_id=self.call_ids[k])
        else:
            item = {"type": "message", "role": "assistant", "id": "msg_" + rid,
                    "content": [{"type": "output_text", "text": "all steps done"}]}
        with self.cond:
            self.requests.append(body)
            self.cond.notify_all()
        return sse([{"type": "response.created", "response": {"id": rid}},
                    {"type": "response.output_item.done", "item": item},
                    {"type": "response.completed", "response": {"id": rid, "usage": USAGE}}])

    def wait_requests(self, n, timeout, alive=lambda: True):
        """Wait until n requests came (the timeout is only a safety net);
        alive() false (the CLI exited) ends the wait early."""
        with self.cond:
            return self.cond.wait_for(lambda: len(self.requests) >= n or not alive(),
                                      timeout) and len(self.requests) >= n

    def output_of(self, step):
        """The output the CLI sent back for step's call, or None."""
        cid = self.call_ids[step]
        with self.cond:
            for body in self.requests:
                o = call_outputs(body).get(cid)
                if o is not None:
                    return o
        return None

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
