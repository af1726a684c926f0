"""The console's only style sheet and script, inlined in every page: nothing is fetched from
elsewhere, so the console works offline. The Content-Security-Policy allows exactly these two
by their hashes.

The script is progressive enhancement: every button and form works without it (a POST, then
a redirect back with a notice). With it, forms are sent in the background, required
questions are checked before a form is sent, and a server-sent-events stream makes every
page follow the ledger live: on each change the page is fetched again and the regions marked
``data-live`` are merged element by element (``data-key`` + ``data-version``), so a form
being filled in is left alone until its interaction changes.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["CSP", "SCRIPT", "STYLE"]

STYLE = """
:root{--bg:#f6f7f9;--fg:#1d2230;--mut:#5b6475;--line:#d9dde5;--card:#fff;--pri:#1f6feb;
--danger:#c62828;--ok:#1b7f3b;--warn:#a15c00;--code:#0f1420;--codefg:#e6e9ef}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif,
"Apple Color Emoji","Segoe UI Emoji","Noto Color Emoji";
background:var(--bg);color:var(--fg)}
header.top{display:flex;gap:18px;align-items:center;padding:10px 22px;background:#111827;
color:#e5e7eb;white-space:nowrap}
header.top a{color:#e5e7eb;text-decoration:none;font-weight:600}
header.top a.here{border-bottom:2px solid #60a5fa}
header.top .who{margin-left:auto;color:#9ca3af;font-size:13px;min-width:0;overflow:hidden;
text-overflow:ellipsis}
.count{display:inline-block;min-width:20px;padding:0 6px;border-radius:10px;background:#374151;
font-size:12px;text-align:center;margin-left:4px}
.count.hot{background:#b45309;color:#fff}
main{max-width:1000px;margin:0 auto;padding:18px 22px 60px;overflow-wrap:break-word}
h1{font-size:21px;margin:4px 0 14px}
h2{font-size:17px;margin:22px 0 10px}
#notice:empty{display:none}
.problems{margin:0 0 14px;padding:10px 14px;border-radius:8px;background:#fff3f0;
border:1px solid #f3b7a8;color:#8a1c1c}
.problems ul{margin:6px 0 0;padding-left:18px}
.problems time{color:#6b7280;font-size:13px}
#notice{margin:0 0 14px}
#notice>div{padding:10px 14px;border-radius:8px;background:#eef4ff;border:1px solid #bfd3ff}
#notice>div+div{margin-top:6px}
#notice>.refused,.refusal{background:#fff3f0;border:1px solid #f3b7a8;color:#8a1c1c}
.refusal{margin:8px 0;padding:8px 12px;border-radius:6px;font-weight:600}
.refusal::before{content:"✗ "}
table.sessions{width:100%;border-collapse:collapse;background:var(--card);
border:1px solid var(--line);border-radius:8px}
table.sessions th,table.sessions td{padding:9px 12px;border-bottom:1px solid var(--line);
text-align:left;vertical-align:top}
table.sessions th{font-size:12px;text-transform:uppercase;color:var(--mut);letter-spacing:.04em}
.state{display:inline-block;padding:1px 9px;border-radius:11px;font-size:12.5px;
font-weight:600;background:#e5e7eb;color:#374151;white-space:nowrap}
.state.running{background:#dbeafe;color:#1e40af}
.state.waiting-for-approval,.state.waiting-for-its-plan-to-be-reviewed,.state.pending{background:#fef3c7;color:#92400e}
.state.waiting-for-input{background:#ede9fe;color:#5b21b6}
.state.failed,.state.orphaned,.state.unknown,.state.agent-could-not-start{background:#fee2e2;color:#991b1b}
.state.resolved,.state.delivered,.state.decided{background:#dcfce7;color:#166534}
.state.cancelled,.state.expired,.state.closed{background:#e5e7eb;color:#4b5563}
.card{background:var(--card);border:1px solid var(--line);border-left:4px solid #9ca3af;
border-radius:8px;padding:14px 16px;margin:0 0 14px}
.card.live{border-left-color:#d97706}
.card.done{border-left-color:#16a34a}
.card.gone{border-left-color:#dc2626}
.card h3{margin:0;font-size:16px}
.card .head{display:flex;gap:10px;align-items:center;flex-wrap:wrap}
.kind{font-size:11px;text-transform:uppercase;letter-spacing:.06em;color:var(--mut);
border:1px solid var(--line);border-radius:4px;padding:0 5px}
.meta{color:var(--mut);font-size:13px;margin:4px 0 8px}
.meta a{color:var(--pri)}
pre{margin:8px 0;padding:10px 12px;border-radius:6px;background:var(--code);color:var(--codefg);
overflow:auto;font:13px/1.45 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
white-space:pre-wrap;word-break:break-word}
pre .add{color:#7ee787}pre .del{color:#ff7b72}pre .hunk{color:#79c0ff}
pre .hd{color:#d2a8ff;font-weight:600}pre .prog{color:#ffa657;font-weight:600}
pre .flag{color:#79c0ff}pre .string{color:#a5d6ff}pre .op{color:#ff7b72}
pre .var{color:#d2a8ff}pre .comment{color:#8b949e}
dl.fields{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:8px 0}
dl.fields dt{color:var(--mut)}dl.fields dd{margin:0;min-width:0;overflow-wrap:anywhere}
.actions{display:flex;flex-wrap:wrap;gap:10px 12px;margin:12px 0 4px;align-items:flex-start}
.action{display:flex;flex-direction:column;gap:4px;flex:1 1 0}
.action button{width:100%;white-space:nowrap;text-align:center;min-width:0}
label.message{display:flex;flex-direction:column;gap:4px;font-size:13px;color:var(--mut);
flex-basis:100%;order:1}
label.message textarea{max-width:none;min-height:44px}
.action .effect{color:var(--mut);font-size:13px;line-height:1.35}
.card p.file{margin:10px 0 -4px;font-weight:600}
.card p.file code{font-size:13.5px}
form.stop{display:inline;margin-left:6px}
form.stop button{min-width:0;padding:1px 12px;font-size:13px;vertical-align:middle}
button{font:inherit;padding:6px 14px;border-radius:6px;border:1px solid #9ca3af;
background:#f9fafb;cursor:pointer;min-width:120px;text-align:left}
button.primary{background:var(--pri);border-color:var(--pri);color:#fff}
button.danger{background:#fff;border-color:var(--danger);color:var(--danger)}
button:disabled{opacity:.55;cursor:default}
fieldset.question{border:1px solid var(--line);border-radius:6px;margin:10px 0;padding:8px 12px}
fieldset.question.missing{border-color:var(--danger);background:#fff6f5}
fieldset.question legend{font-weight:600;padding:0 4px}
.req{color:var(--danger);font-weight:400;font-size:12px}
.choice{display:block;margin:3px 0}.choice small{color:var(--mut)}
input[type=text],input[type=password],textarea,select{font:inherit;padding:6px 8px;
border:1px solid #b6bcc8;border-radius:6px;width:100%;max-width:520px}
.other{margin-top:6px}
.why{color:var(--danger);font-size:13px;margin:4px 0}
.status{margin:10px 0 4px;font-weight:600}
details.history{font-size:13px;color:var(--mut)}details.history summary{cursor:pointer}
ol.timeline{list-style:none;margin:8px 0 0;padding:8px 0 0;border-top:1px dashed var(--line);
font-size:13px;color:var(--mut)}
ol.timeline li{margin:2px 0}ol.timeline b{color:var(--fg);font-weight:600}
.msg{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;
margin:0 0 14px;white-space:pre-wrap;word-break:break-word}
.msg .tool{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;color:#374151}
.msg code{background:#eef0f4;padding:0 4px;border-radius:4px;font-size:13px}
.msg.mine{background:#eef4ff;border-color:#bfd3ff;margin-left:80px}
.msg.md p,.msg.md ul,.msg.md ol,.msg.md blockquote,.msg.md table,.msg.md pre{margin:0 0 8px}
.msg.md>:last-child,.msg.md li>:last-child{margin-bottom:0}
.msg.md ul,.msg.md ol{padding-left:22px}
.msg.md h4,.msg.md h5,.msg.md h6{margin:2px 0 6px;font-size:15px}.msg.md h4{font-size:16px}
.msg.md blockquote{padding:0 0 0 10px;border-left:3px solid var(--line);color:var(--mut)}
.msg.md table{border-collapse:collapse;display:block;overflow-x:auto}
.msg.md th,.msg.md td{border:1px solid var(--line);padding:3px 8px;text-align:left}
.msg.md .right{text-align:right}.msg.md .center{text-align:center}
.msg.md hr{border:0;border-top:1px solid var(--line);margin:8px 0}
.msg.md a{color:var(--pri)}
.msg pre code{background:none;padding:0;border-radius:0;font-size:inherit;color:inherit}
.msg .who{display:block;font-size:12px;color:var(--mut);margin-bottom:2px}
.msg.gateway{background:#f1f3f6;border-style:dashed;border-color:#c3c9d4;color:#374151;
font-size:14px}
.msg.gateway .who{font-weight:600;letter-spacing:.02em}
form.say{display:flex;gap:10px;margin-top:18px}
form.say select{width:auto;max-width:220px}
form.say textarea{max-width:none;min-height:60px}
form.say.start{flex-wrap:wrap;margin-top:0}
form.say.start textarea{flex:1}
.try{flex-basis:100%}
.try button{min-width:0;padding:2px 12px;margin:2px 4px 2px 0;border-radius:14px;
font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13.5px}
.try .meta{margin:6px 0 0}
@media (max-width:600px){
header.top{gap:10px;padding:10px 12px}
header.top .who{display:none}
main{padding:14px 12px 48px}
.msg.mine{margin-left:24px}
form.say{flex-direction:column}
form.say select{max-width:none;width:100%}
form.say button[type=submit].primary{align-self:flex-end}
table.sessions .wide{display:none}
.actions{flex-direction:column;align-items:stretch}
.action{flex:none;gap:2px}
.action button{white-space:normal}
}
.empty{color:var(--mut)}
details summary{cursor:pointer;color:var(--pri)}
"""

SCRIPT = """
(() => {
  const notice = document.getElementById('notice');
  function say(text, ok) {
    const line = document.createElement('div');
    line.textContent = text;
    if (!ok) { line.className = 'refused'; line.setAttribute('role', 'alert'); }
    notice.replaceChildren(line);
  }
  // a refusal goes next to the form it concerns (as the page without script has it)
  function refuse(form, text) {
    let line = form.nextElementSibling;
    if (!line || !line.matches('.refusal')) {
      line = document.createElement('p');
      line.className = 'refusal';
      line.setAttribute('role', 'alert');
      form.after(line);
    }
    line.textContent = text;
  }
  function unrefuse(form) {
    const line = form.nextElementSibling;
    if (line && line.matches('.refusal')) line.remove();
  }
  let busy = false, again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(location.href, {headers: {'Accept': 'text/html'}});
      if (r.status === 401) { location.reload(); return; }
      if (r.ok) merge(new DOMParser().parseFromString(await r.text(), 'text/html'));
    } catch (e) { /* the next change tries again */ }
    finally { busy = false; if (again) { again = false; refresh(); } }
  }
  function merge(doc) {
    document.title = doc.title;  // it counts the requests that wait
    for (const fresh of doc.querySelectorAll('[data-live]')) {
      const region = document.getElementById(fresh.id);
      if (!region) continue;
      const old = new Map();
      for (const el of [...region.children]) {
        // one element per key: a second one would never be replaced nor removed
        if (old.has(el.dataset.key)) el.remove(); else old.set(el.dataset.key, el);
      }
      let prev = null;
      for (const el of [...fresh.children]) {
        let cur = old.get(el.dataset.key);
        if (cur && cur.dataset.version === el.dataset.version) {
          old.delete(el.dataset.key);
        } else {
          const node = document.importNode(el, true);
          if (cur) { cur.replaceWith(node); old.delete(el.dataset.key); }
          cur = node;
        }
        const want = prev ? prev.nextElementSibling : region.firstElementChild;
        if (want !== cur) region.insertBefore(cur, want);
        prev = cur;
      }
      for (const el of old.values()) el.remove();
    }
  }
  function answered(q) {
    return !!q.querySelector('input:checked') ||
      [...q.querySelectorAll('input[type=text],input[type=password],textarea')]
        .some(i => i.value.trim() !== '');
  }
  function mark(q, gap) {
    q.classList.toggle('missing', gap);
    const why = q.querySelector('.why');
    if (why) why.textContent = gap ? 'This question needs an answer.' : '';
  }
  function named(qs) {
    const names = qs.map(q => q.querySelector('legend').firstChild.textContent.trim());
    if (names.length === 1) return names[0] + ' needs an answer.';
    return names.slice(0, -1).join(', ') + ' and ' + names[names.length - 1] +
      ' need an answer.';
  }
  function missing(form) {
    const gaps = [];
    for (const q of form.querySelectorAll('fieldset.question[data-required]')) {
      const gap = !answered(q);
      mark(q, gap);
      if (gap) gaps.push(q);
    }
    return gaps;
  }
  // a question marked missing is cleared as soon as it is answered, and so is the form's
  // refusal once no question is left missing (not only at the next Submit)
  function recheck(ev) {
    const q = ev.target.closest('fieldset.question.missing');
    if (!q || !answered(q)) return;
    mark(q, false);
    const form = q.closest('form');
    const gaps = [...form.querySelectorAll('fieldset.question.missing')];
    if (gaps.length) refuse(form, named(gaps)); else unrefuse(form);
  }
  document.addEventListener('input', recheck);
  document.addEventListener('change', recheck);
  // files pasted into or dropped on a message box join its file picker (issue 32)
  function addFiles(form, files) {
    const input = form && form.querySelector('input[type=file]');
    if (!input || !files || !files.length) return false;
    const all = new DataTransfer();
    for (const f of input.files) all.items.add(f);
    for (const f of files) all.items.add(f);
    input.files = all.files;
    return true;
  }
  const sayForm = (ev) => ev.target.closest ? ev.target.closest('form.say') : null;
  document.addEventListener('paste', (ev) => {
    if (ev.clipboardData && addFiles(sayForm(ev), ev.clipboardData.files)) ev.preventDefault();
  });
  document.addEventListener('dragover', (ev) => { if (sayForm(ev)) ev.preventDefault(); });
  document.addEventListener('drop', (ev) => {
    if (ev.dataTransfer && addFiles(sayForm(ev), ev.dataTransfer.files)) ev.preventDefault();
  });
  document.addEventListener('submit', async (ev) => {
    const form = ev.target;
    if (!form.matches('form[data-enhance]')) return;
    ev.preventDefault();
    // what an earlier form was told is not about this one: it must not stay on top
    notice.replaceChildren();
    const gaps = form.matches('.qform') ? missing(form) : [];
    if (gaps.length) {
      refuse(form, named(gaps));
      gaps[0].scrollIntoView({block: 'center'});
      return;
    }
    // files picked (the message box) go as multipart, the rest as a plain form
    const data = new FormData(form, ev.submitter);
    const picked = [...form.querySelectorAll('input[type=file]')].some(i => i.files.length);
    const body = picked ? data : new URLSearchParams(data);
    const buttons = form.querySelectorAll('button');
    buttons.forEach(b => b.disabled = true);
    try {
      const r = await fetch(form.action, {method: 'POST', body,
        headers: {'Accept': 'application/json'}});
      if (r.status === 401) { location.reload(); return; }
      const reply = await r.json();
      if (reply.accepted) { unrefuse(form); say(reply.text, true); }
      else refuse(form, reply.text);
      if (reply.location) { location.href = reply.location; return; }
      if (form.matches('.say') && reply.accepted) form.reset();
    } catch (e) {
      say('The console did not answer: ' + e, false);
    } finally {
      buttons.forEach(b => b.disabled = false);
      refresh();
    }
  });
  // times come as UTC text in <time datetime>: shown in the browser's own zone, the UTC
  // text kept as the tooltip (a page without script reads the UTC text)
  function localTimes(root) {
    for (const t of root.querySelectorAll('time[datetime]:not([data-local])')) {
      const at = new Date(t.getAttribute('datetime'));
      if (isNaN(at)) continue;
      t.title = t.textContent;
      t.textContent = at.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'});
      t.dataset.local = '';
    }
  }
  localTimes(document);
  new MutationObserver(() => localTimes(document)).observe(document.body,
    {childList: true, subtree: true});
  const events = new EventSource('/events');
  events.addEventListener('changed', refresh);
  events.addEventListener('open', refresh);
})();
"""


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CSP = (
    f"default-src 'none'; script-src {_hash(SCRIPT)}; style-src {_hash(STYLE)}; "
    "connect-src 'self'; img-src data:; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
