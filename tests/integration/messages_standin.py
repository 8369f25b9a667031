"""A stand-in for Anthropic's Messages API on loopback, enough for Claude Code.

Claude Code (what @anthropic-ai/claude-agent-sdk's query() starts) calls
POST /v1/messages, streamed (server-sent events) or as one JSON answer, and
POST /v1/messages/count_tokens. This server answers both from a script read
out of the conversation's first user text, so a test says what the "model"
does in its prompt:

  RUN: <command>     a tool_use turn calling Bash with <command> (when the
                     request offers a tool named Bash); the next request, which
                     carries the tool_result, is answered "ran: <its output>"
  ERROR: 429|500|overloaded
                     that HTTP error with the provider's JSON error body
  SLOW: <seconds>    a stream that sends message_start and then waits
  SAY: <text>        "said: <text>"
  anything else      "echo: <text>"

Every answer has a usage block (USAGE_IN input tokens, 10 of them cache reads,
and USAGE_OUT output tokens), so the gateway's metering can be checked
against the requests this server counted. `requests` keeps each request's
path and body; `key` is the only x-api-key accepted (401 otherwise).

Run alone for a manual test or a benchmark: `python3 messages_standin.py PORT`.
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USAGE_IN, USAGE_OUT = 369, 135

ERRORS = {
    "429": (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit (stand-in)"),
    "500": (500, "api_error", "Internal server error (stand-in)"),
    "overloaded": (529, "overloaded_error", "Overloaded (stand-in)"),
}


def _text_of(content):
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
    return "\n".join(parts)


def _tool_result(messages):
    """The text of the tool_result in the last user message, or None."""
    if not messages or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if not isinstance(content, list):
        return None
    for block in content:
        if block.get("type") == "tool_result":
            c = block.get("content")
            return _text_of(c) if not isinstance(c, str) else c
    return None


def _script(messages):
    """The first user text's directive: (kind, argument)."""
    for m in messages:
        if m.get("role") == "user":
            text = _text_of(m.get("content"))
            for line in text.splitlines():
                hit = re.match(r"\s*(RUN|ERROR|SLOW|SAY):\s*(.*)$", line)
                if hit:
                    return hit.group(1), hit.group(2).strip()
    last = messages[-1].get("content") if messages else ""
    if isinstance(last, list):  # Claude Code puts reminders in blocks before the prompt
        texts = [b.get("text", "") for b in last if b.get("type") == "text"]
        last = texts[-1] if texts else ""
    return "ECHO", (last or "").strip()


def answer_for(req):
    """(content blocks, stop_reason) or ("error", status, type, message) or ("slow", s)."""
    messages = req.get("messages") or []
    kind, arg = _script(messages)
    result = _tool_result(messages)
    if result is not None:
        return [{"type": "text", "text": "ran: " + result.strip()}], "end_turn"
    if kind == "ERROR":
        return ("error",) + ERRORS.get(arg, ERRORS["500"])
    if kind == "SLOW":
        return ("slow", float(arg or 60))
    if kind == "SAY":
        return [{"type": "text", "text": "said: " + arg}], "end_turn"
    tools = {t.get("name") for t in req.get("tools") or []}
    if kind == "RUN" and "Bash" in tools:
        return [{"type": "tool_use", "id": "toolu_%06d" % len(messages), "name": "Bash",
                 "input": {"command": arg, "description": "stand-in command"}}], "tool_use"
    return [{"type": "text", "text": "echo: " + (arg if kind == "ECHO" else kind + ": " + arg)}], "end_turn"


def usage():
    return {"input_tokens": USAGE_IN - 10, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 10, "output_tokens": USAGE_OUT}


def sse_events(req, blocks, stop):
    u = usage()
    start_usage = dict(u, output_tokens=1)
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_standin", "type": "message", "role": "assistant", "model": req.get("model", "x"),
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}}
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                          "delta": {"type": "text_delta", "text": b["text"]}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": dict(b, input={})}
            yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(b["input"])}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": u["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        srv = self.server
        path = self.path.split("?")[0]
        if srv.key and self.headers.get("x-api-key") != srv.key:
            return self.json(401, {"type": "error", "error": {
                "type": "authentication_error", "message": "invalid x-api-key"}})
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            return self.json(400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": "body is not JSON"}})
        with srv.lock:
            srv.requests.append((path, req))
        if path == "/v1/messages/count_tokens":
            return self.json(200, {"input_tokens": USAGE_IN})
        if path != "/v1/messages":
            return self.json(404, {"type": "error", "error": {"type": "not_found_error",
                                                              "message": "no such path"}})
        got = answer_for(req)
        if got[0] == "error":
            _, status, etype, msg = got
            return self.json(status, {"type": "error", "error": {"type": etype, "message": msg}})
        if got[0] == "slow":
            return self.slow(req, got[1])
        blocks, stop = got
        if req.get("stream"):
            return self.stream(req, blocks, stop)
        self.json(200, {"id": "msg_standin", "type": "message", "role": "assistant",
                        "model": req.get("model", "x"), "content": blocks, "stop_reason": stop,
                        "stop_sequence": None, "usage": usage()})

    def json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_standin")
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, name, obj):
        self.wfile.write(f"event: {name}\ndata: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()

    def stream(self, req, blocks, stop):
        self.start_stream()
        for name, obj in sse_events(req, blocks, stop):
            self.event(name, obj)

    def slow(self, req, seconds):
        """A provider that hangs mid-stream: message_start, then pings only."""
        self.start_stream()
        events = sse_events(req, [{"type": "text", "text": "late"}], "end_turn")
        name, obj = next(events)
        self.event(name, obj)
        deadline = time.time() + seconds
        try:
            while time.time() < deadline and not self.server.stopping:
                time.sleep(0.5)
            for name, obj in events:
                self.event(name, obj)
        except OSError:
            pass

    def log_message(self, *args):
        pass


class StandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port=0, key=None):
        super().__init__(("127.0.0.1", port), Handler)
        self.key, self.lock, self.requests, self.stopping = key, threading.Lock(), [], False
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping = True
        self.shutdown()
        self.server_close()

    def messages(self):
        with self.lock:
            return [r for p, r in self.requests if p == "/v1/messages"]


if __name__ == "__main__":
    srv = StandIn(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(srv.url, flush=True)
    srv.serve_forever()
