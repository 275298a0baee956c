#!/usr/bin/env python3
"""attn-cli view's page in a real browser (ctest view.chromium): Debian's chromium, headless, with
the network shut (every host unresolvable, a dead proxy), opens pages that attn-cli writes from
stories260K and checks what the page says on <body> once it has drawn (data-state, data-heads,
data-tokens, data-panels, data-requests), a screenshot that is not blank, that a hostile prompt
injects no element, that broken data ends in data-state="error" and that a URL hash selects a
head. Exit 77 (skipped) when chromium is absent.

usage: check_view.py ATTN_CLI SOURCE_DIR TEMPLATE
(TEMPLATE: the build's page without data, apps/generated/view_page.html, the CSS and JS inlined)
"""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

FAILURES = []


def check(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what)
    if not cond:
        FAILURES.append(what)


class Page(html.parser.HTMLParser):
    """The elements of a document: (tag, attrs) in order, <body>'s attributes, text by id."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.body, self.text, self._ids = [], {}, {}, []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == 'body':
            self.body = a
        self._ids.append(a.get('id'))

    def handle_endtag(self, tag):
        if self._ids:
            self._ids.pop()

    def handle_data(self, data):
        for i in self._ids:
            if i:
                self.text[i] = self.text.get(i, '') + data


def meta_of(page_text):
    m = re.search(r'<script id="attn-meta" type="application/json">(.*?)</script>', page_text, re.S)
    return json.loads(m.group(1)) if m else None


class Browser:
    def __init__(self, chromium, tmp):
        self.chromium, self.tmp, self.n = chromium, tmp, 0

    def run(self, url, *extra):
        self.n += 1
        args = [self.chromium, '--headless=new', '--no-sandbox', '--disable-gpu',
                '--disable-extensions', '--host-resolver-rules=MAP * ~NOTFOUND',
                '--proxy-server=127.0.0.1:9', '--virtual-time-budget=10000',
                '--user-data-dir=' + os.path.join(self.tmp, 'profile%d' % self.n), *extra, url]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=90)
        if r.returncode != 0:
            sys.stderr.write(r.stderr.decode(errors='replace')[-2000:])
        return r.stdout.decode('utf-8', errors='replace')

    def dom(self, path, fragment=''):
        return Page(self.run('file://' + path + fragment, '--dump-dom'))

    def screenshot(self, path, png):
        self.run('file://' + path, '--screenshot=' + png, '--window-size=1400,1000')


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit, non-interlaced RGB or RGBA PNG."""
    data = open(path, 'rb').read()
    assert data[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    pos, idat, hdr = 8, b'', None
    while pos < len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        if kind == b'IHDR':
            hdr = struct.unpack('>IIBBBBB', chunk)
        elif kind == b'IDAT':
            idat += chunk
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, 'unexpected PNG kind %r' % (hdr,)
    bpp = 3 if ctype == 2 else 4
    raw, stride, prev, rows, i = zlib.decompress(idat), w * bpp, bytearray(w * bpp), [], 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = prev[x], prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


BANNER_BORDER = (232, 89, 12)  # #e8590c, the drawn-weights banner's border (view_page.css)


def palette():
    """viridis at 0, 1/4, 1/2, 3/4, 1 over 256 entries, as the page and the PNG heatmap."""
    stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]]
    out = []
    for i in range(256):
        t = i / 255 * 4
        k = min(int(t), 3)
        f = t - k
        out.append(tuple(int(stops[k][c] * (1 - f) + stops[k + 1][c] * f + 0.5) for c in range(3)))
    return out


def view(cli, src, out, prompt, *extra, steps=8):
    args = [cli, 'view', '-m', os.path.join(src, 'weights/stories260K.gguf'), '-p', prompt, '-n', str(steps),
            '--out', out, *extra]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    check(r.returncode == 0 and os.path.isfile(out),
          'attn-cli view %r writes %s (exit %d: %s)' % (prompt[:30], os.path.basename(out), r.returncode,
                                                      r.stderr.decode(errors='replace').strip()[-300:]))
    return open(out, encoding='utf-8').read() if os.path.isfile(out) else ''


def drawn(page, meta, what):
    b = page.body
    check(b.get('data-state') == 'drawn',
          '%s: data-state drawn (got %r, error %r)' % (what, b.get('data-state'), b.get('data-error')))
    check(b.get('data-requests') == '0', '%s: no request left the page (%r)' % (what, b.get('data-requests')))
    if meta:
        check(b.get('data-tokens') == str(len(meta['tokens'])) == str(meta['positions']),
              '%s: %s tokens drawn (META %d positions)' % (what, b.get('data-tokens'), meta['positions']))


def main():
    cli, src, template = (os.path.abspath(a) for a in sys.argv[1:4])
    chromium = shutil.which('chromium')
    if not chromium:
        print('skipped: chromium is not installed (tools/deps.sh installs it)')
        return 77
    tmp = tempfile.mkdtemp(prefix='attn-view-')
    try:
        br = Browser(chromium, tmp)
        start = time.monotonic()

        # The page of the contract's example: 5 layers x 8 heads of stories260K, 8 decode steps.
        out = os.path.join(tmp, 'view.html')
        helptext = subprocess.run([cli, 'view', '--help'], stdout=subprocess.PIPE).stdout.decode()
        lens = ['--logit-lens'] if '--logit-lens' in helptext else []
        text = view(cli, src, out, 'Once upon a time', *lens)
        meta = meta_of(text)
        check(meta is not None and meta.get('format') == 'attn-cli-view', 'the page carries META')
        page = br.dom(out)
        drawn(page, meta, 'view.html')
        check(page.body.get('data-heads') == str(5 * 8), 'view.html: 5 x 8 head thumbnails (%r)'
              % page.body.get('data-heads'))
        groups = sum(1 for t, a in page.tags if t == 'div' and a.get('class') == 'group')
        check(groups == 5 * 4 and page.text.get('gqa', '').startswith('GQA: 8 query heads share 4 KV heads'),
              'view.html: 5 layers x 4 KV groups of 2 heads (%d groups, %r)' % (groups, page.text.get('gqa')))
        panels = set(page.body.get('data-panels', '').split(','))
        want = {'model', 'head', 'token', 'steps'} | ({'lens'} if meta and meta.get('lens') else set())
        check(panels == want, 'view.html: panels %s (want %s)' % (sorted(panels), sorted(want)))
        first = page.body.get('data-first-draw-ms')
        check(first is not None and float(first) > 0, 'view.html: first draw at %s ms' % first)
        check(meta and meta['steps'] == 8 and page.text.get('step-label', '').startswith('step 8 of 8'),
              'view.html: the decode steps panel at step 8 of 8 (%r)' % page.text.get('step-label'))

        if lens and meta and meta.get('lens'):
            # Greedy decoding chose each next token as the last layer's top logit, so the last
            # layer's lens row marks every position from the last prefill one on as a hit.
            cells = [a for t, a in page.tags if t == 'td']
            T, P, L = meta['positions'], meta['prefill'], len(meta['lens']['layers'])
            last = cells[(L - 1) * T:L * T] if len(cells) == L * T else []
            check(len(cells) == L * T, 'the lens table holds layers x positions cells (%d)' % len(cells))
            check(len(last) == T and all('hit' in last[t].get('class', '') for t in range(P - 1, T)),
                  'the last layer\'s lens predicts every greedy token')

        png = os.path.join(tmp, 'view.png')
        br.screenshot(out, png)
        ok = os.path.isfile(png)
        check(ok, 'the screenshot is written')
        if ok:
            w, h, rows = png_pixels(png)
            colours = {p for row in rows[::4] for p in row[::4]}
            dark = sum(1 for row in rows[::4] for p in row[::4] if max(p) < 140)
            check((w, h) == (1400, 1000), 'the screenshot is 1400 x 1000 (%d x %d)' % (w, h))
            check(len(colours) >= 50 and dark >= 500,
                  'the screenshot is not blank: %d colours, %d dark pixels of a 1/16 sample'
                  % (len(colours), dark))

            # The colour bar: where the page says it is (data-colorbar, laid out in the same
            # window), its pixels are the palette's, evenly along it (the scale is in its ticks).
            lay = Page(br.run('file://' + out, '--window-size=1400,1000', '--dump-dom')).body.get('data-colorbar')
            cb = json.loads(lay) if lay else None
            pal = palette()
            if cb:
                y = int(cb['top'] + cb['height'] / 2)
                got = [rows[y][int(cb['left'] + f * cb['width'])] for f in (0.05, 0.3, 0.6, 0.95)]
                want = [pal[min(255, int((int(f * cb['width']) + 0.5) / cb['width'] * 256))] for f in (0.05, 0.3, 0.6, 0.95)]
                close = all(max(abs(a - b) for a, b in zip(g, w)) <= 2 for g, w in zip(got, want))
            check(bool(cb) and close, 'the screenshot\'s colour bar is viridis along its length (%s, want %s)'
                  % (got if cb else None, want if cb else None))
            check(not any(p == BANNER_BORDER for row in rows for p in row),
                  'view.html (a trained model): no drawn-weights banner in the screenshot')

        # A page of drawn weights and input says so: the banner in the DOM and in the screenshot.
        dpath = os.path.join(tmp, 'drawn.html')
        r = subprocess.run([cli, 'view', '--config', os.path.join(src, 'configs/gqa.json'), '--prefill', '6', '-n', '2',
                            '--out', dpath], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        check(r.returncode == 0, 'attn-cli view of drawn weights (exit %d: %s)' % (r.returncode, r.stderr.decode()[-200:]))
        if r.returncode == 0:
            dpage = br.dom(dpath)
            drawn(dpage, None, 'drawn.html')
            hidden = [a.get('id') for t, a in dpage.tags if 'hidden' in a]
            check('banner' not in hidden and dpage.text.get('banner', '').startswith(
                'Drawn from a seed, not a trained model\'s: random weights and random input'),
                  'drawn.html: the banner is shown (%r)' % dpage.text.get('banner'))
            dpng = os.path.join(tmp, 'drawn.png')
            br.screenshot(dpath, dpng)
            _, _, drows = png_pixels(dpng)
            n = sum(1 for row in drows[:200] for p in row if p == BANNER_BORDER)
            check(n >= 1000, 'drawn.html: the banner\'s orange border in the screenshot\'s top (%d pixels)' % n)

        # A compare page showing the difference: the colour bar runs blue, white, red.
        cpath = os.path.join(tmp, 'compare.html')
        r = subprocess.run([cli, 'view', '-m', os.path.join(src, 'weights/stories260K.gguf'), '--compare',
                            'Tom had a red ball. Tom had a', 'Tom had a red cat. Tom had a', '-n', '2', '--out', cpath],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        check(r.returncode == 0, 'attn-cli view --compare (exit %d: %s)' % (r.returncode, r.stderr.decode()[-200:]))
        if r.returncode == 0:
            lay = Page(br.run('file://' + cpath + '#run=diff', '--window-size=1400,1000', '--dump-dom')).body
            cb = json.loads(lay.get('data-colorbar') or 'null')
            cpng = os.path.join(tmp, 'compare.png')
            br.run('file://' + cpath + '#run=diff', '--screenshot=' + cpng, '--window-size=1400,1000')
            _, _, crows = png_pixels(cpng)
            if cb:
                y = int(cb['top'] + cb['height'] / 2)
                ends = [crows[y][int(cb['left'] + f * cb['width'])] for f in (0.01, 0.5, 0.99)]
            check(lay.get('data-run') == 'diff' and bool(cb) and cb['diff'] and ends[0][2] > 150 > ends[0][0] and
                  min(ends[1]) >= 245 and ends[2][0] > 150 > ends[2][2],
                  'compare.html#run=diff: the colour bar is blue at -1, white at 0, red at 1 (%s)' % (ends if cb else None))

        # Weighted by the value vectors' norms (#vnorm=1): the head's matrix drawn anew.
        shots = []
        for frag in ('#only=head&head=1.3', '#only=head&head=1.3&vnorm=1'):
            shot = os.path.join(tmp, 'vnorm%d.png' % len(shots))
            br.run('file://' + out + frag, '--screenshot=' + shot, '--window-size=1400,1000')
            shots.append(png_pixels(shot)[2])
        changed = sum(1 for ra, rb in zip(*shots) for a, b in zip(ra, rb) if a != b)
        check(changed >= 1000, 'view.html#vnorm=1: weighted by ||v||, %d pixels of the head\'s screenshot change'
              % changed)

        # 2,000 positions: the head view labels positions sparsely; zoomed (#zoom=rows,keys) to
        # 24 x 24 it labels each row and key with its token, and the screenshot holds their text.
        lpath = os.path.join(tmp, 'long.html')
        r = subprocess.run([cli, 'view', '--config', os.path.join(src, 'configs/gqa.json'), '--prefill', '2000', '-n', '0',
                            '--heads', '0:2', '--max-seq-len', '2048', '--out', lpath],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        check(r.returncode == 0, 'attn-cli view of 2,000 positions (exit %d)' % r.returncode)
        if r.returncode == 0:
            zoom = '#only=head&zoom=1000:1024,990:1014'
            b = Page(br.run('file://' + lpath + zoom, '--window-size=1400,1400', '--dump-dom')).body
            labels = json.loads(b.get('data-head-labels') or 'null')
            box = json.loads(b.get('data-head-box') or 'null')
            check(labels == {'rows': 24, 'keys': 24, 'text': True, 'first': '1000 1000'},
                  'long.html%s: 24 token labels a side (%s)' % (zoom, labels))
            shot = os.path.join(tmp, 'long.png')
            br.run('file://' + lpath + zoom, '--screenshot=' + shot, '--window-size=1400,1400')
            rows = png_pixels(shot)[2]
            # Each row's label ends at box.x, centred on its row: dark text in each row's band.
            inked = 0
            for i in range(24):
                y = int(box['y'] + (i + 0.5) * box['h'] / 24) if box else 0
                band = [p for yy in range(y - 3, y + 4) for p in rows[yy][int(box['x']) - 60:int(box['x'])]] if box else []
                inked += sum(1 for p in band if max(p) < 110) >= 5
            check(inked == 24, 'long.html: the zoomed screenshot has text beside each of the 24 rows (%d)' % inked)

        # Browsers without Uint8Array.fromBase64 (before Chromium 140, Firefox 133): the page's
        # own base64 decoding, tried on a copy where a first script takes the native one away.
        old = os.path.join(tmp, 'old.html')
        with open(old, 'w', encoding='utf-8') as f:
            f.write(text.replace('<head>', '<head><script>delete Uint8Array.fromBase64;</script>', 1))
        drawn(br.dom(old), meta, 'without Uint8Array.fromBase64')

        # A URL hash selects the head view's head and shows that panel alone.
        page = br.dom(out, '#head=4.3&only=head&scale=log&sink=1')
        drawn(page, meta, 'view.html#head=4.3')
        check(page.text.get('head-title', '').startswith('Head: layer 4, head 3 '),
              '#head=4.3 opens layer 4 head 3 (%r)' % page.text.get('head-title'))
        hidden = [t[1].get('id') for t in page.tags if t[0] == 'section' and 'hidden' in t[1]]
        check('panel-model' in hidden and 'panel-head' not in hidden, '#only=head hides the other panels')

        # A hostile prompt: markup that would close the script element, ESC, U+2028, a comment.
        hostile = '</script><img src=x onerror="document.body.dataset.pwned=1"><!-- \x1b[31m red \u2028 x'
        hout = os.path.join(tmp, 'hostile.html')
        htext = view(cli, src, hout, hostile)
        hmeta = meta_of(htext)
        check(hmeta is not None, 'hostile.html: META parses as JSON')
        check([t for t, _ in Page(htext).tags] == [t for t, _ in Page(text).tags],
              'hostile.html: the file has the same elements as view.html')
        hpage = br.dom(hout)
        drawn(hpage, hmeta, 'hostile.html')
        check(not any(t == 'img' for t, _ in hpage.tags), 'hostile.html: no <img> element in the DOM')
        check(not any(k.startswith('on') for _, a in hpage.tags for k in a),
              'hostile.html: no event handler attribute in the DOM')
        check('data-pwned' not in hpage.body, 'hostile.html: the injected handler never ran')
        shown = hpage.text.get('tokens', '')
        check('\x1b' not in shown and '\u2028' not in shown,
              'hostile.html: ESC and U+2028 are drawn as escapes (%r)' % shown[:80])

        # MHA: a golden Hugging Face checkpoint (2 layers, 4 heads, 4 KV heads), ids as input.
        mha = os.path.join(tmp, 'mha.html')
        r = subprocess.run([cli, 'view', '-m', os.path.join(src, 'tests/golden/model/hf_tied_bf16/model.safetensors'),
                            '--tokens', '1,2,3,4,5', '-n', '3', '--out', mha],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        check(r.returncode == 0, 'attn-cli view of an MHA checkpoint (exit %d)' % r.returncode)
        mpage = br.dom(mha)
        drawn(mpage, meta_of(open(mha, encoding='utf-8').read()) if r.returncode == 0 else None, 'mha.html')
        groups = sum(1 for t, a in mpage.tags if t == 'div' and a.get('class') == 'group')
        check(mpage.body.get('data-heads') == '8' and groups == 8 and
              mpage.text.get('gqa', '').startswith('MHA: 4 heads'),
              'mha.html: 2 x 4 heads, each its own KV group (%d groups, %r)' % (groups, mpage.text.get('gqa')))

        # One position (the empty prompt's <s>, no step) with the first key set apart: nothing
        # left to renormalise, still drawn.
        one = os.path.join(tmp, 'one.html')
        otext = view(cli, src, one, '', steps=0)
        drawn(br.dom(one, '#sink=1&scale=log'), meta_of(otext), 'one position, first key apart')

        # Broken data ends in data-state "error" with a message, not a half-drawn page.
        bad = os.path.join(tmp, 'bad.html')
        with open(bad, 'w', encoding='utf-8') as f:
            f.write(re.sub(r'"cells":(\d+)', lambda m: '"cells":%d' % (int(m.group(1)) + 1), text, 1))
        b = br.dom(bad).body
        check(b.get('data-state') == 'error' and 'cells' in b.get('data-error', ''),
              'a wrong cell count: data-state error naming cells (%r)' % b.get('data-error'))
        with open(bad, 'w', encoding='utf-8') as f:
            f.write(re.sub(r'"float32":"', '"float32":"AAAA', text, 1))
        b = br.dom(bad).body
        check(b.get('data-state') == 'error' and 'value_norms' in b.get('data-error', ''),
              'value_norms of a wrong length: data-state error naming value_norms (%r)' % b.get('data-error'))
        b = br.dom(template).body
        check(b.get('data-state') == 'error' and 'attn-meta' in b.get('data-error', ''),
              'the template without data: data-state error (%r)' % b.get('data-error'))
        print('%.1f s, %d browser runs' % (time.monotonic() - start, br.n))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print('%d failed' % len(FAILURES))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
