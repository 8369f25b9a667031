"""A webhook receiver for tests and scripts/bench-webhooks: an HTTP server on
127.0.0.1:PORT that appends one JSON line per request to LOG ("start" when
the request is read, "done" when answered) and answers as MODE says:
  ok            200 at once
  slow:S        200 after S seconds
  status:N      N (e.g. 500) every time
  fail:K        500 for the first K requests, then 200
  hang          never answers (to be killed mid-delivery)

Usage: webhook_receiver.py PORT LOG MODE"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3]
lock = threading.Lock()
count = [0]


def record(event, h, body):
    line = json.dumps({"event": event, "delivery": h.get("Agenthost-Delivery"),
                       "signature": h.get("Agenthost-Signature"),
                       "invocation": h.get("Agenthost-Invocation"),
                       "attempt": h.get("Agenthost-Attempt"),
                       "content_type": h.get("Content-Type"),
                       "body": body.decode("utf-8", "replace"), "at": time.time()})
    with lock, open(LOG, "a") as f:
        f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        record("start", self.headers, body)
        with lock:
            count[0] += 1
            n = count[0]
        kind, _, arg = MODE.partition(":")
        code = 200
        if kind == "hang":
            time.sleep(3600)
        elif kind == "slow":
            time.sleep(float(arg))
        elif kind == "status":
            code = int(arg)
        elif kind == "fail" and n <= int(arg):
            code = 500
        self.send_response(code)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
        record("done" if 200 <= code < 300 else f"answered {code}", self.headers, body)


class Server(ThreadingHTTPServer):
    request_queue_size = 2048
    daemon_threads = True


srv = Server(("127.0.0.1", PORT), Handler)
print("ready", flush=True)
srv.serve_forever()
