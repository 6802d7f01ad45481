// Latch receipts and journal proofs, verified with WebCrypto: the
// JavaScript twin of the Go package github.com/latchhq/latch/receipt (read
// its doc.go for what a receipt proves). An ES module with no dependencies,
// for agents (Node 22 and later) and browsers (the console imports it);
// both implementations pass the vectors in testdata/vectors.json.

// WebCrypto: the global one (browsers, Node 19 and later), else Node's.
const subtle = (globalThis.crypto && globalThis.crypto.subtle) || (await import('node:crypto')).webcrypto.subtle;

// ---- Bytes.

// b64 decodes standard base64 with padding, strictly (as Go's
// encoding/base64.StdEncoding); it throws on anything else.
export function b64(s) {
  if (typeof s !== 'string' || s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) {
    throw new Error('not standard base64');
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function hex(u8) {
  return Array.from(u8, (b) => b.toString(16).padStart(2, '0')).join('');
}

async function sha256(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const buf = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { buf.set(p, o); o += p.length; }
  return new Uint8Array(await subtle.digest('SHA-256', buf));
}

// ---- Merkle proofs, exactly as golang.org/x/mod/sumdb/tlog (RFC 6962):
// leaf hash SHA-256(0x00 || data), interior SHA-256(0x01 || left || right).

export const leafHash = (data) => sha256(new Uint8Array([0]), data);
export const nodeHash = (l, r) => sha256(new Uint8Array([1]), l, r);

// maxpow2 is the largest power of 2 smaller than n (n >= 2), as tlog's.
function maxpow2(n) {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

// runProof is tlog's runRecordProof: the root the proof p gives for leaf n
// (with hash h) in the tree of leaves [lo, hi); null if p does not fit.
async function runProof(p, lo, hi, n, h) {
  if (!(lo <= n && n < hi)) return null;
  if (lo + 1 === hi) return p.length === 0 ? h : null;
  if (p.length === 0) return null;
  const k = maxpow2(hi - lo);
  const last = p[p.length - 1];
  const rest = p.slice(0, -1);
  if (n < lo + k) {
    const th = await runProof(rest, lo, lo + k, n, h);
    return th && nodeHash(th, last);
  }
  const th = await runProof(rest, lo + k, hi, n, h);
  return th && nodeHash(last, th);
}

// verifyLeafHash checks a leaf hash at index against a tree of size leaves
// with root hash root (bytes); proof is a list of hashes (bytes).
export async function verifyLeafHash(h, index, size, proof, root) {
  if (!(size > 0 && index >= 0 && index < size) || proof.length > 63) return false;
  if (proof.some((p) => p.length !== 32)) return false;
  const got = await runProof(proof, 0, size, index, h);
  return got !== null && hex(got) === hex(root);
}

// verifyInclusion checks leaf data at index against a tree of size leaves.
export async function verifyInclusion(data, index, size, proof, root) {
  return verifyLeafHash(await leafHash(data), index, size, proof, root);
}

// ---- Checkpoint notes (golang.org/x/mod/sumdb/note), Ed25519.

// parseNote splits a signed note into its text and signatures, and reads
// the checkpoint lines (origin, size, root hash) of its text.
export function parseNote(msg) {
  const i = msg.lastIndexOf('\n\n');
  if (i < 0) return null;
  const text = msg.slice(0, i + 1);
  const lines = text.slice(0, -1).split('\n');
  const sigs = msg.slice(i + 2).split('\n').filter((l) => l !== '').map((l) => {
    const m = /^\u2014 (\S+) (\S+)$/.exec(l);
    if (!m) return null;
    try { return { name: m[1], sig: b64(m[2]) }; } catch (e) { return null; }
  });
  let root = null;
  try { root = lines[2] ? b64(lines[2]) : null; } catch (e) { root = null; }
  const size = /^(0|[1-9][0-9]*)$/.test(lines[1] || '') ? Number(lines[1]) : NaN;
  return { text, origin: lines[0], size, root: root && root.length === 32 ? root : null, sigs };
}

// verifyNote checks the note's Ed25519 signature under a verifier key
// "name+hash+base64(0x01 || public key)". It answers "verified", "bad", or
// "unsupported" (this runtime has no WebCrypto Ed25519).
export async function verifyNote(msg, vkey) {
  const note = parseNote(msg);
  // name+hash+key: the base64 key may hold '+' itself.
  const a = vkey.indexOf('+');
  const b = a < 0 ? -1 : vkey.indexOf('+', a + 1);
  if (!note || b < 0) return 'bad';
  const name = vkey.slice(0, a), hash = vkey.slice(a + 1, b);
  let key;
  try { key = b64(vkey.slice(b + 1)); } catch (e) { return 'bad'; }
  if (key.length !== 33 || key[0] !== 1) return 'bad';
  const kh = hex((await sha256(new TextEncoder().encode(name + '\n'), key)).slice(0, 4));
  if (kh !== hash.toLowerCase()) return 'bad';
  let pub;
  try {
    pub = await subtle.importKey('raw', key.slice(1), { name: 'Ed25519' }, false, ['verify']);
  } catch (e) {
    return 'unsupported';
  }
  for (const s of note.sigs) {
    if (!s || s.name !== name || s.sig.length !== 68 || hex(s.sig.slice(0, 4)) !== kh) continue;
    if (await subtle.verify({ name: 'Ed25519' }, pub, s.sig.slice(4), new TextEncoder().encode(note.text))) {
      return 'verified';
    }
  }
  return 'bad';
}

// verifyCosignature checks a witness's cosignature (c2sp.org/
// tlog-cosignature, cosignature/v1) on the note under its verifier key
// "name+hash+base64(0x04 || public key)": the Ed25519 signature of
// "cosignature/v1\ntime <t>\n" + the checkpoint text, encoded as the
// 8-byte time then the signature. Same answers as verifyNote.
export async function verifyCosignature(msg, wkey) {
  const note = parseNote(msg);
  const a = wkey.indexOf('+');
  const b = a < 0 ? -1 : wkey.indexOf('+', a + 1);
  if (!note || b < 0) return 'bad';
  const name = wkey.slice(0, a), hash = wkey.slice(a + 1, b);
  let key;
  try { key = b64(wkey.slice(b + 1)); } catch (e) { return 'bad'; }
  if (key.length !== 33 || key[0] !== 4) return 'bad';
  const kh = hex((await sha256(new TextEncoder().encode(name + '\n'), key)).slice(0, 4));
  if (kh !== hash.toLowerCase()) return 'bad';
  let pub;
  try {
    pub = await subtle.importKey('raw', key.slice(1), { name: 'Ed25519' }, false, ['verify']);
  } catch (e) {
    return 'unsupported';
  }
  for (const s of note.sigs) {
    if (!s || s.name !== name || s.sig.length !== 4 + 8 + 64 || hex(s.sig.slice(0, 4)) !== kh) continue;
    const t = new DataView(s.sig.buffer, s.sig.byteOffset + 4, 8).getBigUint64(0);
    const m = new TextEncoder().encode('cosignature/v1\ntime ' + t.toString() + '\n' + note.text);
    if (await subtle.verify({ name: 'Ed25519' }, pub, s.sig.slice(12), m)) return 'verified';
  }
  return 'bad';
}

// ---- Journal records (protobuf latch.record.v1.JournalEntry), the fields
// a receipt repeats, read as protobuf does: the last scalar wins, a message
// field given twice is merged.

function varint(buf, o) {
  let v = 0n, shift = 0n;
  for (let i = 0; i < 10; i++) {
    if (o.i >= buf.length) throw new Error('truncated varint');
    const c = buf[o.i++];
    v |= BigInt(c & 0x7f) << shift;
    if (c < 0x80) return BigInt.asUintN(64, v);
    shift += 7n;
  }
  throw new Error('varint too long');
}

// fields calls fn(num, type, value) for each field: value is a BigInt for
// a varint, the bytes of a length-delimited field, else null.
function fields(buf, fn) {
  const o = { i: 0 };
  while (o.i < buf.length) {
    const tag = varint(buf, o);
    const num = Number(tag >> 3n), typ = Number(tag & 7n);
    if (num < 1 || num > 536870911) throw new Error('bad field number');
    let v = null;
    if (typ === 0) v = varint(buf, o);
    else if (typ === 2) {
      const n = Number(varint(buf, o));
      if (o.i + n > buf.length) throw new Error('truncated field');
      v = buf.subarray(o.i, o.i + n);
      o.i += n;
    } else if (typ === 1) o.i += 8;
    else if (typ === 5) o.i += 4;
    else throw new Error('wire type ' + typ + ' not supported');
    if (o.i > buf.length) throw new Error('truncated field');
    fn(num, typ, v);
  }
}

const stateNames = ['unspecified', 'accepted', 'awaiting_approval', 'authorized', 'dispatched', 'completed',
  'delivered', 'outcome_unknown', 'not_executed', 'needs_review', 'rejected', 'cancelled'];
const outcomeNames = ['', 'succeeded', 'failed_at_target'];
const enumName = (names, v) => (v < BigInt(names.length) ? names[Number(v)] : '#' + v);

function parseRecord(data) {
  const rec = { index: 0n, id: '', tool: '', actor: '', fingerprint: '', state: 0n, outcome: 0n, targetStatus: 0, resultSHA256: '', hasExecution: false };
  const parts = [];
  fields(data, (num, typ, v) => {
    if (num === 1) { if (typ !== 0) throw new Error('index has wire type ' + typ); rec.index = v; }
    if (num === 9) { if (typ !== 2) throw new Error('execution has wire type ' + typ); parts.push(v); rec.hasExecution = true; }
  });
  let n = 0;
  for (const p of parts) n += p.length;
  const exec = new Uint8Array(n);
  n = 0;
  for (const p of parts) { exec.set(p, n); n += p.length; }
  const dec = new TextDecoder('utf-8', { fatal: true });
  fields(exec, (num, typ, v) => {
    const str = () => { if (typ !== 2) throw new Error('execution field ' + num + ' has wire type ' + typ); return dec.decode(v); };
    const int = () => { if (typ !== 0) throw new Error('execution field ' + num + ' has wire type ' + typ); return v; };
    switch (num) {
      case 1: rec.id = str(); break;
      case 2: rec.fingerprint = str(); break;
      case 3: rec.actor = str(); break;
      case 5: rec.tool = str(); break;
      case 11: rec.state = int(); break;
      case 12: rec.outcome = int(); break;
      case 13: rec.targetStatus = Number(BigInt.asIntN(32, int())); break;
      case 33: if (typ !== 2) throw new Error('execution field 33 has wire type ' + typ); rec.resultSHA256 = hex(v); break;
    }
  });
  return rec;
}

// ---- Receipts.

export const FORMAT = 'latch-receipt/v1';
const stringKeys = ['actor', 'checkpoint', 'execution_id', 'fingerprint', 'format', 'leaf_hash', 'outcome', 'record', 'result_sha256', 'state', 'tool'];
const intKeys = ['journal_index', 'target_status'];

class ReceiptError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}
const fail = (kind, message) => { throw new ReceiptError(kind, message); };

// digest is a receipt's short name (its one-line text form): the hex leaf hash.
export function digest(receipt) { return hex(b64(receipt.leaf_hash)); }

// verifyReceipt checks a receipt (the parsed JSON object of
// structuredContent.receipt) under the journal's verifier key. It answers
// { ok: true, origin, size } or { ok: false, kind, error }: kind is
// "malformed", "mismatch", "signature", "proof", "witness" or
// "unsupported" (no WebCrypto Ed25519 here), the Go package's error
// classes. opts.witnessKeys, when given, are witnesses' cosignature keys
// whose valid cosignature the checkpoint must carry (Go: VerifyWith).
export async function verifyReceipt(receipt, vkey, opts = {}) {
  try {
    const res = await check(receipt, vkey);
    for (const wk of opts.witnessKeys || []) {
      const v = await verifyCosignature(receipt.checkpoint, wk);
      if (v === 'unsupported') fail('unsupported', 'this runtime has no WebCrypto Ed25519');
      if (v !== 'verified') fail('witness', 'the checkpoint is not co-signed by the witness ' + wk.slice(0, wk.indexOf('+')));
    }
    return res;
  } catch (e) {
    if (e instanceof ReceiptError) return { ok: false, kind: e.kind, error: e.message };
    return { ok: false, kind: 'malformed', error: String(e && e.message || e) };
  }
}

async function check(r, vkey) {
  if (r === null || typeof r !== 'object' || Array.isArray(r)) fail('malformed', 'a receipt is a JSON object');
  const known = new Set([...stringKeys, ...intKeys, 'proof']);
  for (const k of Object.keys(r)) if (!known.has(k)) fail('malformed', 'unknown key ' + JSON.stringify(k));
  for (const k of stringKeys) if (typeof r[k] !== 'string') fail('malformed', 'key ' + JSON.stringify(k) + ' must be a string');
  for (const k of intKeys) if (!Number.isSafeInteger(r[k])) fail('malformed', 'key ' + JSON.stringify(k) + ' must be an integer');
  if (r.journal_index < 0 || r.target_status < -2147483648 || r.target_status > 2147483647) fail('malformed', 'journal_index or target_status out of range');
  if (!Array.isArray(r.proof) || r.proof.some((p) => typeof p !== 'string')) fail('malformed', 'key "proof" must be a list of base64 strings');
  if (r.format !== FORMAT) fail('malformed', 'format ' + JSON.stringify(r.format) + ', want ' + JSON.stringify(FORMAT));
  let record, leaf, proof;
  try {
    record = b64(r.record); leaf = b64(r.leaf_hash); proof = r.proof.map(b64);
  } catch (e) {
    fail('malformed', 'record, leaf_hash and proof must be standard base64');
  }
  const lh = await leafHash(record);
  if (hex(lh) !== hex(leaf)) fail('proof', 'leaf_hash is not the hash of record');
  let rec;
  try { rec = parseRecord(record); } catch (e) { fail('malformed', 'record is not a journal entry: ' + e.message); }
  if (!rec.hasExecution) fail('mismatch', 'the record carries no execution');
  const want = [
    ['journal_index', String(r.journal_index), String(rec.index)],
    ['execution_id', r.execution_id, rec.id],
    ['tool', r.tool, rec.tool],
    ['actor', r.actor, rec.actor],
    ['fingerprint', r.fingerprint, rec.fingerprint],
    ['state', r.state, enumName(stateNames, rec.state)],
    ['outcome', r.outcome, enumName(outcomeNames, rec.outcome)],
    ['target_status', String(r.target_status), String(rec.targetStatus)],
    ['result_sha256', r.result_sha256, rec.resultSHA256],
  ];
  for (const [field, got, w] of want) {
    if (got !== w) fail('mismatch', field + ' is ' + JSON.stringify(got) + ' in the receipt but ' + JSON.stringify(w) + ' in the record');
  }
  const v = await verifyNote(r.checkpoint, vkey);
  if (v === 'unsupported') fail('unsupported', 'this runtime has no WebCrypto Ed25519');
  if (v !== 'verified') fail('signature', 'the checkpoint is not signed by ' + vkey);
  const note = parseNote(r.checkpoint);
  const name = vkey.slice(0, vkey.indexOf('+'));
  if (note.origin !== name || !Number.isSafeInteger(note.size) || !note.root) fail('malformed', 'checkpoint text is not <origin>, <size>, <root hash>');
  if (r.journal_index >= note.size) fail('proof', 'journal_index ' + r.journal_index + ' is not covered by the checkpoint of size ' + note.size);
  if (!(await verifyLeafHash(lh, r.journal_index, note.size, proof, note.root))) {
    fail('proof', 'the proof does not take record ' + r.journal_index + ' to the root of the checkpoint of size ' + note.size);
  }
  return { ok: true, origin: note.origin, size: note.size };
}
