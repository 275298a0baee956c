#!/usr/bin/env python3
"""Writes docs/heads-stories260K.md, "what the real model's heads do", from the tool itself: runs
`attn-cli view --json` on stories260K over a few prompts, averages the per-head figures it prints
(entropy, first, prev, diag: docs/contract.md, attn-cli view), names each head's kind by the
thresholds below, and takes screenshots of a few head views and of the README's page with headless
chromium (the page's URL hash selects the head: #head=L.H&only=head).

usage: tools/heads_report.py [--cli build/apps/attn-cli] [--no-shots]
Run from anywhere; it writes into the repository it lives in.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = 'weights/stories260K.gguf'
STEPS = 16
PROMPTS = [
    'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.',
    'Tom and his dog went to the big hill. They ran up and down and laughed all day.',
    'One day, a small bird found a shiny red ball in the garden. The bird was very happy.',
    'Sara had a toy car. She gave it to her friend Ben because he was sad.',
    'The sun was hot. Mom said, "Let\'s go to the beach!" Tim got his bucket and his hat.',
]
# The README's page: the contract's example command, on the first prompt.
README_PROMPT, README_STEPS = PROMPTS[0], 16
# A head's kind, by the figures averaged over the prompts (first match wins).
SINK, PREV, DIAG, DIFFUSE = 0.5, 0.5, 0.5, 0.6
# Which figure is which (the order `stats.names` prints them in).
NAMES = ['entropy', 'first', 'prev', 'diag']


def run_view(cli, prompt, steps, out):
    args = [cli, 'view', '-m', os.path.join(ROOT, MODEL), '-p', prompt, '-n', str(steps), '--out', out,
            '--json']
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    figures = json.loads(r.stdout)
    page = open(out, encoding='utf-8').read()
    meta = json.loads(re.search(r'<script id="attn-meta" type="application/json">(.*?)</script>',
                                page, re.S).group(1))
    assert figures['stats']['names'] == NAMES, figures['stats']['names']
    return figures, meta


def uniform_entropy(meta):
    """The entropy a head would have spreading each real row evenly over its keys (nats)."""
    A, B = meta['rows']
    rows = [t for t in range(A, B) if meta['keep'][t]]
    return sum(math.log(meta['row_keys'][t]) for t in rows) / len(rows)


def kind(f, u):
    entropy, first, prev, diag = f
    if first >= SINK:
        return 'sink'
    if prev >= PREV:
        return 'previous token'
    if diag >= DIAG:
        return 'self'
    if entropy >= DIFFUSE * u:
        return 'diffuse'
    return 'mixed'


def screenshot(chromium, url, png, size, tmp):
    subprocess.run([chromium, '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-extensions',
                    '--host-resolver-rules=MAP * ~NOTFOUND', '--proxy-server=127.0.0.1:9',
                    '--virtual-time-budget=10000', '--hide-scrollbars',
                    '--user-data-dir=' + os.path.join(tmp, 'profile-' + os.path.basename(png)),
                    '--screenshot=' + png, '--window-size=' + size, url],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--cli', default=os.path.join(ROOT, 'build/apps/attn-cli'))
    ap.add_argument('--no-shots', action='store_true', help='the page only, no screenshots')
    a = ap.parse_args()
    chromium = shutil.which('chromium')
    if not a.no_shots and not chromium:
        sys.exit('heads_report: chromium is not installed (tools/deps.sh); --no-shots writes the page only')
    tmp = tempfile.mkdtemp(prefix='attn-heads-')
    try:
        runs = []
        for i, p in enumerate(PROMPTS):
            runs.append(run_view(a.cli, p, STEPS, os.path.join(tmp, 'p%d.html' % i)))
        layers, heads = runs[0][0]['layers'], runs[0][0]['heads']
        n_kv, n_heads = runs[0][1]['model']['n_kv_heads'], runs[0][1]['model']['n_heads']
        rep = n_heads // n_kv
        mean = [[[sum(r[0]['stats']['values'][li][hi][k] for r in runs) / len(runs) for k in range(4)]
                 for hi in range(len(heads))] for li in range(len(layers))]
        spread = [[(min(r[0]['stats']['values'][li][hi][2] for r in runs),
                    max(r[0]['stats']['values'][li][hi][2] for r in runs))
                   for hi in range(len(heads))] for li in range(len(layers))]
        u = sum(uniform_entropy(r[1]) for r in runs) / len(runs)
        kinds = [[kind(mean[li][hi], u) for hi in range(len(heads))] for li in range(len(layers))]
        positions = [r[1]['positions'] for r in runs]

        def pick(key, want=None):  # the head with the largest figure (of a kind, if given)
            best = None
            for li in range(len(layers)):
                for hi in range(len(heads)):
                    if want and kinds[li][hi] != want:
                        continue
                    if best is None or key(mean[li][hi]) > key(mean[best[0]][best[1]]):
                        best = (li, hi)
            return best

        shots = []
        if not a.no_shots:
            page = os.path.join(tmp, 'p0.html')
            chosen = [('the largest prev: a previous-token head', pick(lambda f: f[2])),
                      ('the largest entropy: the most diffuse head', pick(lambda f: f[0])),
                      ('the largest first: the nearest this model has to a sink', pick(lambda f: f[1])),
                      ('the largest diag', pick(lambda f: f[3]))]
            os.makedirs(os.path.join(ROOT, 'docs/heads-stories260K'), exist_ok=True)
            for what, (li, hi) in chosen:
                name = 'docs/heads-stories260K/layer%d-head%d.png' % (layers[li], heads[hi])
                screenshot(chromium, 'file://%s#head=%d.%d&only=head' % (page, layers[li], heads[hi]),
                           os.path.join(ROOT, name), '900,1000', tmp)
                shots.append((what, li, hi, name))
            # The README's screenshot: the whole page of the README's command.
            readme = os.path.join(tmp, 'readme.html')
            run_view(a.cli, README_PROMPT, README_STEPS, readme)
            screenshot(chromium, 'file://' + readme, os.path.join(ROOT, 'docs/view-stories260K.png'),
                       '1400,1000', tmp)

        out = []
        w = out.append
        w('# What stories260K\'s heads do\n')
        w('Written by `tools/heads_report.py` (do not edit by hand): `attn-cli view --json` on '
          '`%s` (5 layers, %d query heads sharing %d KV heads, %d each) over %d prompts, each with '
          '%d greedy decode steps (%s positions), the figures averaged over the prompts. '
          'The figures are the ones the page sorts by, over every real query row: **entropy** the '
          'mean of -Σ p ln p of a row (nats; spread evenly over its keys a row would have %.2f on '
          'average here), **first** the mean weight on the first token (`<s>`, the "sink"), **prev** '
          'the mean weight on the previous token, **diag** the mean weight on the token itself.\n'
          % (MODEL, n_heads, n_kv, rep, len(PROMPTS), STEPS, ', '.join(map(str, positions)), u))
        w('A head is called, first match wins: *sink* when first ≥ %.1f, *previous token* when '
          'prev ≥ %.1f, *self* when diag ≥ %.1f, *diffuse* when its entropy is at least %.0f%% of '
          'the even spread\'s, else *mixed*. "prev range" is the lowest and highest prev over the '
          'prompts.\n' % (SINK, PREV, DIAG, DIFFUSE * 100))
        w('Prompts:\n')
        for p in PROMPTS:
            w('- `%s`' % p.replace('`', "'"))
        w('')
        for li, layer in enumerate(layers):
            w('## Layer %d\n' % layer)
            w('| head | kv head | entropy | first | prev | prev range | diag | kind |')
            w('|---:|---:|---:|---:|---:|---|---:|---|')
            for hi, h in enumerate(heads):
                e, f, p, d = mean[li][hi]
                lo, hi_ = spread[li][hi]
                w('| %d | %d | %.3f | %.3f | %.3f | %.2f–%.2f | %.3f | %s |'
                  % (h, h // rep, e, f, p, lo, hi_, d, kinds[li][hi]))
            w('')
        w('## Summary\n')
        for k in ['previous token', 'sink', 'self', 'diffuse', 'mixed']:
            hs = ['L%d h%d' % (layers[li], heads[hi]) for li in range(len(layers))
                  for hi in range(len(heads)) if kinds[li][hi] == k]
            w('- **%s** (%d): %s' % (k, len(hs), ', '.join(hs) if hs else 'none'))
        w('')
        # What the numbers say, in a few sentences computed from them.
        top_first = pick(lambda f: f[1])
        groups = differ = 0
        for li in range(len(layers)):
            for g in sorted({h // rep for h in heads}):
                es = [mean[li][hi][0] for hi, h in enumerate(heads) if h // rep == g]
                groups += 1
                differ += max(es) - min(es) > 0.5
        by_kind = lambda k: sorted({layers[li] for li in range(len(layers)) for hi in range(len(heads))
                                    if kinds[li][hi] == k})
        w('Reading: the largest mass on the first token is %.2f (layer %d, head %d), so no head of '
          'this small model parks its attention on `<s>` the way large models\' sink heads do; '
          'previous-token heads are in layer(s) %s; diffuse heads are in layer(s) %s (%d of layer '
          '%d\'s %d heads). Query heads that share a KV head read the same keys and still need not '
          'agree: in %d of the %d KV groups their entropies differ by more than 0.5 nats.\n'
          % (mean[top_first[0]][top_first[1]][1], layers[top_first[0]], heads[top_first[1]],
             ', '.join(map(str, by_kind('previous token'))) or 'none',
             ', '.join(map(str, by_kind('diffuse'))) or 'none',
             sum(1 for hi in range(len(heads)) if kinds[-1][hi] == 'diffuse'), layers[-1], len(heads),
             differ, groups))
        lens_runs = [r[1] for r in runs if r[1].get('lens')]
        if lens_runs:
            # How often each layer's lens puts the token that comes next first (the input's next
            # token; after the last position, the one the model chose).
            w('## The logit lens\n')
            w('Each layer\'s output through the final norm and the output head (the page\'s lens '
              'panel): how often its top token is the token that comes next, over every position of '
              'the %d prompts: where the next token is the prompt\'s, and from the last prompt position on, '
              'where it is the one greedy decoding chose (there the last layer scores 1 by '
              'construction: its lens is the logits); and how often the top token is the position\'s '
              'own input token. The early layers mostly echo their input; the next token emerges '
              'layer by layer.\n' % len(lens_runs))
            w('| layer | next token: the prompt\'s | next token: the chosen one | the input token itself |')
            w('|---:|---:|---:|---:|')
            for k, layer in enumerate(lens_runs[0]['lens']['layers']):
                pre = dec = cur = n_pre = n_dec = n = 0
                for m in lens_runs:
                    T, P = m['positions'], m['prefill']
                    for t in range(T):
                        top = m['lens']['top'][k][t][0][0]
                        nxt = m['tokens'][t + 1]['id'] if t + 1 < T else (m['chosen'] or {}).get('id')
                        hit = top == nxt
                        if t < P - 1:
                            pre += hit
                            n_pre += 1
                        else:
                            dec += hit
                            n_dec += 1
                        cur += top == m['tokens'][t]['id']
                        n += 1
                w('| %d | %.2f | %.2f | %.2f |' % (layer, pre / max(n_pre, 1), dec / max(n_dec, 1), cur / n))
            w('')
        if shots:
            w('## A few heads, drawn\n')
            w('Head views of the first prompt\'s page (`attn-cli view -m %s -p "%s" -n %d --out '
              'view.html`, opened as `view.html#head=L.H&only=head`; sqrt scale, queries down, keys '
              'across, decode rows marked orange):\n' % (MODEL, PROMPTS[0], STEPS))
            for what, li, hi, name in shots:
                e, f, p, d = mean[li][hi]
                w('**Layer %d, head %d**, %s (entropy %.2f, first %.2f, prev %.2f, diag %.2f):\n'
                  % (layers[li], heads[hi], what, e, f, p, d))
                w('![layer %d head %d](%s)\n' % (layers[li], heads[hi], os.path.relpath(name, 'docs')))
        with open(os.path.join(ROOT, 'docs/heads-stories260K.md'), 'w', encoding='utf-8') as f:
            f.write('\n'.join(out))
        print('wrote docs/heads-stories260K.md' + (' and %d screenshots' % (len(shots) + 1) if shots else ''))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
