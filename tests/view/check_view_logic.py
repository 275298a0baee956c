#!/usr/bin/env python3
"""The view page's logic in a real browser (ctest view.logic): Debian's chromium, headless, with
the network shut, opens pages that attn-cli writes and a script added after the page's own calls
its plain functions (apps/view_page/view_page.js: checkMeta, base64Bytes, inflateRaw, decodeCells,
cellData, cellWeight, restFactor, headOrder, defaultHeadOf, lensTable, lensLines, shown, fmt,
labelStep, headLayout) and reads what the page drew (the model view's order under each sort, the
lens table). Each answer is checked against values known without the page's JavaScript:

- the cells: this script's own base64 and raw inflate of the page's attn-probs, the weights
  (c/255)^2 or c/65535 as float32, at (layer, head, row) in META's layout; every row sums to 1;
  for the golden models (tests/golden/view/cases.json, PyTorch's float64) the figures first, prev,
  diag and entropy recomputed from the decoded weights match the golden ones; TransformerLens's
  detector scores (previous_token_head, duplicate_token_head, induction_head) are NumPy's, its
  detect_head patterns built as TransformerLens's code builds them, on the decoded weights;
- the sort orders and the head opened first: from the golden figures (and META's for stories260K)
  in Python;
- the lens table: from META's lens, the tokens and the chosen one; for the golden models the last
  layer's top token from the last prompt position on is the golden greedy chain;
- number formatting and the text of tokens: fixed cases.

Exit 77 (skipped) when chromium is absent.

usage: check_view_logic.py ATTN_CLI SOURCE_DIR
"""
import base64
import decimal
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_view import FAILURES, Browser, check, meta_of, palette  # noqa: E402

# Runs after the page's script, in the page: waits until the page has drawn (or failed), then
# calls the page's functions and writes their answers as JSON into <pre id="attn-test">.
HARNESS = r"""<script>
(async () => {
  const out = {};
  try {
    await new Promise((done) => {
      const poll = () => (document.body.dataset.state === 'loading' ? setTimeout(poll, 20) : done());
      poll();
    });
    out.state = document.body.dataset.state;
    const text = document.getElementById('attn-meta').textContent;
    const m = checkMeta(JSON.parse(text));
    let bytes = base64Bytes(document.getElementById('attn-probs').textContent);
    if (m.encoding.compression === 'deflate-raw') bytes = await inflateRaw(bytes);
    const d = cellData(m, decodeCells(m, bytes));
    out.layout = { rowOff: Array.from(d.rowOff), headCells: d.headCells, maxKeys: d.maxKeys };
    const w = [], rest = [];
    for (let li = 0; li < d.nL; ++li)
      for (let hi = 0; hi < d.nH; ++hi)
        for (let t = d.A; t < d.B; ++t) {
          for (let j = 0; j < d.T; ++j) w.push(cellWeight(d, li, hi, t, j));
          rest.push(restFactor(d, li, hi, t));
        }
    out.weights = w;
    out.rest = rest;
    const sorts = ['', ...m.stats.names];
    out.orders = {};
    for (const s of sorts)
      for (const asc of [false, true])
        out.orders[s + '/' + asc] = m.layers.map((_, li) => headOrder(m, li, s, asc));
    out.defaultHead = defaultHeadOf(m);
    out.opened = [S.li, S.hi];
    if (m.lens != null) {
      out.lens = lensTable(m, 0, m.positions);
      out.lensLines = lensLines(m, m.lens.layers.length - 1, m.positions - 1);
    }
    out.lensDom = [...document.querySelectorAll('#lens tr')].map(
      (tr) => [...tr.cells].map((c) => [c.textContent, c.classList.contains('hit') ? 1 : 0]));
    out.fmt = [fmt(1 / 3), fmt(2), fmt(null), fmt(NaN), fmt(Infinity), fmt(-0.0004)];
    out.shown = [['a\nb'], ['\u001b[31m'], ['x\u2028y'], ['   '], ['abcdefghij', 5], [null], ['\u00e9t\u00e9', 10],
                 ['\u007f\u0085\t\r']].map(([s, max]) => shown(s, max));
    out.labelStep = [[100, 640, 14], [2048, 640, 24], [10, 640, 14], [1e6, 10, 24]].map((a) => labelStep(...a));
    out.headLayout = headLayout(10, 10, false);
    // The colour bar, the difference's colours, an export's SVG and raster.
    out.ticks = {};
    for (const sc of ['linear', 'sqrt', 'log'])
      for (const df of [false, true]) out.ticks[sc + '/' + df] = colorbarTicks(sc, df);
    out.diverging = [[0.25, 'sqrt'], [-1, 'linear'], [0, 'log'], [-0.01, 'log']].map(([x, s]) => divergingRgb(x, SCALES[s]));
    const tiny = document.createElement('canvas');
    tiny.width = 3; tiny.height = 2;
    out.svg = svgOfCanvas('a <b> & "c"', tiny.toDataURL('image/png'), 3, 2, 'sqrt', false);
    out.svgDiff = svgOfCanvas('d', tiny.toDataURL('image/png'), 3, 2, 'linear', true);
    const src = document.getElementById('head'), ex = exportCanvas(src, 'T');
    const y0 = 24 + src.height + 18 + CB.top + 6, ectx = ex.getContext('2d');
    out.exportCanvas = { size: [ex.width, ex.height], src: [src.width, src.height], bar: CB,
                         // the matrix copied: the source's pixels at its centre, the export's there
                         same: Array.from(src.getContext('2d').getImageData(src.width >> 1, src.height >> 1, 1, 1).data)
                               .join() === Array.from(ectx.getImageData(src.width >> 1, 24 + (src.height >> 1), 1, 1).data).join(),
                         barPixels: [0.1, 0.5, 0.9].map((f) => Array.from(
                           ectx.getImageData(CB.x0 + Math.floor(f * CB.bar), y0, 1, 1).data).slice(0, 3)) };
    if (m.value_norms != null) {
      const norms = decodeNorms(m.value_norms, d.nL, d.nH, d.T), wv = valueWeighted(d, norms), wl = [];
      for (let li = 0; li < d.nL; ++li)
        for (let hi = 0; hi < d.nH; ++hi)
          for (let t = d.A; t < d.B; ++t)
            for (let j = 0; j < keysOf(d, t); ++j) wl.push(wv[cellOffset(d, li, hi, t) + j]);
      out.valueWeighted = wl;
      out.norms = Array.from(norms);
    }
    const full = { r0: 0, r1: 2000, k0: 0, k1: 2000 };
    out.zoom = [zoomWindow(full, full, 0.5, 1000, 1000), zoomWindow(full, full, 0.5, 10, 1990),
                zoomWindow({ r0: 500, r1: 1500, k0: 500, k1: 1500 }, full, 4, 1000, 1000),
                zoomWindow({ r0: 0, r1: 8, k0: 0, k1: 8 }, full, 0.1, 4, 4)];
    out.axisLabels = [axisLabels(1000, 1024, 576, 12), axisLabels(0, 2000, 640, 12)];
    out.banner = { hidden: document.getElementById('banner').hidden, text: document.getElementById('banner').textContent };
    if (m.compare != null) {
      const mc = runMeta(m, 'corrupted');
      let bb = base64Bytes(document.getElementById('attn-probs-corrupted').textContent);
      if (m.encoding.compression === 'deflate-raw') bb = await inflateRaw(bb);
      const db = cellData(mc, decodeCells(mc, bb)), diff = [], drawnDiff = [];
      for (let li = 0; li < d.nL; ++li)
        for (let hi = 0; hi < d.nH; ++hi)
          for (let t = d.A; t < d.B; ++t)
            for (let j = 0; j < d.T; ++j) {
              diff.push(cellDiff(d, db, li, hi, t, j));
              const v = cellWeight(S.runs.diff, li, hi, t, j);
              drawnDiff.push(v < 0 ? v : v - DIFF0);
            }
      out.compare = { diff, drawnDiff, stats: runMeta(m, 'diff').stats.values,
                      corruptedTokens: runMeta(m, 'corrupted').tokens.map((x) => x.id) };
    }
    const broken = (f) => {
      const c = JSON.parse(text);
      f(c);
      try { checkMeta(c); return null; } catch (e) { return e.message; }
    };
    out.errors = [broken((c) => { c.cells += 1; }), broken((c) => { c.tokens.pop(); }),
                  broken((c) => { c.version = 2; }), broken((c) => { c.rows = [0, c.positions + 1]; }),
                  broken(() => {})];
    // The model view as drawn under each sort: the boxes' names and the heads' captions.
    out.domOrders = {};
    for (const s of sorts)
      for (const asc of [false, true]) {
        S.sort = s; S.asc = asc;
        arrangeModel();
        out.domOrders[s + '/' + asc] = [...document.querySelectorAll('#model .layer-row')].map(
          (row) => [...row.querySelectorAll('.group')].map(
            (g) => [g.querySelector('.group-name').textContent,
                    [...g.querySelectorAll('.thumb span')].map((x) => x.textContent)]));
      }
  } catch (e) {
    out.error = String((e && e.stack) || e);
  }
  const pre = document.createElement('pre');
  pre.id = 'attn-test';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def to_fixed(x, digits):
    """Number.prototype.toFixed: the exact binary value rounded half away from zero."""
    if x is None:
        return 'null'
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return 'NaN' if math.isnan(x) else ('Infinity' if x > 0 else '-Infinity')
    q = decimal.Decimal(x).quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP)
    return '%s' % q


def shown(s, limit=None):
    """The page's text of a token: controls and U+2028/9 as escapes, spaces as U+2423, cut."""
    s = '' if s is None else str(s)
    named = {'\n': '\\n', '\t': '\\t', '\r': '\\r'}
    s = re.sub('[\u0000-\u001f\u007f-\u009f\u2028\u2029]', lambda m: named.get(m.group(0)) or
               '\\u%04x' % ord(m.group(0)), s)
    if re.fullmatch(' +', s):
        s = s.replace(' ', '\u2423')
    units = s.encode('utf-16-le')
    if limit and len(units) // 2 > limit:
        s = units[:2 * (limit - 1)].decode('utf-16-le', 'surrogatepass') + '\u2026'
    return s


def cells_of(page_text, meta, what, element='attn-probs'):
    """The page's cells decoded here: (layer, head, row) -> weights of keys 0..row_keys-1."""
    m = re.search(r'<script id="%s"[^>]*>(.*?)</script>' % element, page_text, re.S)
    raw = base64.b64decode(re.sub(r'\s+', '', m.group(1)))
    if meta['encoding']['compression'] == 'deflate-raw':
        raw = zlib.decompress(raw, -15)
    bits = meta['encoding']['bits']
    codes = raw if bits == 8 else struct.unpack('<%dH' % (len(raw) // 2), raw)
    lut = (lambda c: f32((c / 255) * (c / 255))) if bits == 8 else (lambda c: f32(c / 65535))
    A, B = meta['rows']
    out, i = {}, 0
    for li in range(len(meta['layers'])):
        for hi in range(len(meta['heads'])):
            for t in range(A, B):
                n = meta['row_keys'][t]
                out[li, hi, t] = [lut(c) for c in codes[i:i + n]]
                i += n
    check(i == len(codes) == meta['cells'], '%s: the page holds META.cells cells (%d, %d decoded here)'
          % (what, meta['cells'], len(codes)))
    return out


DETECTORS = ('previous_token_head', 'duplicate_token_head', 'induction_head')


def detection_patterns(ids):
    """TransformerLens's head_detector patterns for one sequence, as its code builds them."""
    n = len(ids)
    prev = np.zeros((n, n))
    prev[1:, :-1] = np.eye(n - 1)
    tok = np.array(ids)
    dup = (tok[None, :] == tok[:, None]).astype(float)
    np.fill_diagonal(dup, 0)
    dup = np.tril(dup)
    ind = np.roll(dup, 1, axis=1)
    ind[:, 0] = 0
    return np.tril(prev), dup, np.tril(ind)


def detector_scores(meta, cells):
    """detect_head's "mul" scores [layer][head][3] of the page's rows: sum(A * D) / sum(A), A the
    decoded pattern of the shown real rows (zero where a row has no cell), D TransformerLens's;
    None for the token-based two without token ids."""
    T, (A, B) = meta['positions'], meta['rows']
    ids = [t['id'] for t in meta['tokens']]
    rows = [t for t in range(A, B) if meta['keep'][t] == 1]
    pats = detection_patterns(ids if all(i is not None for i in ids) else list(range(T)))
    out = []
    for li in range(len(meta['layers'])):
        layer = []
        for hi in range(len(meta['heads'])):
            a = np.zeros((len(rows), T))
            for r, t in enumerate(rows):
                row = cells[li, hi, t]
                a[r, :len(row)] = row
            figs = [float((a * d[rows]).sum() / a.sum()) if rows else None for d in pats]
            if any(i is None for i in ids):
                figs[1] = figs[2] = None
            layer.append(figs)
        out.append(layer)
    return out


SCALE_FNS = {'linear': lambda p: p, 'sqrt': math.sqrt,
             'log': lambda p: 0 if p <= 1e-4 else (math.log10(p) + 4) / 4}


def check_colours(r, what):
    """The colour bar's ticks, the difference's colours, the exported SVG and raster."""
    want_ticks = {}
    for sc, ps, dps in (('linear', [0, 0.25, 0.5, 0.75, 1], [0.5, 1]), ('sqrt', [0, 0.01, 0.05, 0.25, 0.5, 1], [0.05, 0.25, 1]),
                        ('log', [1e-4, 1e-3, 1e-2, 0.1, 1], [1e-3, 1e-2, 0.1, 1])):
        f = SCALE_FNS[sc]
        want_ticks[sc + '/false'] = [(p, f(p)) for p in ps]
        want_ticks[sc + '/true'] = ([(-p, (1 - f(p)) / 2) for p in reversed(dps)] + [(0, 0.5)] +
                                    [(p, (1 + f(p)) / 2) for p in dps])
    got = {k: [(t['p'], t['x']) for t in v] for k, v in r['ticks'].items()}
    bad = [k for k in want_ticks if len(got.get(k, [])) != len(want_ticks[k]) or any(
        a[0] != b[0] or abs(a[1] - b[1]) > 1e-12 for a, b in zip(got[k], want_ticks[k]))]
    check(not bad, '%s: colorbarTicks: each tick at scale(p) along the bar (%s)' % (what, bad))

    def div(x, sc):
        f = max(0, min(1, SCALE_FNS[sc](min(abs(x), 1))))
        to = [178, 24, 43] if x >= 0 else [33, 102, 172]
        return [int(math.floor(255 + (to[c] - 255) * f + 0.5)) for c in range(3)]
    want = [div(0.25, 'sqrt'), div(-1, 'linear'), div(0, 'log'), div(-0.01, 'log')]
    check(r['diverging'] == want, '%s: divergingRgb %s (want %s)' % (what, r['diverging'], want))

    import xml.etree.ElementTree as ET
    ns = '{http://www.w3.org/2000/svg}'
    try:
        svg = ET.fromstring(r['svg'])
        texts = [t.text for t in svg.iter(ns + 'text')]
        images = list(svg.iter(ns + 'image'))
        rects = [e for e in svg.iter(ns + 'rect') if e.get('height') == '12']
        pal = palette()
        first = 'rgb(%d,%d,%d)' % pal[int(0.5 / 64 * 256)]
        last = 'rgb(%d,%d,%d)' % pal[min(255, int(63.5 / 64 * 256))]
        ok = (texts[0] == 'a <b> & "c"' and len(images) == 1 and images[0].get('href', '').startswith('data:image/png;base64,')
              and len(rects) == 64 and rects[0].get('fill') == first and rects[-1].get('fill') == last
              and texts[1:] == ['0', '0.01', '0.05', '0.25', '0.5', '1'])
        check(ok, '%s: svgOfCanvas: the title escaped, the raster, 64 colour-bar rects from the palette, the sqrt ticks' % what)
        dsvg = ET.fromstring(r['svgDiff'])
        drects = [e for e in dsvg.iter(ns + 'rect') if e.get('height') == '12']
        check([e.get('fill') for e in (drects[0], drects[-1])] ==
              ['rgb(%d,%d,%d)' % tuple(div(-63 / 64, 'linear')), 'rgb(%d,%d,%d)' % tuple(div(63 / 64, 'linear'))] and
              [t.text for t in dsvg.iter(ns + 'text')][1:] == ['-1', '-0.5', '0', '0.5', '1'],
              '%s: the difference\'s SVG colour bar runs blue to red, -1 .. 1' % what)
    except ET.ParseError as e:
        check(False, '%s: svgOfCanvas writes well-formed XML (%s)' % (what, e))
    ex = r['exportCanvas']
    pal = palette()
    bar = ex['bar']
    want_px = [list(pal[min(255, int((int(f * bar['bar']) + 0.5) / bar['bar'] * 256))]) for f in (0.1, 0.5, 0.9)]
    check(ex['same'] and ex['size'][1] == ex['src'][1] + 24 + bar['h'] + 22 and ex['barPixels'] == want_px,
          '%s: exportCanvas: the panel copied under its title, the colour bar below in the palette\'s colours '
          '(%s, want %s)' % (what, ex['barPixels'], want_px))


def head_order(meta, stats, li, sort, asc):
    k = meta['stats']['names'].index(sort) if sort else -1
    n_rep = meta['model']['n_heads'] // meta['model']['n_kv_heads']
    groups = {}
    for hi, h in enumerate(meta['heads']):
        groups.setdefault(h // n_rep, []).append(hi)
    order = [[g, hs] for g, hs in groups.items()]
    if k >= 0:
        sign = 1 if asc else -1

        def key(hi):
            v = stats[li][hi][k]
            return sign * (v or 0)
        for _, hs in order:
            hs.sort(key=key)
        order.sort(key=lambda e: key(e[1][0]))
    return order


def near_tie(meta, stats, li, sort):
    """Two of the layer's figures closer than the golden tolerance allows to order surely."""
    if not sort:
        return False
    k = meta['stats']['names'].index(sort)
    v = sorted((stats[li][hi][k] or 0) for hi in range(len(meta['heads'])))
    return any(b - a < 1e-5 for a, b in zip(v, v[1:]))


def next_id(meta, t):
    if t + 1 < meta['positions']:
        return meta['tokens'][t + 1]['id']
    return meta['chosen']['id'] if meta.get('chosen') else None


def lens_table(meta):
    lens, T = meta['lens'], meta['positions']

    def text(i):
        s = lens['texts'].get(str(i))
        return '#%d' % i if s is None else shown(s, 16)
    head = [{'text': 'layer \\ input'}] + [
        {'text': '%d %s' % (t, shown(meta['tokens'][t]['text'], 10)), 'title': shown(meta['tokens'][t]['text'])}
        for t in range(T)]
    rows = []
    for k, layer in enumerate(lens['layers']):
        cells = []
        for t in range(T):
            top = lens['top'][k][t]
            first = top[0] if top else None
            cells.append({'k': k, 't': t, 'text': text(first[0]) if first else '',
                          'hit': bool(first) and first[0] == next_id(meta, t)})
        rows.append({'name': 'L%d' % layer, 'cells': cells})
    return {'head': head, 'rows': rows}, text


def js_string(s):
    return json.dumps(s, ensure_ascii=False)


def check_page(br, path, what, golden=None):
    """Opens the page with the harness and checks every answer; golden: (view case, case)."""
    text = open(path, encoding='utf-8').read()
    meta = meta_of(text)
    check(meta is not None, '%s: META parses' % what)
    if meta is None:
        return
    probe = path[:-5] + '-probe.html'
    with open(probe, 'w', encoding='utf-8') as f:
        f.write(text.replace('</body>', HARNESS + '</body>', 1))
    page = br.dom(probe)
    got = page.text.get('attn-test')
    check(got is not None, '%s: the harness wrote its answers' % what)
    if got is None:
        return
    r = json.loads(got)
    check('error' not in r, '%s: the harness ran without error (%s)' % (what, r.get('error', '')[:400]))
    if 'error' in r:
        return
    check(r['state'] == 'drawn', '%s: the page drew (%r)' % (what, r['state']))
    nL, nH, T = len(meta['layers']), len(meta['heads']), meta['positions']
    A, B = meta['rows']

    # The cells: the page's weights against this script's decoding, position by position.
    cells = cells_of(text, meta, what)
    want, rest = [], []
    for li in range(nL):
        for hi in range(nH):
            for t in range(A, B):
                row = cells[li, hi, t]
                keep = meta['keep']
                for j in range(T):
                    want.append(-2 if j >= len(row) else -1 if keep[t] != 1 or keep[j] != 1 else row[j])
                rest.append(1 / (1 - row[0]) if row[0] < 1 else 0)
    bad = [i for i, (a, b) in enumerate(zip(r['weights'], want)) if a != b]
    check(len(r['weights']) == len(want) and not bad,
          '%s: cellWeight gives the %d weights decoded here (%d differ, first at %s)'
          % (what, len(want), len(bad), bad[:1]))
    check(len(r['rest']) == len(rest) and all(abs(a - b) <= 1e-12 * max(1, abs(b)) for a, b in zip(r['rest'], rest)),
          '%s: restFactor is 1 / (1 - p0) of every row' % what)
    tol_sum = 0.06 if meta['encoding']['bits'] == 8 else 1e-3
    worst = max(abs(sum(row) - 1) for key, row in cells.items() if all(k == 1 for k in meta['keep']))
    check(worst <= tol_sum, '%s: every decoded row sums to 1 (worst off by %.2g)' % (what, worst))
    offs = [0]
    for t in range(A, B):
        offs.append(offs[-1] + meta['row_keys'][t])
    check(r['layout']['rowOff'] == offs and r['layout']['headCells'] == offs[-1],
          '%s: cellData\'s row offsets' % what)

    stats = meta['stats']['values']
    if golden:
        view, case = golden
        gstats = view['stats']
        # The weights reproduce PyTorch's figures: the page decodes the run's probabilities.
        tol = 6e-3 if meta['encoding']['bits'] == 8 else 1e-4
        worst, nulls = 0.0, 0
        for li in range(nL):
            for hi in range(nH):
                ent = first = prev = diag = 0.0
                n_prev = 0
                for t in range(A, B):
                    p = cells[li, hi, t]
                    ent += -sum(x * math.log(x) for x in p if x > 0)
                    first += p[0]
                    diag += p[t]
                    if t >= 1:
                        prev += p[t - 1]
                        n_prev += 1
                n = B - A
                figs = [ent / n, first / n, prev / n_prev if n_prev else None, diag / n]
                for k, (a, b) in enumerate(zip(figs, gstats[li][hi])):
                    if a is None or b is None:
                        nulls += (a is None) != (b is None)
                        continue
                    worst = max(worst, abs(a - b) / (10 if k == 0 else 1))
        check(worst <= tol and nulls == 0, '%s: the decoded weights give the golden figures (worst %.2g, '
              'within %.0e; %d null where golden has a figure or back)' % (what, worst, tol, nulls))
        check(all(abs((a or 0) - (b or 0)) <= 1e-5 for la, lb in zip(stats, gstats) for ha, hb in zip(la, lb)
                  for a, b in zip(ha, hb)), '%s: META\'s figures are the golden ones' % what)
        stats_for_order = [[g + h[len(g):] for g, h in zip(gl, ml)] for gl, ml in zip(gstats, stats)]
    else:
        stats_for_order = stats

    # TransformerLens's detector scores in META: NumPy's from the decoded weights and the tokens.
    names_in = meta['stats']['names']
    check(all(n in names_in for n in DETECTORS), '%s: META names the detector scores %s' % (what, DETECTORS))
    if all(n in names_in for n in DETECTORS):
        ref, worst, nulls = detector_scores(meta, cells), 0.0, 0
        tol = 6e-3 if meta['encoding']['bits'] == 8 else 1e-4
        for li in range(nL):
            for hi in range(nH):
                for k, n in enumerate(DETECTORS):
                    a, b = stats[li][hi][names_in.index(n)], ref[li][hi][k]
                    if a is None or b is None:
                        nulls += (a is None) != (b is None)
                    else:
                        worst = max(worst, abs(a - b))
        check(worst <= tol and nulls == 0, '%s: detector scores as NumPy\'s detect_head from the page (worst %.2g '
              'within %.0e; %d null mismatches)' % (what, worst, tol, nulls))

    # The sort orders: headOrder and the model view as drawn, against Python's from the figures.
    names, wrong, wrong_dom, skipped = [''] + meta['stats']['names'], [], [], []
    for s in names:
        for asc in (False, True):
            key = '%s/%s' % (s, 'true' if asc else 'false')
            k = meta['stats']['names'].index(s) if s else -1
            for li in range(nL):
                if golden and near_tie(meta, stats_for_order, li, s):
                    skipped.append('layer %d by %s' % (li, s))
                    continue
                exp = head_order(meta, stats_for_order, li, s, asc)
                if r['orders'][key][li] != exp:
                    wrong.append('layer %d by %r%s: %s, want %s' % (li, s, ' asc' if asc else '', r['orders'][key][li], exp))
                drawn = [['kv %d' % g, ['h%d%s' % (meta['heads'][hi], ' ' + to_fixed(stats[li][hi][k], 2) if k >= 0 else '')
                                        for hi in hs]] for g, hs in head_order(meta, stats, li, s, asc)]
                if r['domOrders'][key][li] != drawn:
                    wrong_dom.append('layer %d by %r%s: %s, want %s' % (li, s, ' asc' if asc else '', r['domOrders'][key][li],
                                                                       drawn))
    if skipped:
        print('note %s: figures too close to order surely, not compared: %s' % (what, ', '.join(skipped)))
    check(not wrong, '%s: headOrder, every layer by every figure both ways, as sorted from %s figures%s'
          % (what, 'the golden' if golden else 'META\'s', ''.join('\n     ' + w for w in wrong)))
    check(not wrong_dom, '%s: the model view drawn in those orders (boxes, captions)%s'
          % (what, ''.join('\n     ' + w for w in wrong_dom)))
    # The head opened first: the largest prev figure, the first of equals.
    kp = meta['stats']['names'].index('prev')
    best, at = -math.inf, None
    for li in range(nL):
        for hi in range(nH):
            v = stats_for_order[li][hi][kp]
            if v is not None and v > best:
                best, at = v, {'li': li, 'hi': hi}
    check(r['defaultHead'] == at and r['opened'] == [at['li'], at['hi']],
          '%s: defaultHeadOf and the head opened: %s (want %s)' % (what, r['defaultHead'], at))

    # The lens table: lensTable, the detail lines and the table drawn against META's lens.
    if meta.get('lens'):
        exp, text_of = lens_table(meta)
        check(r['lens'] == exp, '%s: lensTable over every position' % what)
        cols = min(T, 32)
        dom = [[c['text'] for c in exp['head'][:cols + 1]]] + [
            [row['name']] + [c['text'] for c in row['cells'][:cols]] for row in exp['rows']]
        hits = [[0] * (cols + 1)] + [[0] + [int(c['hit']) for c in row['cells'][:cols]] for row in exp['rows']]
        check([[c[0] for c in row] for row in r['lensDom']] == dom and
              [[c[1] for c in row] for row in r['lensDom']] == hits,
              '%s: the lens table drawn: %d rows of %d columns, its hits' % (what, len(dom), cols))
        L, t = len(meta['lens']['layers']), T - 1
        nid = next_id(meta, t)
        lines = ['layer %d, position %d %s' % (meta['lens']['layers'][-1], t, js_string(shown(meta['tokens'][t]['text'], 30)))
                 + (', next %s' % js_string(text_of(nid)) if nid is not None else '')]
        for i, (tid, logit) in enumerate(meta['lens']['top'][L - 1][t]):
            lines.append('%d. %s id %s logit %s' % (i + 1, js_string(text_of(tid)).ljust(20), str(tid).ljust(7),
                                                    to_fixed(float(logit), 3)))
        check(r['lensLines'] == lines, '%s: lensLines of the last layer at the last position' % what)
        if golden:
            _, case = golden
            P, greedy = meta['prefill'], case['greedy']
            tops = [meta['lens']['top'][L - 1][t][0][0] for t in range(P - 1, T)]
            check(tops == greedy, '%s: the last layer\'s lens tops from position %d are the golden greedy chain '
                  '%s (%s)' % (what, P - 1, greedy, tops))
            check(all(c['hit'] for c in exp['rows'][-1]['cells'][P - 1:]), '%s: and drawn as hits' % what)
    else:
        check(r['lensDom'] == [], '%s: no lens table without lens data' % what)

    check_colours(r, what)
    check_value_weighted(meta, cells, r, what)
    drawn_meta = meta.get('drawn') or {}
    banner = r['banner']
    check(banner['hidden'] == (not (drawn_meta.get('weights') or drawn_meta.get('input'))) and
          (banner['hidden'] or banner['text'].startswith('Drawn from a seed')),
          '%s: the banner is shown exactly on a page of drawn weights or input (%s)' % (what, banner))

    # Fixed cases: formatting, the text of tokens, label steps, the head's layout, broken META.
    check(r['fmt'] == ['0.333', '2.000', 'null', 'NaN', 'Infinity', '-0.000'], '%s: fmt %s' % (what, r['fmt']))
    check(r['shown'] == ['a\\nb', '\\u001b[31m', 'x\\u2028y', '\u2423\u2423\u2423', 'abcd\u2026', '', '\u00e9t\u00e9',
                         '\\u007f\\u0085\\t\\r'], '%s: shown %r' % (what, r['shown']))
    check(r['labelStep'] == [5, 100, 1, 2400000], '%s: labelStep %s' % (what, r['labelStep']))
    check(r['headLayout'] == {'nR': 10, 'nK': 10, 'cell': 40, 'gh': 10, 'gw': 10, 'h': 400, 'w': 400, 'left': 150,
                              'top': 110, 'first': 0, 'gap': 0, 'labels': True, 'x0': 150, 'y0': 110, 'width': 570,
                              'height': 540}, '%s: headLayout(10, 10) %s' % (what, r['headLayout']))
    check(r['zoom'] == [{'r0': 500, 'r1': 1500, 'k0': 500, 'k1': 1500}, {'r0': 5, 'r1': 1005, 'k0': 995, 'k1': 1995},
                        {'r0': 0, 'r1': 2000, 'k0': 0, 'k1': 2000}, {'r0': 2, 'r1': 6, 'k0': 2, 'k1': 6}],
          '%s: zoomWindow halves about the point, stays inside, zooms out to the whole, keeps 4 a side (%s)'
          % (what, r['zoom']))
    check(r['axisLabels'] == [{'positions': list(range(1000, 1024)), 'text': True},
                              {'positions': list(range(0, 2000, 50)), 'text': False}],
          '%s: axisLabels: every position with its token in a 24-position window, every 50th of 2,000' % what)
    e = r['errors']
    check(e[0] is not None and 'cells' in e[0] and e[1] is not None and 'tokens' in e[1] and
          e[2] is not None and 'version 2' in e[2] and e[3] is not None and 'rows' in e[3] and e[4] is None,
          '%s: checkMeta names what is broken: %s' % (what, e))


def value_norms_of(meta):
    """META's value_norms decoded here: [layer, head, position] float32."""
    vn = meta['value_norms']
    raw = base64.b64decode(vn['float32'])
    return np.frombuffer(raw, dtype='<f4').reshape(len(meta['layers']), len(meta['heads']), meta['positions'])


def check_value_weighted(meta, cells, r, what):
    """valueWeighted: NumPy's p ||v_j|| / sum_k p ||v_k|| of every row, from this script's
    decoding of the cells and of META's norms."""
    check('valueWeighted' in r, '%s: META has value_norms and the page weights by them' % what)
    if 'valueWeighted' not in r:
        return
    norms = value_norms_of(meta)
    check(np.array_equal(np.array(r['norms'], dtype=np.float32), norms.reshape(-1)),
          '%s: decodeNorms gives the float32 norms decoded here' % what)
    want = []
    for li in range(len(meta['layers'])):
        for hi in range(len(meta['heads'])):
            for t in range(*meta['rows']):
                a = np.array(cells[li, hi, t], dtype=np.float64)
                w = a * norms[li, hi, :len(a)]
                want.extend(w / w.sum() if w.sum() > 0 else np.zeros_like(w))
    got = np.array(r['valueWeighted'])
    worst = float(np.max(np.abs(got - np.array(want)))) if got.shape == (len(want),) else -1
    check(0 <= worst <= 1e-6, '%s: valueWeighted is NumPy\'s p ||v|| renormalised, every cell (worst %.2g)'
          % (what, worst))


def safetensors(path):
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == '__metadata__':
            continue
        a, b = h['data_offsets']
        out[name] = np.frombuffer(data[a:b], dtype='<f4').reshape(h['shape'])
    return out


def check_norms_against_dump(cli, src, page, tmp, what):
    """META's ||v_t|| against NumPy's norms of the value vectors `attn-cli run --dump` keeps
    (cache.{l}.v) over the page's tokens, teacher-forced: another path through the engine."""
    meta = meta_of(open(page, encoding='utf-8').read())
    ids = ','.join(str(t['id']) for t in meta['tokens'])
    dump = os.path.join(tmp, 'values.safetensors')
    r = subprocess.run([cli, 'run', '-m', os.path.join(src, 'weights/stories260K.gguf'), '--tokens', ids,
                        '-n', '0', '--dump', dump], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    check(r.returncode == 0, '%s: attn-cli run --dump over the page\'s tokens (%s)' % (what, r.stderr.decode()[-200:]))
    if r.returncode != 0:
        return
    ts, norms = safetensors(dump), value_norms_of(meta)
    n_rep = meta['model']['n_heads'] // meta['model']['n_kv_heads']
    worst = 0.0
    for li, layer in enumerate(meta['layers']):
        v = ts['cache.%d.v' % layer][0].astype(np.float64)  # [n_kv, T, head_dim]
        for hi, h in enumerate(meta['heads']):
            want = np.sqrt((v[h // n_rep] ** 2).sum(-1))
            worst = max(worst, float(np.max(np.abs(norms[li, hi] - want) / np.maximum(want, 1e-6))))
    check(worst <= 1e-4, '%s: value_norms are NumPy\'s ||v_t|| of the dump\'s cache.{l}.v (worst relative %.2g)'
          % (what, worst))


def check_compare(br, path, clean_path, corrupted_path, what):
    """A --compare page: its two runs are the two single-prompt pages' runs, cell for cell, and
    cellDiff and the difference drawn are NumPy's difference of those runs' patterns."""
    text = open(path, encoding='utf-8').read()
    meta = meta_of(text)
    one = {}
    for k, p in (('clean', clean_path), ('corrupted', corrupted_path)):
        t = open(p, encoding='utf-8').read()
        one[k] = (t, meta_of(t))
    A, B = meta['rows']
    T, nL, nH = meta['positions'], len(meta['layers']), len(meta['heads'])
    runs = {'clean': cells_of(text, meta, what + ' clean'),
            'corrupted': cells_of(text, meta, what + ' corrupted', 'attn-probs-corrupted')}
    for k in ('clean', 'corrupted'):
        t, m1 = one[k]
        ref = cells_of(t, m1, '%s page' % k)
        check(m1['positions'] == T and runs[k] == ref,
              '%s: the %s run\'s cells are those of its own page (attn-cli view -p ... --ignore-eos)' % (what, k))
    check(meta['compare']['tokens'] == one['corrupted'][1]['tokens'] and meta['tokens'] == one['clean'][1]['tokens'],
          '%s: META\'s tokens and compare.tokens are the two pages\'' % what)
    # NumPy's difference of the two patterns, [layer, head, row, key], NaN where no cell.
    want = np.full((nL, nH, B - A, T), np.nan, dtype=np.float64)
    for li in range(nL):
        for hi in range(nH):
            for t in range(A, B):
                a = np.array(runs['clean'][li, hi, t], dtype=np.float32)
                b = np.array(runs['corrupted'][li, hi, t], dtype=np.float32)
                want[li, hi, t - A, :len(a)] = a - b
    probe = path[:-5] + '-probe.html'
    with open(probe, 'w', encoding='utf-8') as f:
        f.write(text.replace('</body>', HARNESS + '</body>', 1))
    got = br.dom(probe).text.get('attn-test')
    r = json.loads(got) if got else {'error': 'no answers'}
    check('error' not in r and 'compare' in r, '%s: the harness ran on the compare page (%s)' % (what, r.get('error', '')[:300]))
    if 'compare' not in r:
        return
    flat = want.reshape(-1)
    # cellDiff subtracts in double (exact for two float32s, then within float32's rounding of the
    # difference); the drawn cells hold 2 + the difference in float32, ulp 2.4e-7 on [2, 4).
    for key, tol in (('diff', 1e-7), ('drawnDiff', 2.4e-7)):
        g = np.array(r['compare'][key], dtype=np.float64)
        cells = ~np.isnan(flat)
        ok = g.shape == flat.shape and np.all(g[~cells] == -2) and np.max(np.abs(g[cells] - flat[cells])) <= tol
        check(ok, '%s: %s equals NumPy\'s clean - corrupted of every cell (worst %.2g; -2 where no cell)'
              % (what, key, float(np.max(np.abs(g[cells] - flat[cells]))) if g.shape == flat.shape else -1))
    check(float(np.abs(flat[~np.isnan(flat)]).max()) > 0.01, '%s: the two runs differ somewhere' % what)
    sa, sb = np.array(meta['stats']['values'], dtype=float), np.array(meta['compare']['stats']['values'], dtype=float)
    sd = np.array([[[np.nan if x is None else x for x in h] for h in l] for l in r['compare']['stats']], dtype=float)
    check(np.allclose(sd, sa - sb, atol=1e-12, equal_nan=True), '%s: the figures shown are clean - corrupted' % what)
    page = br.run('file://' + path + '#run=diff', '--dump-dom')
    check('data-run="diff"' in page and 'data-state="drawn"' in page, '%s: #run=diff draws the difference' % what)


def check_compare_dumps(cli, src, br, tmp):
    """view --compare A.safetensors B.safetensors (two dumps of run --attention-weights): the page's
    difference is NumPy's difference of the dumps' probabilities (16-bit cells: within two codes'
    rounding), its value norms NumPy's of cache.{l}.v; no model runs."""
    stories = os.path.join(src, 'weights/stories260K.gguf')
    dumps = [os.path.join(tmp, 'dump%d.safetensors' % i) for i in range(2)]
    for d, prompt in zip(dumps, ('Tom had a red ball. Tom had a', 'Tom had a red cat. Tom had a')):
        r = subprocess.run([cli, 'run', '-m', stories, '-p', prompt, '-n', '3', '--attention-weights', '--dump', d],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        check(r.returncode == 0, 'attn-cli run --attention-weights --dump %s' % os.path.basename(d))
    page = os.path.join(tmp, 'dumps.html')
    if not run_view(cli, ['--compare', *dumps, '--bits', '16'], page):
        return
    text = open(page, encoding='utf-8').read()
    meta = meta_of(text)
    ts = [safetensors(d) for d in dumps]
    P, N = meta['prefill'], meta['steps']
    nL = len(meta['layers'])

    def pattern(t, li):  # [H, T, T] of batch row 0, the decode rows after the prefill's
        m = np.zeros((meta['model']['n_heads'], P + N, P + N))
        m[:, :P, :P] = t['attn.%d.prefill' % li][0]
        for i in range(1, N + 1):
            m[:, P + i - 1, :P + i] = t['attn.%d.decode.%d' % (li, i)][0, :, 0]
        return m
    want = np.stack([pattern(ts[0], li) - pattern(ts[1], li) for li in range(nL)])
    probe = page[:-5] + '-probe.html'
    with open(probe, 'w', encoding='utf-8') as f:
        f.write(text.replace('</body>', HARNESS + '</body>', 1))
    got = br.dom(probe).text.get('attn-test')
    r = json.loads(got) if got else {'error': 'no answers'}
    check('compare' in r, 'dumps.html: the harness ran (%s)' % r.get('error', '')[:300])
    if 'compare' not in r:
        return
    g = np.array(r['compare']['diff']).reshape(want.shape)
    causal = np.tril(np.ones((P + N, P + N), dtype=bool))
    worst = float(np.max(np.abs(g - want)[:, :, causal]))
    check(worst <= 1 / 65535 and np.all(g[:, :, ~causal] == -2),
          'dumps.html: cellDiff is NumPy\'s difference of the two dumps\' probabilities (worst %.2g, two 16-bit '
          'codes\' rounding at most)' % worst)
    norms = value_norms_of(meta)
    v = np.stack([np.sqrt((ts[0]['cache.%d.v' % li][0].astype(np.float64) ** 2).sum(-1)) for li in range(nL)])
    n_rep = meta['model']['n_heads'] // meta['model']['n_kv_heads']
    v = v[:, [h // n_rep for h in meta['heads']]]
    check(np.allclose(norms, v, rtol=1e-6), 'dumps.html: value_norms are NumPy\'s of the first dump\'s cache.{l}.v')


# cases.json's views: the whole page, the last row only (a decode step's), the prefill's last row
# and the first step's of heads 2..3 (rows from 6: the layout's offsets). Its view 3 (the first row
# only) has no prev figure and opens no head by default: its captions show a dash for it, and
# what the harness compares (the opened head) is not there.
GOLDEN_VIEWS = (0, 2, 4)


def run_view(cli, args, out):
    r = subprocess.run([cli, 'view', *args, '--out', out], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120)
    ok = r.returncode == 0 and os.path.isfile(out)
    check(ok, 'attn-cli view %s%s' % (' '.join(args), '' if ok else ' (exit %d: %s)' % (
        r.returncode, r.stderr.decode(errors='replace').strip()[-300:])))
    return r.returncode == 0


def main():
    cli, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    chromium = shutil.which('chromium')
    if not chromium:
        print('skipped: chromium is not installed (tools/deps.sh installs it)')
        return 77
    tmp = tempfile.mkdtemp(prefix='attn-view-logic-')
    try:
        br = Browser(chromium, tmp)
        start = time.monotonic()
        # stories260K: GQA 8/4, token texts, the lens on (K 5), 8-bit cells.
        out = os.path.join(tmp, 'stories.html')
        # A repeated sentence: the duplicate and induction patterns are not empty.
        if run_view(cli, ['-m', os.path.join(src, 'weights/stories260K.gguf'), '-p', 'Tom had a red ball. Tom had a red',
                          '-n', '8'], out):
            check_page(br, out, 'stories260K')
            check_norms_against_dump(cli, src, out, tmp, 'stories260K')
        # --compare: two prompts of one length (14 tokens), against each one's own page.
        clean, corrupted = 'Tom had a red ball. Tom had a', 'Tom had a red cat. Tom had a'
        paths = [os.path.join(tmp, n) for n in ('compare.html', 'clean.html', 'corrupted.html')]
        stories = os.path.join(src, 'weights/stories260K.gguf')
        if (run_view(cli, ['-m', stories, '--compare', clean, corrupted, '-n', '4', '--bits', '16'], paths[0]) and
                run_view(cli, ['-m', stories, '-p', clean, '-n', '4', '--ignore-eos', '--bits', '16'], paths[1]) and
                run_view(cli, ['-m', stories, '-p', corrupted, '-n', '4', '--ignore-eos', '--bits', '16'], paths[2])):
            check_compare(br, *paths, 'compare')
            check_page(br, paths[0], 'compare page (clean run)')
        check_compare_dumps(cli, src, br, tmp)
        # The golden models: every view in 16 bits, a cut one (rows from 6, heads 2..3) in 8 bits too.
        golden = json.load(open(os.path.join(src, 'tests/golden/view/cases.json')))
        for case in golden['cases']:
            d = os.path.join(src, 'tests/golden', case['model'])
            weights = os.path.join(d, 'weights.safetensors') if os.path.exists(
                os.path.join(d, 'weights.safetensors')) else d
            ids = ','.join(str(i) for i in case['tokens'])
            for n in GOLDEN_VIEWS:
                view = case['views'][n]
                cut = [a for k in ('layers', 'heads', 'positions') if view[k] for a in ('--' + k, view[k])]
                for bits in ('16', '8') if n == GOLDEN_VIEWS[-1] else ('16',):
                    what = '%s view %d (%s) %s-bit' % (case['name'], n, ' '.join(cut) or 'whole', bits)
                    out = os.path.join(tmp, '%s-%d-%s.html' % (case['name'], n, bits))
                    if run_view(cli, ['-m', weights, '--tokens', ids, '-n', str(case['steps']), '--bits', bits, *cut],
                                out):
                        check_page(br, out, what, (view, case))
        print('%.1f s, %d browser runs' % (time.monotonic() - start, br.n))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILURES:
        print('%d failed' % len(FAILURES))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
