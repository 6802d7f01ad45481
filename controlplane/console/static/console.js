// Latch console: live updates (server-sent events) and journal proofs
// checked in this browser with WebCrypto. Every page reads without it.
// The proofs and signatures are checked by receipt.mjs, the JavaScript
// verifier of Latch receipts (package receipt, which the console serves).
import { b64, hex, leafHash, nodeHash, verifyInclusion, parseNote, verifyNote, verifyReceipt } from './receipt.mjs';

(function () {
  window.latchProof = { b64, hex, leafHash, nodeHash, verifyInclusion, parseNote, verifyNote, verifyReceipt };

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
