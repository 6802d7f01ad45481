// Runs receipt.mjs over vectors.json and prints one JSON line per vector:
// {"name", "ok", "kind", "error"}. TestJSVectors (js_test.go) reads it.
import { readFileSync } from 'node:fs';
import { verifyReceipt, digest } from '../receipt.mjs';

const v = JSON.parse(readFileSync(new URL('./vectors.json', import.meta.url), 'utf8'));
const out = [];
for (const [i, r] of v.valid.entries()) {
  out.push({ name: 'valid/' + i, digest: digest(r), ...(await verifyReceipt(r, v.verifier_key)) });
  out.push({ name: 'other-key/' + i, ...(await verifyReceipt(r, v.other_key)) });
}
for (const t of v.tampered) out.push({ name: 'tampered/' + t.name, ...(await verifyReceipt(t.receipt, v.verifier_key)) });
for (const arg of process.argv.slice(2)) {
  // Receipts given as files (a receipt a test made through a real stack):
  // the key is the file next to it with ".key" appended.
  const r = JSON.parse(readFileSync(arg, 'utf8'));
  out.push({ name: 'file/' + arg, ...(await verifyReceipt(r, readFileSync(arg + '.key', 'utf8').trim())) });
}
for (const o of out) console.log(JSON.stringify(o));
