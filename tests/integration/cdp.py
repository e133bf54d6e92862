#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""cdp.py - drives a headless chromium through the DevTools protocol, Python standard library only.

    cdp.py BROWSER URL STEP...

chromium is started with --remote-debugging-pipe: it reads commands from fd 3 and writes replies
and events to fd 4, each a JSON text ended by a NUL byte (no websocket needed). URL is opened in a
new tab; each STEP is a JavaScript expression evaluated in the page again and again (every
0.2 s, 20 s at most) until it yields true (an expression that acts returns true after acting).
Exits 0 when every step came true, 1 naming the step that did not, 2 on a usage error. The
browser's profile is a temporary directory (or $CDP_PROFILE), removed at the end.
"""
import fcntl
import json
import os
import select
import subprocess
import sys
import tempfile
import time

STEP_SECONDS = 20.0


class Browser:
    def __init__(self, binary, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():  # fd 3: commands in, fd 4: replies out (by way of fds above both)
            r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [binary, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
             '--user-data-dir=' + profile, '--remote-debugging-pipe', 'about:blank'],
            preexec_fn=fds, pass_fds=(3, 4),  # kept after fds() ran; the rest is closed
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.next_id = 0
        self.buf = b''

    def call(self, method, params=None, session=None, deadline=30.0):
        self.next_id += 1
        msg = {'id': self.next_id, 'method': method, 'params': params or {}}
        if session:
            msg['sessionId'] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b'\0')
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            while b'\0' in self.buf:
                text, self.buf = self.buf.split(b'\0', 1)
                reply = json.loads(text)
                if reply.get('id') == self.next_id:
                    if 'error' in reply:
                        raise RuntimeError(method + ': ' + json.dumps(reply['error']))
                    return reply['result']
            ready, _, _ = select.select([self.from_chrome], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self.from_chrome, 65536)
            if not chunk:
                raise RuntimeError('chromium closed the pipe')
            self.buf += chunk
        raise RuntimeError(method + ': no reply')

    def close(self):
        try:
            self.call('Browser.close', deadline=5.0)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    if len(sys.argv) < 4:
        print('usage: cdp.py BROWSER URL STEP...', file=sys.stderr)
        return 2
    binary, url, steps = sys.argv[1], sys.argv[2], sys.argv[3:]
    with tempfile.TemporaryDirectory(prefix='cdp-profile-') as profile:
        return run(binary, url, steps, os.environ.get('CDP_PROFILE', profile))


def run(binary, url, steps, profile):
    b = Browser(binary, profile)
    try:
        target = b.call('Target.createTarget', {'url': url})['targetId']
        session = b.call('Target.attachToTarget', {'targetId': target, 'flatten': True})['sessionId']
        for i, step in enumerate(steps, 1):
            end = time.monotonic() + STEP_SECONDS
            value = None
            while time.monotonic() < end:
                r = b.call('Runtime.evaluate', {'expression': step, 'returnByValue': True,
                                                'awaitPromise': True}, session)
                value = r.get('result', {}).get('value')
                if value is True:
                    break
                time.sleep(0.2)
            if value is not True:
                print('step %d never came true (last value %r): %s' % (i, value, step),
                      file=sys.stderr)
                return 1
        return 0
    finally:
        b.close()


if __name__ == '__main__':
    sys.exit(main())
