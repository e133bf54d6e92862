#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted HTTP back end for the HTTP delivery tests (Python standard library only).

Listens on 127.0.0.1 (--port, default 0: a free one; written to --port-file), HTTP/1.1 with keep-alive,
TLS with --cert/--key. What it answers is chosen by the request's path:
  /ok                  200
  /code/C              always C (body "answer C from the back end")
  /first/C/N           C for the first N deliveries of each Idempotency-Key, then 200
  /ra/SECS/N[/MS[/FIRST_MS]]  the first N requests to this path: 429 with Retry-After: SECS
                       (after FIRST_MS milliseconds), then 200 (after MS milliseconds)
  /radate/SECS/N       the same with Retry-After as an HTTP date SECS from now
  /redirect            301 to /ok
  /sleep/MS            200 after MS milliseconds
With --delay MS every answer comes MS milliseconds later still (a slow back end).
Each request is one JSON line in --log: time, path, headers (lower-case names), body, the
number of the TCP connection it came on, and with --secret-file whether its Standard Webhooks
signature verifies (computed here with hmac and hashlib, independently of the worker).
"""
import argparse
import base64
import email.utils
import hashlib
import hmac
import http.server
import json
import socketserver
import ssl
import threading
import time

lock = threading.Lock()
state = {"conns": 0, "ra": {}, "seen": {}}
args = None
log = None


def verify(headers, body):
    if args.secret_file is None:
        return None
    secret = open(args.secret_file).read().strip()
    if secret.startswith("whsec_"):
        secret = secret[6:]
    key = base64.b64decode(secret)
    msg_id = headers.get("webhook-id", "")
    ts = headers.get("webhook-timestamp", "")
    signed = msg_id.encode() + b"." + ts.encode() + b"." + body
    want = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    got = [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split()
           if s.startswith("v1,")]
    fresh = ts.isdigit() and abs(time.time() - int(ts)) < 300
    return fresh and any(hmac.compare_digest(want, g) for g in got)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with lock:
            state["conns"] += 1
            self.conn_no = state["conns"]

    def log_message(self, *a):
        pass

    def answer(self, code, extra=None, body=None):
        body = body if body is not None else ("answer %d from the back end" % code).encode()
        self.send_response(code)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        headers = {k.lower(): v for k, v in self.headers.items()}
        parts = self.path.strip("/").split("/")
        rec = {"t": time.time(), "path": self.path, "headers": headers,
               "body": body.decode("utf-8", "replace"), "conn": self.conn_no,
               "sig_ok": verify(headers, body)}
        with lock:
            log.write(json.dumps(rec) + "\n")
            log.flush()
            key = headers.get("idempotency-key", "")
            state["seen"][key] = state["seen"].get(key, 0) + 1
            seen = state["seen"][key]
            ra = state["ra"][self.path] = state["ra"].get(self.path, 0) + 1
        time.sleep(args.delay / 1000.0)
        if parts[0] == "code":
            self.answer(int(parts[1]))
        elif parts[0] == "first":
            self.answer(int(parts[1]) if seen <= int(parts[2]) else 200)
        elif parts[0] in ("ra", "radate") and ra <= int(parts[2]):
            time.sleep(int(parts[4]) / 1000.0 if len(parts) > 4 else 0)
            secs = int(parts[1])
            when = (str(secs) if parts[0] == "ra" else
                    email.utils.formatdate(time.time() + secs, usegmt=True))
            self.answer(429, {"Retry-After": when})
        elif parts[0] in ("ra", "radate"):
            time.sleep(int(parts[3]) / 1000.0 if len(parts) > 3 else 0)
            self.answer(200)
        elif parts[0] == "redirect":
            self.answer(301, {"Location": "/ok"})
        elif parts[0] == "sleep":
            time.sleep(int(parts[1]) / 1000.0)
            self.answer(200)
        else:
            self.answer(200)

    do_GET = do_POST


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    global args, log
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--log", required=True)
    p.add_argument("--delay", type=int, default=0)
    p.add_argument("--secret-file")
    p.add_argument("--cert")
    p.add_argument("--key")
    args = p.parse_args()
    log = open(args.log, "a")
    srv = Server(("127.0.0.1", args.port), Handler)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
