#!/usr/bin/env python3
"""Time to first draw of attn-cli view's pages in headless Chromium, in real time.

--virtual-time-budget (what tests/view/check_view.py uses to wait for the page) runs the page on a
virtual clock, where performance.now() does not advance during synchronous work; so this drives
Chromium through the DevTools protocol on a pipe instead, waits for <body data-state> to leave
"loading" and reads data-first-draw-ms (performance.now() since navigation, parsing included) on
the real clock. Network shut as in the test.

usage: tools/view_timing.py PAGE.html... [--runs 3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Pipe:
    """Chromium's --remote-debugging-pipe: JSON messages ended by NUL on fds 3 (in) and 4 (out)."""

    def __init__(self, chromium, profile):
        r_in, self.w = os.pipe()  # we write, Chromium reads on fd 3
        self.r, w_out = os.pipe()  # Chromium writes on fd 4
        self.proc = subprocess.Popen(
            [chromium, '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-extensions',
             '--host-resolver-rules=MAP * ~NOTFOUND', '--proxy-server=127.0.0.1:9',
             '--remote-debugging-pipe', '--user-data-dir=' + profile, 'about:blank'],
            pass_fds=(3, 4), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: (os.dup2(r_in, 3), os.dup2(w_out, 4)))
        os.close(r_in)
        os.close(w_out)
        self.buf, self.n = b'', 0

    def call(self, method, session=None, **params):
        self.n += 1
        msg = {'id': self.n, 'method': method, 'params': params}
        if session:
            msg['sessionId'] = session
        os.write(self.w, json.dumps(msg).encode() + b'\0')
        while True:
            while b'\0' not in self.buf:
                chunk = os.read(self.r, 1 << 16)
                if not chunk:
                    raise RuntimeError('chromium closed the pipe')
                self.buf += chunk
            line, self.buf = self.buf.split(b'\0', 1)
            reply = json.loads(line)
            if reply.get('id') == self.n:
                if 'error' in reply:
                    raise RuntimeError(reply['error'])
                return reply.get('result', {})

    def close(self):
        try:
            self.call('Browser.close')
        except Exception:
            pass
        self.proc.wait(timeout=30)


def first_draw(chromium, page, tmp, n):
    p = Pipe(chromium, os.path.join(tmp, 'profile%d' % n))
    try:
        target = p.call('Target.createTarget', url='file://' + os.path.abspath(page))['targetId']
        session = p.call('Target.attachToTarget', targetId=target, flatten=True)['sessionId']
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = p.call('Runtime.evaluate', session,
                       expression='JSON.stringify(document.body ? Object.assign({}, document.body.dataset) : {})',
                       returnByValue=True)
            d = json.loads(r['result']['value'])
            if d.get('state', 'loading') != 'loading' and (d.get('state') == 'error' or 'panels' in d):
                return d
            time.sleep(0.05)
        raise RuntimeError('the page did not draw within 120 s')
    finally:
        p.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('pages', nargs='+')
    ap.add_argument('--runs', type=int, default=3)
    a = ap.parse_args()
    chromium = shutil.which('chromium')
    if not chromium:
        sys.exit('view_timing: chromium is not installed')
    tmp = tempfile.mkdtemp(prefix='attn-timing-')
    try:
        for page in a.pages:
            times = []
            for i in range(a.runs):
                d = first_draw(chromium, page, tmp, len(times) + 100 * a.pages.index(page))
                if d.get('state') != 'drawn':
                    sys.exit('%s: %s %s' % (page, d.get('state'), d.get('error', '')))
                times.append((float(d['decodedMs']), float(d['firstDrawMs'])))
            mb = os.path.getsize(page) / 1e6
            print('%s: %.1f MB, %s heads, %s tokens; decoded at %s ms, first draw at %s ms (%d runs)'
                  % (os.path.basename(page), mb, d.get('heads'), d.get('tokens'),
                     '/'.join('%.0f' % t[0] for t in times), '/'.join('%.0f' % t[1] for t in times), a.runs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
