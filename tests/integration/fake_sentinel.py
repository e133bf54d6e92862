#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A scripted sentinel for the Sentinel tests (Python standard library only).

Listens on 127.0.0.1 (a free port, written to --port-file) and answers every
SENTINEL GET-MASTER-ADDR-BY-NAME with --host and --port, whatever the name (a sentinel that
names a server which is not the primary), or with the "HOST PORT" read from --addr-file at each
question (a test moves the primary by rewriting it); AUTH and anything else with +OK. Runs
until killed.
"""
import argparse
import socketserver


def read_command(f):
    line = f.readline()
    if not line.startswith(b"*"):
        return None
    args = []
    for _ in range(int(line[1:])):
        n = int(f.readline()[1:])
        args.append(f.read(n + 2)[:-2])
    return args


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", default="6379")
    ap.add_argument("--addr-file")
    a = ap.parse_args()

    def addr():
        if a.addr_file:
            with open(a.addr_file, "rb") as f:
                return f.read().split()[:2]
        return [a.host.encode(), a.port.encode()]

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            while True:
                cmd = read_command(self.rfile)
                if cmd is None:
                    return
                if cmd[0].upper() == b"SENTINEL":
                    out = b"*2\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in addr())
                else:
                    out = b"+OK\r\n"
                self.wfile.write(out)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(a.port_file, "w") as f:
        f.write(str(srv.server_address[1]))
    srv.serve_forever()


if __name__ == "__main__":
    main()
