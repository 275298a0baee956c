'use strict';
// The page's logic a test can reach is in plain functions of their arguments, without the DOM or
// the page's state S (tests/view/check_view_logic.py calls them in the drawn page): checkMeta,
// base64Bytes, inflateRaw and decodeCells (the data), cellData, cellWeight and restFactor (where a
// cell is, its weight), headOrder and defaultHeadOf (the model view's sort orders, the head opened
// first), nextTokenId, lensTable and lensLines (the lens panel), shown, fmt, labelStep,
// headLayout, zoomWindow and axisLabels (the head view's zoom and labels); for --compare pages
// cellDiff, diffStats and runMeta; decodeNorms and valueWeighted (attention weighted by the value
// vectors' norms); colorbarTicks and divergingRgb (the colour bar, the difference's colours);
// svgOfCanvas (a panel's SVG). The rest draws with them.
// Grid values where no weight is drawn, below every weight and ordered so that a block's
// largest value is a weight if it holds one, else padding if it holds padding.
const MASKED = -2, PADDING = -1;
const RGB_CAUSAL = [228, 228, 228], RGB_PADDING = [250, 200, 200];  // as the PNG heatmap
const $ = (id) => document.getElementById(id);
const body = document.body;

// viridis at 0, 1/4, 1/2, 3/4, 1 (the PNG heatmap's stops), 256 entries.
const PALETTE = (() => {
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  const p = new Uint8Array(256 * 3);
  for (let i = 0; i < 256; ++i) {
    const t = i / 255 * 4, k = Math.min(Math.floor(t), 3), f = t - k;
    for (let c = 0; c < 3; ++c) p[i * 3 + c] = Math.round(stops[k][c] * (1 - f) + stops[k + 1][c] * f);
  }
  return p;
})();

// The difference's colours: red where clean is larger, blue where corrupted is, white at 0; the
// scale applied to the magnitude.
function divergingRgb(x, sc) {
  const f = Math.max(0, Math.min(1, sc(Math.min(Math.abs(x), 1))));
  const to = x >= 0 ? [178, 24, 43] : [33, 102, 172];
  return [0, 1, 2].map((c) => Math.round(255 + (to[c] - 255) * f));
}

// The colour bar's ticks, {p, x}: weights (or differences, diff) and where each sits along the
// bar as a fraction of its length, the scale applied (the bar's colours are the palette's, evenly
// along it: a weight p is at scale(p)).
function colorbarTicks(scale, diff) {
  const sc = SCALES[scale];
  const ps = scale === 'log' ? [1e-4, 1e-3, 1e-2, 0.1, 1] : scale === 'sqrt' ? [0, 0.01, 0.05, 0.25, 0.5, 1]
    : [0, 0.25, 0.5, 0.75, 1];
  if (!diff) return ps.map((p) => ({ p, x: sc(p) }));
  // Half the bar each way: fewer ticks, apart from the middle's 0.
  const pos = (scale === 'log' ? [1e-3, 1e-2, 0.1, 1] : scale === 'sqrt' ? [0.05, 0.25, 1] : [0.5, 1]);
  return [...pos.slice().reverse().map((p) => ({ p: -p, x: (1 - sc(p)) / 2 })), { p: 0, x: 0.5 },
          ...pos.map((p) => ({ p, x: (1 + sc(p)) / 2 }))];
}

const SCALES = {
  linear: (p) => p,
  sqrt: (p) => Math.sqrt(p),
  log: (p) => (p <= 1e-4 ? 0 : (Math.log10(p) + 4) / 4),
};

// A token's text as drawn: control characters, line and paragraph separators as escapes.
function shown(s, max) {
  s = String(s == null ? '' : s).replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => {
    const named = { '\n': '\\n', '\t': '\\t', '\r': '\\r' }[c];
    return named || '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0');
  });
  if (/^ +$/.test(s)) s = s.replace(/ /g, '\u2423');  // a token of spaces, visible: ␣
  if (max && s.length > max) s = s.slice(0, max - 1) + '\u2026';
  return s;
}

function fail(msg) {
  body.dataset.state = 'error';
  body.dataset.error = msg;
  const e = $('error');
  e.textContent = 'This page cannot be drawn: ' + msg;
  e.hidden = false;
}

// ---- the data: META checked, PROBS decoded ------------------------------------------------

function check(cond, what) {
  if (!cond) throw new Error('the page\'s data: ' + what);
}
const isInt = (x) => Number.isInteger(x) && x >= 0;

function readMeta() {
  const el = $('attn-meta');
  check(el, 'no attn-meta element (the page template without the data attn-cli inserts)');
  return checkMeta(JSON.parse(el.textContent));
}

// META as parsed, checked (every length against positions, cells against layers x heads x the
// shown rows' row_keys): m itself, or an Error naming what does not hold.
function checkMeta(m) {
  check(m && m.format === 'attn-cli-view', 'format is not "attn-cli-view"');
  check(m.version === 1, 'version ' + JSON.stringify(m.version) + ' is not 1');
  const md = m.model;
  check(md && isInt(md.n_heads) && md.n_heads > 0 && isInt(md.n_kv_heads) && md.n_kv_heads > 0 &&
        md.n_heads % md.n_kv_heads === 0, 'model.n_heads / n_kv_heads');
  const T = m.positions;
  check(isInt(T) && T > 0, 'positions');
  check(isInt(m.prefill) && isInt(m.steps) && m.prefill + m.steps === T, 'prefill + steps != positions');
  check(Array.isArray(m.layers) && m.layers.length > 0 && m.layers.every(isInt), 'layers');
  check(Array.isArray(m.heads) && m.heads.length > 0 &&
        m.heads.every((h) => isInt(h) && h < md.n_heads), 'heads');
  check(Array.isArray(m.rows) && m.rows.length === 2 && isInt(m.rows[0]) && isInt(m.rows[1]) &&
        m.rows[0] < m.rows[1] && m.rows[1] <= T, 'rows');
  check(Array.isArray(m.tokens) && m.tokens.length === T, 'tokens (one per position)');
  check(Array.isArray(m.keep) && m.keep.length === T, 'keep (one per position)');
  check(Array.isArray(m.row_keys) && m.row_keys.length === T &&
        m.row_keys.every((k) => isInt(k) && k <= T), 'row_keys (one per position, each <= positions)');
  const enc = m.encoding || {};
  check((enc.bits === 8 && enc.code === 'sqrt') || (enc.bits === 16 && enc.code === 'linear'),
        'encoding: bits 8 with code sqrt, or bits 16 with code linear');
  check(enc.compression === 'deflate-raw' || enc.compression === 'none', 'encoding.compression');
  check(m.layout === 'layer, head, row', 'layout');
  let perHead = 0;
  for (let t = m.rows[0]; t < m.rows[1]; ++t) perHead += m.row_keys[t];
  const cells = perHead * m.layers.length * m.heads.length;
  check(m.cells === cells, `cells ${m.cells}, but layers x heads x row_keys over rows make ${cells}`);
  const st = m.stats;
  check(st && Array.isArray(st.names) && Array.isArray(st.values) &&
        st.values.length === m.layers.length &&
        st.values.every((l) => Array.isArray(l) && l.length === m.heads.length &&
                               l.every((h) => Array.isArray(h) && h.length === st.names.length)),
        'stats: names and values [layers][heads][names]');
  // ||v|| per shown layer, head and position: float32 in base64, so 4 ceil(n 4 / 3) characters.
  const normsOk = (vn) => vn == null || (vn.layout === 'layer, head, position' && typeof vn.float32 === 'string' &&
    vn.float32.length === 4 * Math.ceil(m.layers.length * m.heads.length * T * 4 / 3));
  check(normsOk(m.value_norms), 'value_norms: layers x heads x positions float32 in base64');
  if (m.compare != null) {
    const c = m.compare;
    check(normsOk(c.value_norms), 'compare.value_norms: layers x heads x positions float32 in base64');
    check(Array.isArray(c.tokens) && c.tokens.length === T, 'compare.tokens (one per position)');
    check(c.stats && Array.isArray(c.stats.values) && c.stats.values.length === m.layers.length &&
          c.stats.values.every((l) => Array.isArray(l) && l.length === m.heads.length),
          'compare.stats: values [layers][heads][names]');
  }
  if (m.lens != null) {
    const ls = m.lens;
    check(Array.isArray(ls.layers) && Array.isArray(ls.top) && ls.top.length === ls.layers.length &&
          ls.top.every((l) => Array.isArray(l) && l.length === T), 'lens: top [layers][positions]');
    check(ls.texts && typeof ls.texts === 'object', 'lens.texts');
  }
  return m;
}

// Base64 to bytes: natively where the browser can, else through atob in chunks (a 2,048-position
// page holds tens of MB).
function base64Bytes(text) {
  const s = /\s/.test(text) ? text.replace(/\s+/g, '') : text;
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  check(s.length % 4 === 0, 'the probabilities are not base64 (length)');
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(s);  // native
  const out = new Uint8Array(s.length / 4 * 3 - pad);
  const CHUNK = 1 << 22;  // characters, a multiple of 4
  let o = 0;
  for (let i = 0; i < s.length; i += CHUNK) {
    const bin = atob(s.slice(i, i + CHUNK));
    for (let k = 0; k < bin.length; ++k) out[o++] = bin.charCodeAt(k);
  }
  return out;
}

async function readProbs(m, id) {
  const el = $(id || 'attn-probs');
  check(el, 'no ' + (id || 'attn-probs') + ' element');
  let bytes = base64Bytes(el.textContent);
  if (m.encoding.compression === 'deflate-raw') bytes = await inflateRaw(bytes);
  return decodeCells(m, bytes);
}

// Raw deflate (zlib's windowBits -15) inflated.
async function inflateRaw(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// The cells' bytes as META's encoding says: the codes as stored (8-bit, or 16-bit little-endian)
// and the table from code to weight, {codes, lut}.
function decodeCells(m, bytes) {
  const width = m.encoding.bits / 8;
  check(bytes.length === m.cells * width,
        `the probabilities hold ${bytes.length} bytes, META.cells says ${m.cells} cells of ${width}`);
  let codes, lut;
  if (width === 1) {
    codes = bytes;
    lut = new Float32Array(256);
    for (let c = 0; c < 256; ++c) lut[c] = (c / 255) * (c / 255);  // p = (c/255)^2
  } else {
    const buf = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
    codes = new Uint16Array(buf.buffer, buf.byteOffset, buf.length / 2);
    if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) {  // a big-endian machine
      const dv = new DataView(buf.buffer, buf.byteOffset, buf.length);
      for (let i = 0; i < codes.length; ++i) codes[i] = dv.getUint16(2 * i, true);
    }
    lut = new Float32Array(65536);
    for (let c = 0; c < 65536; ++c) lut[c] = c / 65535;  // p = c/65535
  }
  return { codes, lut };
}

// ---- the model of the page ----------------------------------------------------------------

const S = {
  m: null, codes: null, lut: null,
  T: 0, P: 0, A: 0, B: 0, nL: 0, nH: 0, nRep: 1,
  rowOff: null, headCells: 0, maxKeys: 0, allKeep: true,
  li: 0, hi: 0, tok: 0, step: 0,
  scale: 'sqrt', sink: false, sort: '', asc: false, only: '',
  run: 'clean', runs: null,  // {clean} or, --compare, {clean, corrupted, diff}; diff has vals
  vnorm: false, weighted: null,  // weighted by ||v||: the runs' value-weighted data
  vals: null,  // cells as values (the difference's DIFF0 + (clean - corrupted), or weighted)
  diff: false,  // the cells are a difference
  zoom: null,  // the head view's window {r0, r1, k0, k1}, or null: the whole
  thumbs: [],  // per (li, hi): {canvas, grid, g, caption}
};

// The cells of a checked META and its decoded probabilities, with where each row starts: the
// cell of (layer i, head k, row t) is at (i * nH + k) * headCells + rowOff[t - A]. S holds these.
function cellData(m, probs) {
  const d = { m, codes: probs.codes, lut: probs.lut,
              T: m.positions, P: m.prefill, A: m.rows[0], B: m.rows[1],
              nL: m.layers.length, nH: m.heads.length, nRep: m.model.n_heads / m.model.n_kv_heads };
  d.rowOff = new Float64Array(d.B - d.A + 1);
  for (let t = d.A; t < d.B; ++t) d.rowOff[t - d.A + 1] = d.rowOff[t - d.A] + m.row_keys[t];
  d.headCells = d.rowOff[d.B - d.A];
  d.maxKeys = 1;
  for (let t = d.A; t < d.B; ++t) d.maxKeys = Math.max(d.maxKeys, m.row_keys[t]);
  d.allKeep = m.keep.every((k) => k === 1);
  return d;
}
function setup(m, probs) { Object.assign(S, cellData(m, probs)); }

const cellOffset = (d, li, hi, t) => (li * d.nH + hi) * d.headCells + d.rowOff[t - d.A];
const keysOf = (d, t) => (t >= d.A && t < d.B ? d.m.row_keys[t] : 0);
const isPadded = (d, t) => d.m.keep[t] !== 1;
// The weight of key j for query t (shown rows only), or MASKED / PADDING.
function cellWeight(d, li, hi, t, j) {
  if (j >= keysOf(d, t)) return MASKED;
  if (isPadded(d, t) || isPadded(d, j)) return PADDING;
  if (d.vals) return d.vals[cellOffset(d, li, hi, t) + j];
  return d.lut[d.codes[cellOffset(d, li, hi, t) + j]];
}

// ---- --compare: two runs and their difference ------------------------------------------------

// The difference's cells are stored shifted by DIFF0, above MASKED and PADDING, so that a grid
// keeps its markers; a block shows its difference of largest magnitude (wins).
const DIFF0 = 2;
const wins = (v, cur, diff) => (diff ? (cur < 0 ? v > cur : v >= 0 && Math.abs(v - DIFF0) > Math.abs(cur - DIFF0))
                                     : v > cur);
// Clean minus corrupted at key j of query t: a number in [-1, 1], or MASKED / PADDING.
function cellDiff(a, b, li, hi, t, j) {
  const x = cellWeight(a, li, hi, t, j);
  return x < 0 ? x : x - cellWeight(b, li, hi, t, j);
}
// The figures of clean minus corrupted, null where either is null.
function diffStats(a, b) {
  return { names: a.names, values: a.values.map((l, li) => l.map((h, hi) => h.map((x, k) => {
    const y = b.values[li][hi][k];
    return typeof x === 'number' && typeof y === 'number' ? x - y : null;
  }))) };
}
// META as one run of a compare page shows it: its tokens, chosen token and figures.
function runMeta(m, run) {
  if (run === 'clean' || m.compare == null) return m;
  if (run === 'corrupted')
    return Object.assign({}, m, { tokens: m.compare.tokens, chosen: m.compare.chosen, stats: m.compare.stats });
  return Object.assign({}, m, { stats: diffStats(m.stats, m.compare.stats) });
}
// The page's runs: {clean}, and for a compare page (probsB: the corrupted run's) corrupted and
// diff, whose vals are DIFF0 + clean - corrupted.
function runData(m, probsA, probsB) {
  const clean = cellData(m, probsA);
  if (!probsB) return { clean };
  const corrupted = cellData(runMeta(m, 'corrupted'), probsB);
  const diff = Object.assign(cellData(runMeta(m, 'diff'), probsA), { diff: true });
  diff.vals = new Float32Array(clean.codes.length);
  for (let i = 0; i < diff.vals.length; ++i)
    diff.vals[i] = DIFF0 + clean.lut[clean.codes[i]] - corrupted.lut[corrupted.codes[i]];
  return { clean, corrupted, diff };
}

// ---- attention weighted by the value vectors' norms (Kobayashi et al. 2020) ------------------

// META's value_norms (or compare's) as [layer, head, position] floats.
function decodeNorms(vn, nL, nH, T) {
  check(vn && vn.layout === 'layer, head, position' && typeof vn.float32 === 'string', 'value_norms');
  const b = base64Bytes(vn.float32);
  check(b.length === nL * nH * T * 4, `value_norms: ${b.length} bytes, not layers x heads x positions x 4`);
  const dv = new DataView(b.buffer, b.byteOffset, b.length), out = new Float32Array(nL * nH * T);
  for (let i = 0; i < out.length; ++i) out[i] = dv.getFloat32(4 * i, true);
  return out;
}
// Every cell of d weighted by its key's value norm, each row renormalised to sum to 1:
// w[t][j] = p[t][j] ||v_j|| / sum_k p[t][k] ||v_k||  (0 where the sum is 0).
function valueWeighted(d, norms) {
  const vals = new Float32Array(d.codes.length);
  for (let li = 0; li < d.nL; ++li)
    for (let hi = 0; hi < d.nH; ++hi) {
      const nb = (li * d.nH + hi) * d.T;
      for (let t = d.A; t < d.B; ++t) {
        const o = cellOffset(d, li, hi, t), n = keysOf(d, t);
        let sum = 0;
        for (let j = 0; j < n; ++j) sum += d.lut[d.codes[o + j]] * norms[nb + j];
        for (let j = 0; j < n; ++j) vals[o + j] = sum > 0 ? d.lut[d.codes[o + j]] * norms[nb + j] / sum : 0;
      }
    }
  return vals;
}
function weightedRuns(m, runs) {
  const nL = m.layers.length, nH = m.heads.length, T = m.positions, out = {};
  out.clean = Object.assign({}, runs.clean, { vals: valueWeighted(runs.clean, decodeNorms(m.value_norms, nL, nH, T)) });
  if (runs.corrupted) {
    out.corrupted = Object.assign({}, runs.corrupted,
                                  { vals: valueWeighted(runs.corrupted, decodeNorms(m.compare.value_norms, nL, nH, T)) });
    const v = new Float32Array(out.clean.vals.length);
    for (let i = 0; i < v.length; ++i) v[i] = DIFF0 + out.clean.vals[i] - out.corrupted.vals[i];
    out.diff = Object.assign({}, runs.diff, { vals: v });
  }
  return out;
}
function selectRun(run) {
  S.run = S.runs && S.runs[run] ? run : 'clean';
  if (S.vnorm && !S.runs.clean.m.value_norms) S.vnorm = false;
  if (S.vnorm && !S.weighted) S.weighted = weightedRuns(S.runs.clean.m, S.runs);
  const d = (S.vnorm ? S.weighted : S.runs)[S.run];
  Object.assign(S, d, { vals: d.vals || null, diff: !!d.diff });
  if (S.vals) S.sink = false;  // nothing to renormalise in a difference or a weighted row
}
// The factor of keys 1.. with the first key set apart.
function restFactor(d, li, hi, t) {
  const p0 = d.lut[d.codes[cellOffset(d, li, hi, t)]];
  return p0 < 1 ? 1 / (1 - p0) : 0;
}
const off = (li, hi, t) => cellOffset(S, li, hi, t);
const rowKeys = (t) => keysOf(S, t);
const padded = (t) => isPadded(S, t);
const weight = (li, hi, t, j) => cellWeight(S, li, hi, t, j);
const sinkRenorm = (li, hi, t) => restFactor(S, li, hi, t);
const kvHead = (h, nRep) => Math.floor(h / nRep);
const kvOf = (h) => kvHead(h, S.nRep);
const tokenText = (m, t, max) => shown(m.tokens[t].text, max);
const tokText = (t, max) => tokenText(S.m, t, max);

// A gh x gw grid over query rows [r0, r1) x keys [k0, k1) of one head, each entry the largest
// weight in its block (so one sharp cell survives the downsampling), PADDING where the block
// holds only padding, MASKED where it holds no stored cell. rest: keys from 1 renormalised.
function blockGrid(li, hi, r0, r1, k0, k1, gh, gw, rest) {
  const grid = new Float32Array(gh * gw).fill(MASKED);
  const nR = r1 - r0, nK = k1 - k0;
  if (nR <= 0 || nK <= 0) return grid;
  const col = new Int32Array(nK);
  for (let j = 0; j < nK; ++j) col[j] = Math.floor(j * gw / nK);
  const codes = S.codes, lut = S.lut, keep = S.m.keep, vals = S.vals;
  if (vals) {  // a difference: each block its value of largest magnitude; weights: the largest
    for (let t = r0; t < r1; ++t) {
      const end = Math.min(rowKeys(t), k1), base = Math.floor((t - r0) * gh / nR) * gw, o = off(li, hi, t);
      for (let j = k0; j < end; ++j) {
        const v = padded(t) || keep[j] !== 1 ? PADDING : vals[o + j], i = base + col[j - k0];
        if (wins(v, grid[i], S.diff)) grid[i] = v;
      }
    }
    return grid;
  }
  for (let t = r0; t < r1; ++t) {
    const end = Math.min(rowKeys(t), k1);
    if (end <= k0) continue;
    const base = Math.floor((t - r0) * gh / nR) * gw, o = off(li, hi, t);
    const f = rest ? sinkRenorm(li, hi, t) : 1;
    if (padded(t)) {
      for (let j = k0; j < end; ++j) {
        const i = base + col[j - k0];
        if (grid[i] < PADDING) grid[i] = PADDING;
      }
    } else if (S.allKeep) {
      for (let j = k0; j < end; ++j) {
        const v = lut[codes[o + j]] * f, i = base + col[j - k0];
        if (v > grid[i]) grid[i] = v;
      }
    } else {
      for (let j = k0; j < end; ++j) {
        const v = keep[j] === 1 ? lut[codes[o + j]] * f : PADDING, i = base + col[j - k0];
        if (v > grid[i]) grid[i] = v;
      }
    }
  }
  return grid;
}

function gridImage(grid, gh, gw) {
  const img = new ImageData(gw, gh), d = img.data, sc = SCALES[S.scale];
  for (let i = 0; i < gh * gw; ++i) {
    const v = grid[i];
    let r, g, b;
    if (v === MASKED) [r, g, b] = RGB_CAUSAL;
    else if (v === PADDING) [r, g, b] = RGB_PADDING;
    else if (S.diff) [r, g, b] = divergingRgb(v - DIFF0, sc);
    else {
      const c = Math.max(0, Math.min(255, Math.round(255 * sc(Math.min(v, 1)))));
      r = PALETTE[c * 3]; g = PALETTE[c * 3 + 1]; b = PALETTE[c * 3 + 2];
    }
    d[i * 4] = r; d[i * 4 + 1] = g; d[i * 4 + 2] = b; d[i * 4 + 3] = 255;
  }
  return img;
}

// Draws a grid at (x, y) scaled to w x h pixels, without smoothing.
function drawGrid(ctx, grid, gh, gw, x, y, w, h) {
  const c = document.createElement('canvas');
  c.width = gw; c.height = gh;
  c.getContext('2d').putImageData(gridImage(grid, gh, gw), 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(c, x, y, w, h);
}

// ---- the model view ---------------------------------------------------------------------

// Thumbnails: up to 16 heads side by side in about 520 pixels, 40 to 96 pixels each.
let THUMB = 96;
function thumbGeometry() {
  const nR = S.B - S.A, n = Math.max(nR, S.maxKeys);
  const cell = n >= THUMB ? 0 : Math.floor(THUMB / n);
  return { gh: Math.min(nR, THUMB), gw: Math.min(S.maxKeys, THUMB),
           h: cell ? nR * cell : Math.min(nR, THUMB), w: cell ? S.maxKeys * cell : Math.min(S.maxKeys, THUMB) };
}

function computeThumbs() {
  const g = thumbGeometry();
  for (let li = 0; li < S.nL; ++li)
    for (let hi = 0; hi < S.nH; ++hi) {
      const th = S.thumbs[li * S.nH + hi];
      th.grid = blockGrid(li, hi, S.A, S.B, 0, S.maxKeys, g.gh, g.gw, false);
      th.rest = null;
    }
}

function paintThumb(th) {
  const g = thumbGeometry(), ctx = th.canvas.getContext('2d');
  let grid = th.grid;
  if (S.sink) {  // the first key apart: thumbnails show the rest, renormalised
    if (!th.rest) th.rest = blockGrid(th.li, th.hi, S.A, S.B, 1, S.maxKeys, g.gh, g.gw, true);
    grid = th.rest;
  }
  drawGrid(ctx, grid, g.gh, g.gw, 0, 0, g.w, g.h);
}

function statIndex(name) { return S.m.stats.names.indexOf(name); }
const statOf = (li, hi, k) => S.m.stats.values[li][hi][k];
const fmt = (x) => (typeof x === 'number' && isFinite(x) ? x.toFixed(3) : String(x));
// A head's figure in its caption: a figure the rows shown do not define (prev of one row) is a dash.
const figure2 = (x) => (typeof x === 'number' && isFinite(x) ? x.toFixed(2) : '\u2013');

function buildModel() {
  THUMB = Math.max(40, Math.min(96, Math.floor(520 / Math.min(S.nH, 16)) - 12));
  const g = thumbGeometry(), root = $('model');
  const sortSel = $('sort');
  for (const name of S.m.stats.names) {
    const o = document.createElement('option');
    o.value = name; o.textContent = name;
    sortSel.appendChild(o);
  }
  const hint = { entropy: 'entropy: mean nats of a row (low: sharp)',
                 first: 'first: mean weight on the first key (the sink)',
                 prev: 'prev: mean weight on the previous token',
                 diag: 'diag: mean weight on the token itself',
                 previous_token_head: 'previous_token_head: TransformerLens detect_head: weight on t-1 / all weight',
                 duplicate_token_head: 'duplicate_token_head: weight on earlier copies of the token / all weight',
                 induction_head: 'induction_head: weight on tokens after earlier copies of the token / all weight' };
  sortSel.title = S.m.stats.names.map((n) => hint[n] || n).join('\n');
  const kv = S.m.model.n_kv_heads, H = S.m.model.n_heads;
  $('gqa').textContent = kv === H ? `MHA: ${H} heads, each its own KV head`
    : kv === 1 ? `MQA: ${H} query heads share 1 KV head`
    : `GQA: ${H} query heads share ${kv} KV heads, ${S.nRep} each`;
  for (let li = 0; li < S.nL; ++li)
    for (let hi = 0; hi < S.nH; ++hi) {
      const el = document.createElement('div');
      el.className = 'thumb';
      const c = document.createElement('canvas');
      c.width = g.w; c.height = g.h;
      const cap = document.createElement('span');
      el.append(c, cap);
      el.addEventListener('click', () => selectHead(li, hi, true));
      el.addEventListener('mousemove', (e) => thumbTip(e, li, hi));
      el.addEventListener('mouseleave', hideTip);
      S.thumbs.push({ el, canvas: c, cap, li, hi, grid: null, rest: null });
    }
  computeThumbs();
  arrangeModel();
  root.dataset.ready = '1';
}

function thumbTip(e, li, hi) {
  const h = S.m.heads[hi], lines = [`layer ${S.m.layers[li]}  head ${h}  kv head ${kvOf(h)}`];
  S.m.stats.names.forEach((n, k) => lines.push(`${n.padEnd(8)} ${fmt(statOf(li, hi, k))}`));
  showTip(e, lines.join('\n'));
}

// The model view's order of layer li: [KV head, [head indices into META's heads]] in model order;
// sorted by a figure (a name of stats.names; '' keeps model order), the heads in a box by theirs,
// the boxes by their best head's, largest first unless asc.
function headOrder(m, li, sort, asc) {
  const k = sort ? m.stats.names.indexOf(sort) : -1, sign = asc ? 1 : -1;
  const nRep = m.model.n_heads / m.model.n_kv_heads, groups = new Map();
  for (let hi = 0; hi < m.heads.length; ++hi) {
    const g = kvHead(m.heads[hi], nRep);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(hi);
  }
  const list = [...groups.entries()];
  if (k >= 0) {
    const key = (hi) => sign * m.stats.values[li][hi][k];
    for (const [, hs] of list) hs.sort((a, b) => key(a) - key(b));
    list.sort((a, b) => key(a[1][0]) - key(b[1][0]));
  }
  return list;
}

// Rows of layers; in each, heads boxed by their KV head, in headOrder.
function arrangeModel() {
  const root = $('model'), k = S.sort ? statIndex(S.sort) : -1;
  root.replaceChildren();
  for (let li = 0; li < S.nL; ++li) {
    const row = document.createElement('div');
    row.className = 'layer-row';
    const name = document.createElement('div');
    name.className = 'layer-name';
    name.textContent = 'L' + S.m.layers[li];
    const list = headOrder(S.m, li, k >= 0 ? S.sort : '', S.asc);
    const box = document.createElement('div');
    box.className = 'groups';
    for (const [g, hs] of list) {
      const ge = document.createElement('div');
      ge.className = 'group';
      const gn = document.createElement('div');
      gn.className = 'group-name';
      gn.textContent = 'kv ' + g;
      const he = document.createElement('div');
      he.className = 'heads';
      for (const hi of hs) {
        const th = S.thumbs[li * S.nH + hi];
        th.cap.textContent = 'h' + S.m.heads[hi] + (k >= 0 ? ' ' + figure2(statOf(li, hi, k)) : '');
        he.appendChild(th.el);
      }
      ge.append(gn, he);
      box.appendChild(ge);
    }
    row.append(name, box);
    root.appendChild(row);
  }
}

function paintModel() {
  for (const th of S.thumbs) {
    paintThumb(th);
    th.el.classList.toggle('sel', th.li === S.li && th.hi === S.hi);
  }
  body.dataset.heads = String(S.thumbs.length);
}

// ---- the head view ----------------------------------------------------------------------

const HEAD_PX = 640;  // the matrix's side at most
function headLayout(nR, nK, withFirst) {
  const n = Math.max(nR, nK, 1);
  const cell = n <= HEAD_PX ? Math.max(1, Math.min(40, Math.floor(HEAD_PX / n))) : 0;
  nK = Math.max(nK, 1);  // the first key apart from a one-key page leaves an empty matrix
  const gh = Math.min(nR, HEAD_PX), gw = Math.min(nK, HEAD_PX);
  const h = cell ? nR * cell : gh, w = cell ? nK * cell : gw;
  const labels = cell >= 6 || n <= 128;
  const left = labels ? 150 : 60, top = labels ? 110 : 40;
  const first = withFirst ? Math.max(cell, 12) : 0, gap = withFirst ? 10 : 0;
  return { nR, nK, cell, gh, gw, h, w, left, top, first, gap, labels,
           x0: left + first + gap, y0: top, width: left + first + gap + w + 20, height: top + h + 30 };
}

// Positions to label along an axis of n positions over px pixels: at most one per `gap` pixels.
function labelStep(n, px, gap) {
  const every = Math.max(1, Math.ceil(gap * n / px));
  const nice = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000];
  return nice.find((x) => x >= every) || every;
}

// The part of a head's matrix drawn: query rows [r0, r1) x keys [k0, k1). The whole (the shown
// rows, every key; from key 1 with the first apart), or the head view's zoom within it.
function fullWindow() {
  return { r0: S.A, r1: S.B, k0: S.sink ? 1 : 0, k1: S.maxKeys };
}
// A window zoomed by `factor` (< 1: in) about (row, key), kept inside `full` and at least 4
// positions a side; factor >= 1 back to `full` once it would cover it.
function zoomWindow(win, full, factor, row, key) {
  const side = (a0, a1, f0, f1, at) => {
    const n = Math.max(Math.min(4, f1 - f0), Math.min(f1 - f0, Math.round((a1 - a0) * factor)));
    let lo = Math.round(at - (at - a0) * n / Math.max(1, a1 - a0));
    lo = Math.max(f0, Math.min(f1 - n, lo));
    return [lo, lo + n];
  };
  const [r0, r1] = side(win.r0, win.r1, full.r0, full.r1, row);
  const [k0, k1] = side(win.k0, win.k1, full.k0, full.k1, key);
  return { r0, r1, k0, k1 };
}
// The positions an axis of [from, to) over px pixels labels: every one with its token when each
// gets `gap` pixels (the window is small enough), else every labelStep-th by index. Only the
// window's: a few thousand positions cost nothing more to label than a few.
function axisLabels(from, to, px, gap) {
  const n = to - from, out = [];
  const every = n * gap <= px ? 1 : labelStep(n, px, gap), text = every === 1;
  for (let t = every === 1 ? from : Math.ceil(from / every) * every; t < to; t += every) out.push(t);
  return { positions: out, text };
}

function drawHead(canvas, li, hi, rowEnd, highlightRow, win) {
  const rest = S.sink, W = win || fullWindow();
  const R0 = W.r0, R1 = W.r1, k0 = W.k0, K1 = W.k1;
  const r1 = Math.max(R0, Math.min(R1, rowEnd)), nR = r1 - R0;
  const L = headLayout(R1 - R0, K1 - k0, rest);
  L.win = W;
  canvas.width = L.width; canvas.height = L.height;
  const ctx = canvas.getContext('2d');
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, L.width, L.height);
  // The grid covers all shown rows; rows past rowEnd (the decode steps not yet taken) stay blank.
  const rowsPx = nR * L.h / (R1 - R0);
  const ghUsed = Math.max(1, Math.round(L.gh * nR / (R1 - R0)));
  if (nR > 0) {
    const grid = blockGrid(li, hi, R0, r1, k0, K1, ghUsed, L.gw, rest);
    drawGrid(ctx, grid, ghUsed, L.gw, L.x0, L.y0, L.w, rowsPx);
    if (rest) {  // the first key's column, apart, unrenormalised
      const g1 = blockGrid(li, hi, R0, r1, 0, 1, ghUsed, 1, false);
      drawGrid(ctx, g1, ghUsed, 1, L.left, L.y0, L.first, rowsPx);
    }
  }
  ctx.strokeStyle = '#999';
  ctx.strokeRect(L.x0 - 0.5, L.y0 - 0.5, L.w + 1, L.h + 1);
  const rowY = (t) => L.y0 + (t - R0) * L.h / (R1 - R0);
  const colX = (j) => L.x0 + (j - k0) * L.w / (K1 - k0);
  // Decode rows: an orange bar on the left, a line where they start.
  if (S.P > R0 && S.P < R1) {
    ctx.strokeStyle = '#f08c00';
    ctx.beginPath();
    ctx.moveTo(L.left - 6, rowY(S.P) + 0.5); ctx.lineTo(L.x0 + L.w, rowY(S.P) + 0.5);
    ctx.stroke();
  }
  if (S.P < R1) {
    ctx.fillStyle = '#f08c00';
    ctx.fillRect(L.left - 6, rowY(Math.max(S.P, R0)), 4, rowY(R1) - rowY(Math.max(S.P, R0)));
  }
  if (highlightRow != null && highlightRow >= R0 && highlightRow < R1) {
    ctx.strokeStyle = '#d9480f'; ctx.lineWidth = 2;
    ctx.strokeRect(L.left - 1, rowY(highlightRow) - 1, L.x0 - L.left + L.w + 2,
                   Math.max(2, rowY(highlightRow + 1) - rowY(highlightRow)) + 2);
    ctx.lineWidth = 1;
  }
  // Labels, the window's only: token texts where each position has room, else positions.
  ctx.fillStyle = '#222';
  ctx.font = '11px ui-monospace, monospace';
  ctx.textBaseline = 'middle';
  const rl = axisLabels(R0, R1, L.h, 12), kl = axisLabels(k0, K1, L.w, 12);
  L.labels = { rows: rl.positions.length, keys: kl.positions.length, text: rl.text && kl.text,
               first: rl.positions.length ? (rl.text ? `${tokText(rl.positions[0], 14)} ${rl.positions[0]}` : String(rl.positions[0])) : '' };
  ctx.textAlign = 'right';
  for (const t of rl.positions)
    ctx.fillText(rl.text ? `${tokText(t, 14)} ${t}` : String(t), L.left - 10, (rowY(t) + rowY(t + 1)) / 2);
  ctx.save();
  ctx.textAlign = 'left';
  for (const j of kl.positions) {
    ctx.save();
    ctx.translate((colX(j) + colX(j + 1)) / 2, L.top - 6);
    ctx.rotate(-Math.PI / 3);
    ctx.fillText(kl.text ? `${j} ${tokText(j, 14)}` : String(j), 0, 0);
    ctx.restore();
  }
  if (rest) {
    ctx.save();
    ctx.translate(L.left + L.first / 2, L.top - 6);
    ctx.rotate(-Math.PI / 3);
    ctx.fillText('0 ' + tokText(0, 10) + ' (apart)', 0, 0);
    ctx.restore();
  }
  ctx.restore();
  ctx.textAlign = 'left';
  ctx.fillStyle = '#666';
  const zoomed = R0 > S.A || R1 < S.B || k0 > (S.sink ? 1 : 0) || K1 < S.maxKeys;
  ctx.fillText('queries down, keys across' + (zoomed ? `; zoomed: rows ${R0} .. ${R1 - 1}, keys ${k0} .. ${K1 - 1}` : ''),
               L.left, L.height - 12);
  return L;
}

function headAt(L, x, y) {  // the query row and key under canvas pixel (x, y), or null
  const W = L.win;
  const t = W.r0 + Math.floor((y - L.y0) * (W.r1 - W.r0) / L.h);
  if (t < W.r0 || t >= W.r1) return null;
  if (S.sink && x >= L.left && x < L.left + L.first) return { t, j: 0 };
  const j = W.k0 + Math.floor((x - L.x0) * (W.k1 - W.k0) / L.w);
  if (x < L.x0 || j >= W.k1) return null;
  return { t, j };
}

function cellLines(li, hi, t, j) {
  const p = weight(li, hi, t, j);
  const lines = [`layer ${S.m.layers[li]}  head ${S.m.heads[hi]} (kv ${kvOf(S.m.heads[hi])})`,
                 `query ${t} ${JSON.stringify(tokText(t, 40))}${t >= S.P ? '  decode step ' + (t - S.P + 1) : ''}`,
                 `key   ${j} ${JSON.stringify(tokText(j, 40))}`];
  if (p === MASKED) lines.push('not computed: the query does not see this key (causal mask, or not yet in the cache)');
  else if (p === PADDING) lines.push('padding');
  else if (S.diff) {
    const src = S.vnorm ? S.weighted : S.runs;
    const a = cellWeight(src.clean, li, hi, t, j), b = cellWeight(src.corrupted, li, hi, t, j);
    lines.push(`clean ${a.toPrecision(4)}  corrupted ${b.toPrecision(4)}  difference ${(p - DIFF0).toPrecision(4)}`);
  } else {
    lines.push(`weight ${p.toPrecision(4)}`);
    if (S.sink && j > 0) lines.push(`without the first key ${(p * sinkRenorm(li, hi, t)).toPrecision(4)}`);
  }
  return lines.join('\n');
}

let headL = null;
function paintHead() {
  const li = S.li, hi = S.hi;
  $('head-title').textContent = `Head: layer ${S.m.layers[li]}, head ${S.m.heads[hi]} (kv head ${kvOf(S.m.heads[hi])})`;
  const full = fullWindow();
  if (S.zoom) S.zoom = zoomWindow(S.zoom, full, 1 - 1e-9, S.zoom.r0, S.zoom.k0);  // within the data, sink or not
  const W = S.zoom || full;
  const figs = S.m.stats.names.map((n, k) => `${n} ${fmt(statOf(li, hi, k))}`).join(', ');
  $('head-note').textContent = (S.diff ? 'Figures clean \u2212 corrupted: ' : '') + figs + '. ' +
    (S.sink ? 'The first key is drawn apart (its raw weight); the other keys are renormalised to sum to 1 without it. '
            : '') +
    (S.vnorm ? 'Weights times ||v_j||, each row renormalised. ' : '') +
    (S.P < S.B ? 'Rows marked orange are decode steps.' : '') +
    (W.r1 - W.r0 > HEAD_PX || W.k1 - W.k0 > HEAD_PX
      ? (S.diff ? ' Each pixel shows its block\'s difference of largest magnitude.' : ' Each pixel shows its block\'s largest weight.')
      : '');
  headL = drawHead($('head'), li, hi, S.B, null, S.zoom);
  body.dataset.headLabels = JSON.stringify(headL.labels);
  const hr = $('head').getBoundingClientRect(), k = hr.width / Math.max(1, $('head').width);
  // Where the row labels end and the matrix starts, in the page's pixels (for headless checks).
  body.dataset.headBox = JSON.stringify({ x: hr.left + (headL.left - 10) * k, y: hr.top + headL.y0 * k,
                                          h: headL.h * k });
  $('zoom-label').textContent = S.zoom ? `rows ${S.zoom.r0} .. ${S.zoom.r1 - 1}, keys ${S.zoom.k0} .. ${S.zoom.k1 - 1}` : 'whole';
}

// ---- the token view ---------------------------------------------------------------------

function buildTokens() {
  const box = $('tokens');
  const frag = document.createDocumentFragment();
  S.m.tokens.forEach((tk, t) => {
    const s = document.createElement('span');
    s.className = 'tok' + (t >= S.P ? ' dec' : '') + (padded(t) ? ' pad' : '');
    s.textContent = tokText(t, 24);
    s.title = `position ${t}, id ${tk.id == null ? 'none' : tk.id}`;
    s.dataset.t = String(t);
    frag.appendChild(s);
  });
  box.appendChild(frag);
  box.addEventListener('click', (e) => {
    const t = e.target.dataset && e.target.dataset.t;
    if (t != null) selectToken(Number(t), true);
  });
  body.dataset.tokens = String(S.m.tokens.length);
  for (const id of ['token-pos', 'token-range']) {
    $(id).max = String(S.T - 1);
    $(id).addEventListener('input', (e) => selectToken(Number(e.target.value), true));
  }
}

const STRIP = 7, TOKEN_W = 900;
// One layer's strips: positions across, cells of up to 24 pixels, the whole width at most
// TOKEN_W (then each pixel the largest weight of its positions).
function tokenLayout() {
  const cell = S.T <= TOKEN_W ? Math.max(1, Math.min(24, Math.floor(TOKEN_W / S.T))) : 0;
  const w = cell ? S.T * cell : TOKEN_W;
  return { left: 64, w, band: 2 * STRIP + 5, top: 2 };
}

// A canvas per shown layer: per head, its row (what t attends to, "to") above its column (what
// attends to t, "from"), both over positions 0..T-1.
function paintTokens() {
  const t = S.tok, Lt = tokenLayout(), box = $('token-views');
  $('token-title').textContent = `Token: position ${t} ${JSON.stringify(tokText(t, 40))}`;
  $('token-label').textContent = (t >= S.P ? `decode step ${t - S.P + 1}` : 'prefill') +
    `; positions 0 .. ${S.T - 1} across`;
  for (const el of $('tokens').querySelectorAll('.tok.sel')) el.classList.remove('sel');
  const chip = $('tokens').children[t];
  if (chip) chip.classList.add('sel');
  $('token-pos').value = String(t); $('token-range').value = String(t);
  if (!box.children.length) {
    for (let li = 0; li < S.nL; ++li) {
      const d = document.createElement('div'), h = document.createElement('div');
      h.className = 'layer-title';
      h.textContent = 'layer ' + S.m.layers[li];
      const c = document.createElement('canvas');
      c.className = 'big';
      c.addEventListener('mousemove', (e) => tokenTip(e, li));
      c.addEventListener('mouseleave', hideTip);
      c.addEventListener('click', (e) => {
        const hit = tokenAt(e, li);
        if (hit) selectToken(hit.pos, true);
      });
      d.append(h, c);
      box.appendChild(d);
    }
  }
  const gw = Math.min(S.T, Lt.w);
  for (let li = 0; li < S.nL; ++li) {
    const c = box.children[li].lastChild;
    c.width = Lt.left + Lt.w + 4; c.height = Lt.top + S.nH * Lt.band;
    const ctx = c.getContext('2d');
    ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, c.width, c.height);
    ctx.textBaseline = 'middle'; ctx.textAlign = 'right';
    for (let hi = 0; hi < S.nH; ++hi) {
      const y = Lt.top + hi * Lt.band;
      const rowG = new Float32Array(gw).fill(MASKED), colG = new Float32Array(gw).fill(MASKED);
      const f = S.sink && t >= S.A && t < S.B ? sinkRenorm(li, hi, t) : 1;
      for (let j = 0; j < S.T; ++j) {
        const x = Math.floor(j * gw / S.T);
        let a = weight(li, hi, t, j);
        if (S.sink && a >= 0) a = j === 0 ? MASKED : a * f;
        if (wins(a, rowG[x], S.diff)) rowG[x] = a;
        let b = weight(li, hi, j, t);
        if (S.sink && b >= 0) b = t === 0 ? MASKED : b * sinkRenorm(li, hi, j);
        if (wins(b, colG[x], S.diff)) colG[x] = b;
      }
      drawGrid(ctx, rowG, 1, gw, Lt.left, y, Lt.w, STRIP);
      drawGrid(ctx, colG, 1, gw, Lt.left, y + STRIP + 1, Lt.w, STRIP);
      ctx.fillStyle = '#222'; ctx.font = '11px ui-monospace, monospace';
      ctx.fillText(`h${S.m.heads[hi]}`, Lt.left - 30, y + STRIP);
      ctx.fillStyle = '#888'; ctx.font = '9px ui-monospace, monospace';
      ctx.fillText('to', Lt.left - 3, y + STRIP / 2); ctx.fillText('from', Lt.left - 3, y + STRIP * 1.5 + 1);
    }
    const x = Lt.left + (t + 0.5) * Lt.w / S.T;
    ctx.strokeStyle = '#d9480f';
    ctx.beginPath(); ctx.moveTo(x, 0); ctx.lineTo(x, c.height); ctx.stroke();
  }
}

function tokenAt(e, li) {
  const Lt = tokenLayout(), c = e.currentTarget, r = c.getBoundingClientRect();
  const x = (e.clientX - r.left) * c.width / r.width, y = (e.clientY - r.top) * c.height / r.height;
  const hi = Math.floor((y - Lt.top) / Lt.band), pos = Math.floor((x - Lt.left) * S.T / Lt.w);
  if (hi < 0 || hi >= S.nH || pos < 0 || pos >= S.T) return null;
  return { hi, pos, from: (y - Lt.top) % Lt.band > STRIP };
}

function tokenTip(e, li) {
  const hit = tokenAt(e, li);
  if (!hit) return hideTip();
  const t = S.tok;
  showTip(e, hit.from ? cellLines(li, hit.hi, hit.pos, t) : cellLines(li, hit.hi, t, hit.pos));
}

// ---- the decode steps -------------------------------------------------------------------

let stepsL = null, playTimer = 0;
function buildSteps() {
  const N = S.m.steps, r = $('step');
  r.max = String(N);
  r.addEventListener('input', () => { S.step = Number(r.value); paintSteps(); writeHash(); });
  $('play').addEventListener('click', () => {
    if (playTimer) { clearInterval(playTimer); playTimer = 0; $('play').textContent = 'play'; return; }
    $('play').textContent = 'stop';
    if (S.step >= N) S.step = 0;
    playTimer = setInterval(() => {
      if (S.step >= N) { clearInterval(playTimer); playTimer = 0; $('play').textContent = 'play'; return; }
      S.step += 1; r.value = String(S.step); paintSteps();
    }, 500);
  });
  if (N === 0) {
    $('play').disabled = true; r.disabled = true;
  }
}

function paintSteps() {
  const N = S.m.steps, s = S.step, li = S.li, hi = S.hi;
  const keys = S.P + s, t = keys - 1;
  $('step-label').textContent = N === 0 ? 'no decode steps in this run (-n 0)'
    : s === 0 ? `the prefill: ${S.P} positions in the cache`
    : `step ${s} of ${N}: ${JSON.stringify(tokText(t, 30))} at position ${t} reads ${keys} cached keys` +
      (s === N && S.m.chosen ? `, then ${JSON.stringify(shown(S.m.chosen.text, 30))} is chosen` : '');
  $('steps-note').textContent = `Layer ${S.m.layers[li]}, head ${S.m.heads[hi]} (the head view's head): ` +
    'the rows the cache has answered so far; the newest row outlined.' +
    (S.A > 0 || S.B < S.T ? ` Only rows ${S.A} .. ${S.B - 1} are in this page.` : '');
  stepsL = drawHead($('steps'), li, hi, keys, s > 0 ? t : null);
  // The newest row of every shown head of this layer, over the context.
  const c = $('steps-rows'), Lt = tokenLayout(), gw = Math.min(S.T, Lt.w);
  $('steps-rows-title').textContent = s > 0 ? `Step ${s}: position ${t}'s row in every head of layer ${S.m.layers[li]}`
                                            : `The last prefill row in every head of layer ${S.m.layers[li]}`;
  const row = s > 0 ? t : S.P - 1;
  c.width = Lt.left + Lt.w + 10; c.height = Lt.top + S.nH * (STRIP * 2 + 2) + 8;
  const ctx = c.getContext('2d');
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, c.width, c.height);
  ctx.font = '11px ui-monospace, monospace'; ctx.textBaseline = 'middle'; ctx.textAlign = 'right';
  for (let k = 0; k < S.nH; ++k) {
    const g = new Float32Array(gw).fill(MASKED);
    for (let j = 0; j < S.T; ++j) {
      const x = Math.floor(j * gw / S.T), v = row >= 0 ? weight(li, k, row, j) : MASKED;
      if (wins(v, g[x], S.diff)) g[x] = v;
    }
    const y = Lt.top + k * (STRIP * 2 + 2);
    drawGrid(ctx, g, 1, gw, Lt.left, y, Lt.w, STRIP * 2);
    ctx.fillStyle = '#222';
    ctx.fillText(`h${S.m.heads[k]}`, Lt.left - 6, y + STRIP);
  }
}

// ---- the logit lens ---------------------------------------------------------------------

const LENS_COLS = 32;
let lensPin = null;
function buildLens() {
  const r = $('lens-from');
  r.max = String(Math.max(0, S.T - LENS_COLS));
  r.addEventListener('input', paintLens);
  const tb = $('lens');
  tb.addEventListener('mouseover', (e) => { if (!lensPin) lensDetail(e.target); });
  tb.addEventListener('click', (e) => {
    const td = e.target.closest && e.target.closest('td');
    if (!td) return;
    for (const x of tb.querySelectorAll('td.pin')) x.classList.remove('pin');
    if (lensPin === td) { lensPin = null; return; }
    lensPin = td; td.classList.add('pin'); lensDetail(td);
  });
}

// A lens token's text as the table shows it (its id when META has no text).
function lensTokenText(m, id) {
  const s = m.lens.texts[String(id)];
  return s == null ? '#' + id : shown(s, 16);
}
// The token that follows position t: the input's next token, or the one chosen after the last.
function nextTokenId(m, t) {
  if (t + 1 < m.positions) return m.tokens[t + 1].id;
  return m.chosen ? m.chosen.id : null;
}

// The lens table over positions [from, to): the header's cells ({text, title}), then a row per
// lens layer ({name, cells}), each cell the layer's top token at t ({k, t, text, hit}; hit: it is
// the next token).
function lensTable(m, from, to) {
  const head = [{ text: 'layer \\ input' }];
  for (let t = from; t < to; ++t) head.push({ text: `${t} ${tokenText(m, t, 10)}`, title: tokenText(m, t) });
  const rows = m.lens.layers.map((layer, k) => {
    const cells = [];
    for (let t = from; t < to; ++t) {
      const top = m.lens.top[k][t];
      const first = Array.isArray(top) && top.length ? top[0] : null;
      cells.push({ k, t, text: first ? lensTokenText(m, first[0]) : '',
                   hit: !!first && first[0] === nextTokenId(m, t) });
    }
    return { name: 'L' + layer, cells };
  });
  return { head, rows };
}

// The lens panel's detail of lens layer k at position t: its top tokens with logits.
function lensLines(m, k, t) {
  const top = m.lens.top[k][t] || [], nid = nextTokenId(m, t);
  const lines = [`layer ${m.lens.layers[k]}, position ${t} ${JSON.stringify(tokenText(m, t, 30))}` +
                 (nid != null ? `, next ${JSON.stringify(lensTokenText(m, nid))}` : '')];
  top.forEach(([id, logit], r) =>
    lines.push(`${r + 1}. ${JSON.stringify(lensTokenText(m, id)).padEnd(20)} id ${String(id).padEnd(7)} logit ${Number(logit).toFixed(3)}`));
  return lines;
}

function paintLens() {
  const lens = S.m.lens, from = Number($('lens-from').value), to = Math.min(S.T, from + LENS_COLS);
  $('lens-range').textContent = `positions ${from} .. ${to - 1} of ${S.T}`;
  const tb = $('lens');
  tb.replaceChildren();
  lensPin = null;
  const table = lensTable(S.m, from, to), head = tb.insertRow();
  for (const c of table.head) {
    const th = document.createElement('th');
    th.textContent = c.text;
    if (c.title != null) th.title = c.title;
    head.appendChild(th);
  }
  for (const row of table.rows) {
    const tr = tb.insertRow();
    const th = document.createElement('th');
    th.textContent = row.name;
    tr.appendChild(th);
    for (const c of row.cells) {
      const td = tr.insertCell();
      td.textContent = c.text;
      if (c.hit) td.classList.add('hit');
      td.dataset.k = String(c.k); td.dataset.t = String(c.t);
    }
  }
}

function lensDetail(el) {
  const td = el && el.closest && el.closest('td');
  if (!td || td.dataset.k == null) return;
  $('lens-detail').textContent = lensLines(S.m, Number(td.dataset.k), Number(td.dataset.t)).join('\n');
}

// ---- tooltip, selection, the URL hash -----------------------------------------------------

function showTip(e, text) {
  const tip = $('tip');
  tip.textContent = text;
  tip.hidden = false;
  const x = Math.min(e.clientX + 14, innerWidth - tip.offsetWidth - 4);
  const y = e.clientY + 16 + tip.offsetHeight > innerHeight ? e.clientY - tip.offsetHeight - 8 : e.clientY + 16;
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
function hideTip() { $('tip').hidden = true; }

function selectHead(li, hi, user) {
  S.li = li; S.hi = hi;
  for (const th of S.thumbs) th.el.classList.toggle('sel', th.li === li && th.hi === hi);
  paintHead();
  paintSteps();
  if (user) {
    writeHash();
    if ($('head').getBoundingClientRect().top > innerHeight) $('panel-head').scrollIntoView();
  }
}
function selectToken(t, user) {
  S.tok = Math.max(0, Math.min(S.T - 1, Number.isFinite(t) ? Math.floor(t) : 0));
  paintTokens();
  if (user) writeHash();
}

// #head=L.H (model layer, query head), token=T, step=S, scale=, sink=1, sort=NAME, asc=1,
// only=model|head|token|steps|lens (that panel alone, for screenshots).
function readHash() {
  const h = new URLSearchParams(location.hash.replace(/^#/, ''));
  const hd = h.get('head');
  if (hd) {
    const [l, q] = hd.split('.').map(Number), li = S.m.layers.indexOf(l), hi = S.m.heads.indexOf(q);
    if (li >= 0 && hi >= 0) { S.li = li; S.hi = hi; }
  }
  if (h.has('token')) S.tok = Math.max(0, Math.min(S.T - 1, Number(h.get('token')) || 0));
  if (h.has('step')) S.step = Math.max(0, Math.min(S.m.steps, Number(h.get('step')) || 0));
  if (SCALES[h.get('scale')]) S.scale = h.get('scale');
  if (h.has('sink')) S.sink = h.get('sink') === '1';
  if (h.has('sort') && (h.get('sort') === '' || statIndex(h.get('sort')) >= 0)) S.sort = h.get('sort');
  if (h.has('asc')) S.asc = h.get('asc') === '1';
  if (h.has('run')) S.run = h.get('run');
  if (h.has('vnorm')) S.vnorm = h.get('vnorm') === '1';
  const z = /^(\d+):(\d+),(\d+):(\d+)$/.exec(h.get('zoom') || '');
  if (z) S.zoom = { r0: +z[1], r1: +z[2], k0: +z[3], k1: +z[4] };
  S.only = h.get('only') || '';
}
function writeHash() {
  const h = new URLSearchParams();
  h.set('head', `${S.m.layers[S.li]}.${S.m.heads[S.hi]}`);
  h.set('token', String(S.tok));
  if (S.m.steps) h.set('step', String(S.step));
  h.set('scale', S.scale);
  if (S.sink) h.set('sink', '1');
  if (S.sort) h.set('sort', S.sort);
  if (S.asc) h.set('asc', '1');
  if (S.runs && S.runs.diff) h.set('run', S.run);
  if (S.vnorm) h.set('vnorm', '1');
  if (S.zoom) h.set('zoom', `${S.zoom.r0}:${S.zoom.r1},${S.zoom.k0}:${S.zoom.k1}`);
  if (S.only) h.set('only', S.only);
  history.replaceState(null, '', '#' + h.toString());
}

// The head opened first, {li, hi}: the one with the largest previous-token figure (the first of
// equals), null when no head has one (the page then opens the first).
function defaultHeadOf(m) {
  const k = m.stats.names.indexOf('prev');
  if (k < 0) return null;
  let best = -Infinity, at = null;
  for (let li = 0; li < m.layers.length; ++li)
    for (let hi = 0; hi < m.heads.length; ++hi) {
      const v = m.stats.values[li][hi][k];
      if (typeof v === 'number' && v > best) { best = v; at = { li, hi }; }
    }
  return at;
}
function defaultHead() {
  const at = defaultHeadOf(S.m);
  if (at) { S.li = at.li; S.hi = at.hi; }
}

// ---- the colour bar, exports ------------------------------------------------------------------

const CB = { w: 300, h: 36, x0: 12, bar: 276, top: 2, thick: 12 };
// The colour bar of the current scale (the difference's when the page shows one) on ctx at (x, y).
function drawColorbar(ctx, x, y) {
  const diff = S.diff;
  for (let i = 0; i < CB.bar; ++i) {
    const f = (i + 0.5) / CB.bar;
    let rgb;
    if (diff) {  // f = (1 + sign(d) scale(|d|)) / 2: the colour of that scaled magnitude
      const m = Math.abs(2 * f - 1);
      rgb = divergingRgb(f >= 0.5 ? 1 : -1, () => m);
    } else {
      const c = Math.min(255, Math.floor(f * 256));
      rgb = [PALETTE[c * 3], PALETTE[c * 3 + 1], PALETTE[c * 3 + 2]];
    }
    ctx.fillStyle = `rgb(${rgb[0]},${rgb[1]},${rgb[2]})`;
    ctx.fillRect(x + CB.x0 + i, y + CB.top, 1, CB.thick);
  }
  ctx.strokeStyle = '#888';
  ctx.strokeRect(x + CB.x0 - 0.5, y + CB.top - 0.5, CB.bar + 1, CB.thick + 1);
  ctx.fillStyle = '#222'; ctx.font = '10px ui-monospace, monospace';
  ctx.textBaseline = 'top'; ctx.textAlign = 'center';
  for (const { p, x: f } of colorbarTicks(S.scale, diff)) {
    const px = x + CB.x0 + f * CB.bar;
    ctx.fillRect(px, y + CB.top + CB.thick, 1, 3);
    ctx.fillText(String(p), px, y + CB.top + CB.thick + 4);
  }
}
function colorbarTitle() {
  const s = { linear: 'linear', sqrt: 'square root: colour at sqrt(p)', log: 'log10, 1e-4 .. 1: colour at (log10 p + 4) / 4' }[S.scale];
  return (S.diff ? 'clean \u2212 corrupted, scale on |d|: ' : 'weight p, scale ') + s +
    (S.vnorm ? '; weighted by ||v||: p ||v_j|| / sum_k p ||v_k||' : '');
}
function paintColorbar() {
  const c = $('colorbar');
  c.width = CB.w; c.height = CB.h;
  const ctx = c.getContext('2d');
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, c.width, c.height);
  drawColorbar(ctx, 0, 0);
  $('colorbar-title').textContent = colorbarTitle();
  const r = c.getBoundingClientRect();
  body.dataset.colorbar = JSON.stringify({ left: r.left + CB.x0, top: r.top + CB.top, width: CB.bar,
                                           height: CB.thick, diff: S.diff });
}

// A panel's canvas as exported: a title above, the canvas, the colour bar below.
function exportCanvas(src, title) {
  const c = document.createElement('canvas');
  c.width = Math.max(src.width, CB.w + 20); c.height = 24 + src.height + CB.h + 22;
  const ctx = c.getContext('2d');
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, c.width, c.height);
  ctx.fillStyle = '#222'; ctx.font = '13px system-ui, sans-serif'; ctx.textBaseline = 'top';
  ctx.fillText(title, 8, 6);
  ctx.drawImage(src, 0, 24);
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillText(colorbarTitle(), 8, 24 + src.height + 2);
  drawColorbar(ctx, 0, 24 + src.height + 18);
  return c;
}
const xmlText = (s) => String(s).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c])
  .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '');
// The SVG of a panel: its raster (the matrix, as drawn, a PNG data URL) under a vector title and
// a vector colour bar (rects and tick labels), width x height of the raster.
function svgOfCanvas(title, png, width, height, scale, diff) {
  const y = 24 + height, W = Math.max(width, CB.w + 20), H = y + CB.h + 22, n = 64, parts = [];
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
             `<rect width="${W}" height="${H}" fill="#fff"/>`,
             `<text x="8" y="18" font-family="sans-serif" font-size="13">${xmlText(title)}</text>`,
             `<image x="0" y="24" width="${width}" height="${height}" href="${png}"/>`);
  for (let i = 0; i < n; ++i) {
    const f = (i + 0.5) / n;
    const rgb = diff ? divergingRgb(f >= 0.5 ? 1 : -1, () => Math.abs(2 * f - 1))
      : [0, 1, 2].map((k) => PALETTE[Math.min(255, Math.floor(f * 256)) * 3 + k]);
    parts.push(`<rect x="${(CB.x0 + i * CB.bar / n).toFixed(2)}" y="${y + 18 + CB.top}" width="${(CB.bar / n + 0.3).toFixed(2)}" ` +
               `height="${CB.thick}" fill="rgb(${rgb.join(',')})"/>`);
  }
  for (const { p, x } of colorbarTicks(scale, diff))
    parts.push(`<text x="${(CB.x0 + x * CB.bar).toFixed(2)}" y="${y + 18 + CB.top + CB.thick + 12}" font-family="monospace" ` +
               `font-size="10" text-anchor="middle">${p}</text>`);
  parts.push('</svg>');
  return parts.join('\n');
}
function download(name, blob) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob); a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}
function exportPanel(id, kind) {
  const src = $(id), title = $(id === 'head' ? 'head-title' : 'step-label').textContent || id;
  const c = exportCanvas(src, (S.runs.diff ? `[${S.run}] ` : '') + title);
  const name = `attn-${id}-L${S.m.layers[S.li]}-H${S.m.heads[S.hi]}`;
  if (kind === 'png') c.toBlob((b) => download(name + '.png', b), 'image/png');
  else download(name + '.svg', new Blob([svgOfCanvas((S.runs.diff ? `[${S.run}] ` : '') + title, src.toDataURL('image/png'),
                                                     src.width, src.height, S.scale, S.diff)],
                                        { type: 'image/svg+xml' }));
}

// ---- start --------------------------------------------------------------------------------

async function main() {
  const m = readMeta();
  $('title').textContent = 'attn-cli view: ' + shown(m.title || '', 80);
  document.title = 'attn-cli view: ' + shown(m.title || '', 80);
  const md = m.model;
  $('summary').textContent =
    `${md.n_layers} layers, ${md.n_heads} heads, ${md.n_kv_heads} KV heads, head_dim ${md.head_dim}, ` +
    `mask ${md.mask}; ${m.positions} positions: prefill ${m.prefill}, ${m.steps} decode steps` +
    (m.rows[0] > 0 || m.rows[1] < m.positions ? `; rows ${m.rows[0]} .. ${m.rows[1] - 1} shown` : '') +
    `; batch row ${m.batch_row}; ${m.encoding.bits}-bit ${m.encoding.code}` +
    (m.generated_by ? '; ' + shown(m.generated_by, 40) : '');
  const drawn = m.drawn || {};
  if (drawn.weights || drawn.input) {
    $('banner').textContent =
      `Drawn from a seed, not a trained model's: ${drawn.weights ? 'random weights' : ''}` +
      `${drawn.weights && drawn.input ? ' and ' : ''}${drawn.input ? 'random input' : ''}. ` +
      'Its heads show what the arithmetic does, not what a model has learnt.';
    $('banner').hidden = false;
  }
  const probs = await readProbs(m);
  S.runs = runData(m, probs, m.compare != null ? await readProbs(runMeta(m, 'corrupted'), 'attn-probs-corrupted') : null);
  $('run-control').hidden = m.compare == null;
  $('vnorm-control').hidden = m.value_norms == null;
  body.dataset.decodedMs = performance.now().toFixed(1);  // base64 and inflate done
  setup(m, probs);
  defaultHead();
  S.tok = S.P > 0 ? S.P - 1 : 0;
  S.step = m.steps;
  readHash();
  selectRun(S.run);
  $('run').value = S.run; $('sink').disabled = !!S.vals; $('vnorm').checked = S.vnorm;
  $('scale').value = S.scale; $('sink').checked = S.sink;
  paintColorbar();

  const panels = ['model', 'head', 'token', 'steps'];
  if (m.lens != null) panels.push('lens');
  if (!panels.includes(S.only)) S.only = '';
  for (const p of panels) $('panel-' + p).hidden = !!S.only && S.only !== p;
  // The first draw: the model view and the head view.
  buildModel();
  $('sort').value = S.sort; $('sort-asc').checked = S.asc;
  if (S.sort) arrangeModel();
  paintModel();
  paintHead();
  body.dataset.firstDrawMs = performance.now().toFixed(1);
  buildTokens(); selectToken(S.tok, false);
  buildSteps(); $('step').value = String(S.step); paintSteps();
  if (m.lens != null) { buildLens(); paintLens(); }

  const hc = $('head');
  hc.addEventListener('mousemove', (e) => {
    const r = hc.getBoundingClientRect();
    const hit = headL && headAt(headL, (e.clientX - r.left) * hc.width / r.width, (e.clientY - r.top) * hc.height / r.height);
    if (hit) showTip(e, cellLines(S.li, S.hi, hit.t, hit.j)); else hideTip();
  });
  hc.addEventListener('mouseleave', hideTip);
  // Zoom: the wheel about the cell under the pointer, the buttons about the window's centre.
  const zoomBy = (factor, at) => {
    const full = fullWindow(), win = S.zoom || full;
    const c = at || { t: (win.r0 + win.r1) / 2, j: (win.k0 + win.k1) / 2 };
    const z = zoomWindow(win, full, factor, c.t, c.j);
    S.zoom = z.r0 === full.r0 && z.r1 === full.r1 && z.k0 === full.k0 && z.k1 === full.k1 ? null : z;
    paintHead(); writeHash();
  };
  hc.addEventListener('wheel', (e) => {
    const r = hc.getBoundingClientRect();
    const hit = headL && headAt(headL, (e.clientX - r.left) * hc.width / r.width, (e.clientY - r.top) * hc.height / r.height);
    if (!hit) return;
    e.preventDefault();
    zoomBy(e.deltaY < 0 ? 0.5 : 2, hit);
  }, { passive: false });
  $('zoom-in').addEventListener('click', () => zoomBy(0.5));
  $('zoom-out').addEventListener('click', () => zoomBy(2));
  $('zoom-reset').addEventListener('click', () => { S.zoom = null; paintHead(); writeHash(); });
  hc.addEventListener('click', (e) => {
    const r = hc.getBoundingClientRect();
    const hit = headL && headAt(headL, (e.clientX - r.left) * hc.width / r.width, (e.clientY - r.top) * hc.height / r.height);
    if (hit) selectToken(hit.t, true);
  });
  const sc = $('steps');
  sc.addEventListener('mousemove', (e) => {
    const r = sc.getBoundingClientRect();
    const hit = stepsL && headAt(stepsL, (e.clientX - r.left) * sc.width / r.width, (e.clientY - r.top) * sc.height / r.height);
    if (hit && hit.t < S.P + S.step) showTip(e, cellLines(S.li, S.hi, hit.t, hit.j)); else hideTip();
  });
  sc.addEventListener('mouseleave', hideTip);
  $('scale').addEventListener('change', (e) => {
    S.scale = e.target.value; paintModel(); paintHead(); paintTokens(); paintSteps(); paintColorbar(); writeHash();
  });
  const redraw = () => {
    $('sink').checked = S.sink; $('sink').disabled = !!S.vals;
    for (const th of S.thumbs) th.rest = null;
    computeThumbs(); arrangeModel(); paintModel(); paintHead(); paintTokens(); paintSteps(); paintColorbar();
    writeHash();
  };
  $('vnorm').addEventListener('change', (e) => { S.vnorm = e.target.checked; selectRun(S.run); redraw(); });
  $('run').addEventListener('change', (e) => {
    selectRun(e.target.value);
    $('sink').checked = S.sink; $('sink').disabled = !!S.vals;
    for (const th of S.thumbs) th.rest = null;
    computeThumbs(); arrangeModel(); paintModel(); paintHead(); paintTokens(); paintSteps(); paintColorbar();
    writeHash();
  });
  for (const b of document.querySelectorAll('button[data-export]'))
    b.addEventListener('click', () => exportPanel(b.dataset.export, b.dataset.kind));
  $('sink').addEventListener('change', (e) => {
    S.sink = e.target.checked; paintModel(); paintHead(); paintTokens(); paintSteps(); writeHash();
  });
  $('sort').addEventListener('change', (e) => { S.sort = e.target.value; arrangeModel(); writeHash(); });
  $('sort-asc').addEventListener('change', (e) => { S.asc = e.target.checked; arrangeModel(); writeHash(); });

  body.dataset.panels = panels.join(',');
  body.dataset.run = S.runs.diff ? S.run : '';
  body.dataset.vnorm = S.vnorm ? '1' : '0';
  body.dataset.requests = String(performance.getEntriesByType('resource').length);
  body.dataset.state = 'drawn';
}

main().catch((e) => fail(e && e.message ? e.message : String(e)));
