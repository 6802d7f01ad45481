// Latch console: live updates (server-sent events) and journal proofs
// checked in this browser with WebCrypto. Every page reads without it.
'use strict';
(function () {
  // ---- Merkle proofs, exactly as golang.org/x/mod/sumdb/tlog (RFC 6962):
  // leaf hash SHA-256(0x00 || data), interior SHA-256(0x01 || left || right).
  function b64(s) {
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  function hex(u8) {
    return Array.from(u8, (b) => b.toString(16).padStart(2, '0')).join('');
  }
  async function sha256(...parts) {
    let n = 0;
    for (const p of parts) n += p.length;
    const buf = new Uint8Array(n);
    let o = 0;
    for (const p of parts) { buf.set(p, o); o += p.length; }
    return new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
  }
  const leafHash = (data) => sha256(new Uint8Array([0]), data);
  const nodeHash = (l, r) => sha256(new Uint8Array([1]), l, r);
  // maxpow2 is the largest power of 2 smaller than n (n >= 2), as tlog's.
  function maxpow2(n) {
    let k = 1;
    while (k * 2 < n) k *= 2;
    return k;
  }
  // runProof is tlog's runRecordProof: the root the proof p gives for leaf
  // n (with hash h) in the tree of leaves [lo, hi); null if p does not fit.
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
  // verifyInclusion checks leaf data at index against a tree of size
  // leaves with root hash root (bytes); proof is a list of hashes (bytes).
  async function verifyInclusion(data, index, size, proof, root) {
    if (!(size > 0 && index >= 0 && index < size) || proof.length > 63) return false;
    const got = await runProof(proof, 0, size, index, await leafHash(data));
    return got !== null && hex(got) === hex(root);
  }

  // ---- Checkpoint notes (golang.org/x/mod/sumdb/note), Ed25519.
  // parseNote splits a signed note into its text and signatures.
  function parseNote(msg) {
    const i = msg.lastIndexOf('\n\n');
    if (i < 0) return null;
    const text = msg.slice(0, i + 1);
    const lines = text.slice(0, -1).split('\n');
    const sigs = msg.slice(i + 2).split('\n').filter((l) => l !== '').map((l) => {
      const m = /^\u2014 (\S+) (\S+)$/.exec(l);
      return m && { name: m[1], sig: b64(m[2]) };
    });
    return { text, origin: lines[0], size: Number(lines[1]), root: lines[2] ? b64(lines[2]) : null, sigs };
  }
  // verifyNote checks the note's Ed25519 signature under a verifier key
  // "name+hash+base64(0x01 || public key)". It answers "verified", "bad",
  // or "unsupported" (this browser has no WebCrypto Ed25519).
  async function verifyNote(msg, vkey) {
    const note = parseNote(msg);
    // name+hash+key: the base64 key may hold '+' itself.
    const a = vkey.indexOf('+');
    const b = a < 0 ? -1 : vkey.indexOf('+', a + 1);
    if (!note || b < 0) return 'bad';
    const name = vkey.slice(0, a), hash = vkey.slice(a + 1, b), keyB64 = vkey.slice(b + 1);
    const key = b64(keyB64);
    if (key.length !== 33 || key[0] !== 1) return 'bad';
    const kh = hex((await sha256(new TextEncoder().encode(name + '\n'), key)).slice(0, 4));
    if (kh !== hash.toLowerCase()) return 'bad';
    let pub;
    try {
      pub = await crypto.subtle.importKey('raw', key.slice(1), { name: 'Ed25519' }, false, ['verify']);
    } catch (e) {
      return 'unsupported';
    }
    for (const s of note.sigs) {
      if (!s || s.name !== name || s.sig.length !== 68 || hex(s.sig.slice(0, 4)) !== kh) continue;
      if (await crypto.subtle.verify({ name: 'Ed25519' }, pub, s.sig.slice(4), new TextEncoder().encode(note.text))) {
        return 'verified';
      }
    }
    return 'bad';
  }

  window.latchProof = { b64, hex, leafHash, nodeHash, verifyInclusion, parseNote, verifyNote };

  function say(el, text, ok) {
    if (!el) return;
    el.textContent = text;
    el.classList.remove('ok', 'bad', 'unk');
    el.classList.add(ok === true ? 'ok' : ok === false ? 'bad' : 'unk');
  }

  // checkProofs fetches an execution's leaves and proofs and checks each
  // here, then marks the journal rows and the checkpoint's signature.
  async function checkProofs(id) {
    const sig = document.getElementById('sig-browser');
    let ans;
    try {
      const r = await fetch('/ui/executions/' + encodeURIComponent(id) + '/proof', { credentials: 'same-origin' });
      ans = await r.json();
    } catch (e) {
      say(sig, 'could not fetch the proofs: ' + e, false);
      return;
    }
    document.body.dataset.proofs = 'checking';
    if (!ans.checkpoint) {
      say(sig, 'no signed checkpoint yet: nothing to check', null);
    } else {
      const v = await verifyNote(ans.checkpoint, ans.verifier_key);
      if (v === 'verified') say(sig, 'signature verified in your browser (Ed25519, WebCrypto)', true);
      else if (v === 'unsupported') say(sig, 'this browser has no WebCrypto Ed25519: the signature was checked on the server only', null);
      else say(sig, 'signature does NOT verify under ' + ans.verifier_key, false);
    }
    const note = ans.checkpoint ? parseNote(ans.checkpoint) : null;
    for (const rec of ans.records) {
      const cell = document.querySelector('[data-proof-index="' + rec.index + '"]');
      if (rec.error || !note || note.size !== ans.size) {
        say(cell, 'not verified: ' + (rec.error || 'the checkpoint does not parse'), false);
        continue;
      }
      const ok = await verifyInclusion(b64(rec.leaf), rec.index, note.size, rec.proof.map(b64), note.root);
      say(cell, ok ? 'verified in your browser against checkpoint ' + note.size : 'NOT verified: the proof does not reach the checkpoint root', ok);
    }
    for (const i of ans.unanchored) {
      say(document.querySelector('[data-proof-index="' + i + '"]'), 'not yet anchored: newer than the newest checkpoint', null);
    }
    document.body.dataset.proofs = 'done';
  }

  async function checkAuditNote() {
    const el = document.getElementById('newest-note');
    if (!el) return;
    const v = await verifyNote(el.dataset.note, el.dataset.key);
    const out = document.getElementById('sig-browser');
    if (v === 'verified') say(out, 'signature verified in your browser (Ed25519, WebCrypto)', true);
    else if (v === 'unsupported') say(out, 'this browser has no WebCrypto Ed25519: checked on the server only', null);
    else say(out, 'signature does NOT verify in your browser', false);
  }

  // ---- Live updates: the server says which executions moved; the page
  // fetches its own new state (?partial=1) and swaps the live region,
  // unless the operator is typing in it.
  function editing(live) {
    const a = document.activeElement;
    if (a && live.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    return Array.from(live.querySelectorAll('textarea, input[type=text]')).some((t) => t.value !== '');
  }
  function live() {
    const region = document.getElementById('live');
    if (!region || !window.EventSource) return;
    const status = document.getElementById('live-status');
    const id = region.dataset.id || '';
    let timer = null;
    let stale = false;
    async function refresh() {
      timer = null;
      if (editing(region)) {
        stale = true;
        say(status, 'changed: reload to see it (you are typing)', null);
        return;
      }
      const u = new URL(location.href);
      u.searchParams.set('partial', '1');
      u.searchParams.delete('done');
      const r = await fetch(u, { credentials: 'same-origin' });
      if (!r.ok) return;
      region.innerHTML = await r.text();
      say(status, 'live · updated ' + new Date().toLocaleTimeString(), true);
      if (id) checkProofs(id);
    }
    const es = new EventSource('/ui/events');
    es.addEventListener('hello', () => say(status, 'live', true));
    es.addEventListener('journal', (ev) => {
      const ch = JSON.parse(ev.data);
      if (id && !ch.many && !ch.executions.includes(id)) return;
      if (!timer) timer = setTimeout(refresh, 150);
    });
    es.addEventListener('signedout', () => { es.close(); say(status, 'signed out: reload to sign in', false); });
    es.onerror = () => say(status, stale ? 'changed: reload' : 'reconnecting…', null);
  }

  document.addEventListener('DOMContentLoaded', () => {
    const region = document.getElementById('live');
    if (region && region.dataset.id) checkProofs(region.dataset.id);
    checkAuditNote();
    live();
  });
})();
