#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check.py - the fault suite's end-to-end checker: nothing lost, duplicates explained.

Inputs:
  --admitted FILE   (repeatable) lines "<id> <payload>" that producers were told are admitted
                    (sluice-enqueue --ids, sluice-faultload --out); summary lines
                    ("admitted=N ...") are skipped
  --processed FILE  (repeatable) lines "<id> <payload>[ ...]" that workers processed
                    (sluice-worker --record)
  --redis URL       redis://127.0.0.1:PORT or unix:///path/redis.sock, with --queue Q: the dead
                    stream sluice:{Q}:dead is read (XRANGE) and its entries' `id` fields count
                    as settled
  --explained FILE  (optional) ids that a fault may legitimately have delivered twice (e.g. the
                    entries a worker held when it was killed); a duplicate outside this set is
                    reported as unexplained and fails the check
  --max-duplicates N  fail when more ids than N were processed more than once
  --by-payload      match by payload only (a fair queue or a partitioned queue: entry ids
                    are unique per lane or partition, not across them, so two entries can
                    share an id); duplicates are payloads processed more than once; dead
                    letters are not matched (their envelopes are not decoded here), so a run
                    that dead-letters reports those as lost

Asserts admitted <= processed | dead, matching by entry id (ids are unique per admission), or
by payload when the id is not found (payloads are unique in the tests; a worker record may
shorten a long payload, so a mismatch there must not count as a loss). Prints one line:
  checked=20000 processed=20037 lost=0 duplicates=37 duplicate_ids=37 unexplained=0 dead=0 ...
and, when something is lost, the first lost ids. Exit 0 when lost == 0 (and the duplicate
limits hold), 1 otherwise, 2 on bad input.

Standard library only; the RESP client below is just enough for XRANGE.
"""
import argparse
import collections
import socket
import sys


class Resp:
    """A minimal blocking RESP2 client."""

    def __init__(self, url, timeout=10.0):
        if url.startswith("unix://"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(url[len("unix://"):])
        elif url.startswith("redis://"):
            authority = url[len("redis://"):].split("/")[0]
            creds, _, hostport = authority.rpartition("@")
            host, _, port = hostport.rpartition(":")
            self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        else:
            raise ValueError("--redis: %r is not redis://HOST:PORT or unix:///PATH" % url)
        self.buf = b""
        if url.startswith("redis://") and creds:
            user, _, password = creds.partition(":")
            self.call("AUTH", *([user, password] if user else [password]))

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))
        return self._reply()


def read_records(paths, what):
    """[(id, payload)] from lines "<id> <payload>[ extra]"."""
    out = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                for n, line in enumerate(f, 1):
                    parts = line.rstrip(b"\n").split(b" ")
                    if b"=" in parts[0]:
                        continue  # a summary line ("admitted=3 rejected=0 ...")
                    if len(parts) < 2 or not parts[0]:
                        if line.strip():
                            print("check: %s:%d: not \"<id> <payload>\": %r" % (path, n, line),
                                  file=sys.stderr)
                            sys.exit(2)
                        continue
                    out.append((parts[0].decode(), parts[1].decode(errors="replace")))
        except FileNotFoundError:
            # a worker that processed nothing never created its record file
            if what == "admitted":
                print("check: %s: no such file" % path, file=sys.stderr)
                sys.exit(2)
    return out


def read_dead(url, queue):
    """{original id: reason} of the dead stream."""
    r = Resp(url)
    key = "sluice:{%s}:dead" % queue
    dead, start = {}, "-"
    for _ in range(100000):
        batch = r.call("XRANGE", key, start, "+", "COUNT", 1000)
        if not batch:
            break
        for entry_id, fields in batch:
            f = dict(zip(fields[0::2], fields[1::2]))
            orig = (f.get(b"id") or b"").decode()
            dead[orig] = (f.get(b"reason") or b"").decode(errors="replace")
        start = "(" + batch[-1][0].decode()
        if len(batch) < 1000:
            break
    return dead


def main():
    ap = argparse.ArgumentParser(description="admitted <= processed | dead")
    ap.add_argument("--admitted", action="append", default=[])
    ap.add_argument("--processed", action="append", default=[])
    ap.add_argument("--redis")
    ap.add_argument("--queue")
    ap.add_argument("--explained")
    ap.add_argument("--max-duplicates", type=int)
    ap.add_argument("--by-payload", action="store_true")
    a = ap.parse_args()
    if not a.admitted or (a.redis is None) != (a.queue is None):
        ap.error("--admitted is required; --redis and --queue go together")

    admitted = read_records(a.admitted, "admitted")
    processed = read_records(a.processed, "processed")
    if a.by_payload:  # the payload is the identity: one made-up id per payload
        admitted = [(p, p) for _, p in admitted]
        processed = [(p, p) for _, p in processed]
    dead = read_dead(a.redis, a.queue) if a.redis else {}

    done_ids = collections.Counter(i for i, _ in processed)
    done_payloads = set(p for _, p in processed)
    admitted_ids = {}
    for i, p in admitted:
        admitted_ids.setdefault(i, p)
    by_payload = collections.defaultdict(set)
    for i, p in admitted:
        by_payload[p].add(i)

    # settled: processed or dead-lettered under its id, or (when the records disagree on ids,
    # e.g. a payload the worker's record shortened) processed under its payload
    lost = [i for i, p in admitted_ids.items()
            if i not in done_ids and i not in dead and p not in done_payloads]
    dup_ids = {i: n for i, n in done_ids.items() if n > 1}
    duplicates = sum(n - 1 for n in dup_ids.values())
    explained = set()
    if a.explained:
        with open(a.explained) as f:
            explained = set(line.split()[0] for line in f if line.strip())
    unexplained = sorted(i for i in dup_ids if a.explained and i not in explained)
    # a payload admitted under two ids: a retry after a lost reply went in twice (the
    # idempotency key must prevent that); seen in the producers' or the workers' records
    for i, p in processed:
        by_payload[p].add(i)
    two_ids = sum(1 for ids in by_payload.values() if len(ids) > 1)
    not_admitted = sum(1 for i in done_ids if i not in admitted_ids)
    dead_and_done = sum(1 for i in dead if i in done_ids)

    print("checked=%d processed=%d lost=%d duplicates=%d duplicate_ids=%d unexplained=%d "
          "dead=%d dead_and_processed=%d payloads_under_two_ids=%d not_recorded_admitted=%d"
          % (len(admitted_ids), len(processed), len(lost), duplicates,
             len(dup_ids), len(unexplained), len(dead), dead_and_done, two_ids,
             not_admitted))
    ok = True
    if lost:
        print("check: LOST (admitted, never processed nor dead-lettered): %s"
              % ["%s %s" % (i, admitted_ids[i][:40]) for i in lost[:10]], file=sys.stderr)
        ok = False
    if unexplained:
        print("check: duplicates not explained by an injected fault: %s" % unexplained[:10],
              file=sys.stderr)
        ok = False
    if a.max_duplicates is not None and len(dup_ids) > a.max_duplicates:
        print("check: %d ids processed more than once; at most %d allowed"
              % (len(dup_ids), a.max_duplicates), file=sys.stderr)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
