"""A small OpenAI-compatible server for fault injection ONLY (HTTP 500s, mid-stream disconnects, everything
failing). It tests the suite's own fault handling; no benchmark case ever measures it.

    python tests/fakeserver.py --port P [--error-every N] [--disconnect-every N] [--fail-all]

Failures are deterministic: request k (1-based) fails when k % N == 0, so N=5 injects exactly 20%.
It speaks what AIPerf and rackbench read: streaming /v1/chat/completions with a usage chunk, /v1/models,
/health, /version and vLLM-style /metrics counters.
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"requests": 0, "prompt": 0, "generated": 0, "running": 0, "succeeded": 0}
STARTED = time.monotonic()
LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    opts: argparse.Namespace

    def log_message(self, fmt, *args):  # one line per request on stderr -> the process log
        pass

    def _json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self._json(200, {})
        elif self.path == "/version":
            self._json(200, {"version": self.opts.version})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": self.opts.model, "object": "model"}]})
        elif self.path == "/metrics":
            with LOCK:
                s = dict(STATE)
            lab = f'engine="0",model_name="{self.opts.model}"'
            text = "".join(f"# TYPE vllm:{name} {kind}\nvllm:{name}{{{lab}}} {value}\n" for name, kind, value in (
                ("prompt_tokens_total", "counter", s["prompt"]), ("generation_tokens_total", "counter", s["generated"]),
                ("request_success_total", "counter", s["succeeded"]), ("num_requests_running", "gauge", s["running"]),
                ("num_requests_waiting", "gauge", 0)))
            data = text.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(404, {"error": "not found"})

    def _chunk(self, payload: str) -> None:
        data = payload.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with LOCK:
            STATE["requests"] += 1
            k = STATE["requests"]
        o = self.opts
        if o.fail_all or (o.error_every and k % o.error_every == 0):
            self._json(500, {"error": {"message": "injected failure", "type": "InternalServerError"}})
            return
        n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with LOCK:
            STATE["running"] += 1
        try:
            base = {"id": f"fake-{k}", "object": "chat.completion.chunk", "model": o.model}
            self._chunk("data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})
                        + "\n\n")
            time.sleep(o.ttft_ms / 1000)
            for i in range(n):
                if o.disconnect_every and k % o.disconnect_every == 0 and i == n // 2:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)     # mid-stream: no terminating chunk
                    self.close_connection = True
                    return
                self._chunk("data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {"content": " tok"}}]})
                            + "\n\n")
                with LOCK:
                    STATE["generated"] += 1
                time.sleep(o.itl_ms / 1000 * (1 + o.decay_per_s * (time.monotonic() - STARTED)))
            usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
            self._chunk("data: " + json.dumps({**base, "choices": [{"index": 0, "delta": {},
                                                                     "finish_reason": "length"}], "usage": usage})
                        + "\n\n")
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            with LOCK:
                STATE["prompt"] += prompt
                STATE["succeeded"] += 1
        finally:
            with LOCK:
                STATE["running"] -= 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--version", default="0.31.0")
    ap.add_argument("--error-every", type=int, default=0)
    ap.add_argument("--disconnect-every", type=int, default=0)
    ap.add_argument("--fail-all", action="store_true")
    ap.add_argument("--ttft-ms", type=float, default=20)
    ap.add_argument("--itl-ms", type=float, default=2)
    ap.add_argument("--decay-per-s", type=float, default=0.0, help="a drifting server: each token takes "
                    "(1 + this x seconds since start) x itl-ms")
    Handler.opts = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", Handler.opts.port), Handler)
    server.daemon_threads = True
    print(f"fake server on {Handler.opts.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
