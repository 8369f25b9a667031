// agenthost dashboard, built by scripts/build-dashboard from nginx/www/src/ (edit those).
// ---- dom.js
// DOM helpers. Every string from the API reaches the page as a Text node or an
// attribute value, never as markup: there is no innerHTML anywhere in the app,
// so a name like <img src=x onerror=alert(1)> shows as those characters.

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function svg(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

// Replaces el's children (null/false children are skipped, unlike Element.append).
function fill(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

let uid = 0;
// A labelled form field: the label's for= points at the control's id.
function field(label, control, hint) {
  control.id = control.id || `f${++uid}`;
  const hintEl = hint ? h('small', { id: `${control.id}-hint`, class: 'hint' }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintEl);
}

function input(name, attrs) {
  return h('input', { name, type: 'text', autocomplete: 'off', ...attrs });
}

function button(label, onclick, cls) {
  return h('button', { type: 'button', class: cls || '', onclick }, label);
}

function table(headers, rows, caption) {
  // Each cell names its column, for the narrow-screen layout (app.css).
  for (const tr of rows) [...tr.children].forEach((td, i) => { td.dataset.label = headers[i] || ''; });
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption || 'table' },
    h('table', {},
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'empty' }, 'Nothing here yet.')))));
}

function fmtDate(s) {
  if (!s) return '—';
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? String(s) : d.toLocaleString();
}

function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}

function fmtUsd(n) {
  return `$${Number(n || 0).toFixed(6).replace(/0{1,4}$/, '')}`;
}

function badge(status) {
  return h('span', { class: `badge badge-${String(status).replace(/[^a-z]/g, '')}` }, String(status));
}

// ---- api.js
// The REST client: the same /api/v1 every other client uses, with the API key
// from sessionStorage (never in a URL). Errors come back as ApiError with the
// contract's detail, so pages show them as they are.

const BASE = '/api/v1';
const KEY = 'agenthost.key';

function getKey() { return sessionStorage.getItem(KEY); }
function setKey(k) { sessionStorage.setItem(KEY, k); }
function dropKey() { sessionStorage.removeItem(KEY); }

class ApiError extends Error {
  constructor(status, message, body, retryAfter) {
    super(message);
    this.status = status;
    this.body = body;
    this.retryAfter = retryAfter;
  }
}

// A 422's detail is a list of {loc, msg}: one readable line per field.
function detailText(body, status) {
  const d = body && body.detail;
  if (Array.isArray(d)) return d.map((e) => `${(e.loc || []).slice(1).join('.') || 'body'}: ${e.msg}`).join('; ');
  if (typeof d === 'string') return d;
  return `Request failed (HTTP ${status})`;
}

let onUnauthorized = () => {};
function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

async function api(method, path, opts = {}) {
  const headers = { Accept: 'application/json', ...(opts.headers || {}) };
  const key = opts.key || getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  let body = opts.body;
  if (opts.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.json);
  }
  let url = BASE + path;
  if (opts.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(opts.query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
    const s = q.toString();
    if (s) url += (url.includes('?') ? '&' : '?') + s;
  }
  let res;
  try {
    res = await fetch(url, { method, headers, body, cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'Network error: the server cannot be reached. Check your connection and try again.');
  }
  if (opts.raw && res.ok) return res;
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    const retry = res.headers.get('Retry-After');
    let msg = detailText(data, res.status);
    if (res.status === 429) msg = `Too many requests. Try again in ${retry || 'a few'} seconds.`;
    const err = new ApiError(res.status, msg, data, retry ? Number(retry) : null);
    if (res.status === 401 && !opts.noRedirect) onUnauthorized(err);
    throw err;
  }
  const total = res.headers.get('X-Total-Count');
  return { status: res.status, data, total: total === null ? null : Number(total) };
}

const enc = encodeURIComponent;

// A streamed call (issue 28): POST with "stream": true, then each server-sent
// event to onEvent(name, data) as it comes; an error before the stream (422,
// 409, 429...) throws ApiError like api().
async function apiStream(path, json, onEvent, opts = {}) {
  const res = await api('POST', path, { json: { ...json, stream: true }, raw: true, signal: opts.signal,
                                       headers: { Accept: 'text/event-stream' } });
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, at);
      buf = buf.slice(at + 2);
      let name = '';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      if (name) onEvent(name, data ? JSON.parse(data) : null);
    }
  }
}

// ---- ui.js
// Shared page parts: the message area, errors, a pager, a confirmation dialog,
// and back-off polling that stops when the user leaves the page.

function notice(msg, kind) {
  const box = document.getElementById('notice');
  clear(box);
  box.className = '';
  if (!msg) return;
  box.className = `notice notice-${kind || 'info'}`;
  box.append(h('span', {}, msg), h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss message', onclick: () => notice('') }, '×'));
}

// Navigates to hash; a message given here survives the navigation (which
// otherwise clears the message area).
let keepNotice = false;
function go(hash, msg, kind) {
  if (msg) { notice(msg, kind); keepNotice = true; }
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

function noticeSurvivesNavigation() {
  const keep = keepNotice;
  keepNotice = false;
  return keep;
}

// Shows an error where the user acted (an inline element) or in the message area.
function showError(err, where) {
  if (err && err.name === 'AbortError') return;
  const msg = err && err.message ? err.message : String(err);
  if (where) {
    clear(where);
    where.append(h('p', { class: 'error', role: 'alert' }, msg));
  } else {
    notice(msg, 'error');
  }
}

function errorSlot() { return h('div', { class: 'error-slot', 'aria-live': 'polite' }); }

// Runs an async action with the button disabled meanwhile and errors shown in slot.
async function act(btn, slot, fn) {
  if (btn) btn.disabled = true;
  if (slot) clear(slot);
  try {
    return await fn();
  } catch (e) {
    showError(e, slot);
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}

function pager(total, offset, limit, go) {
  if (total === null || total <= limit) return h('p', { class: 'muted' }, total === null ? '' : `${total} in all`);
  const last = Math.max(0, Math.floor((total - 1) / limit) * limit);
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    h('button', { type: 'button', disabled: offset <= 0, onclick: () => go(Math.max(0, offset - limit)) }, '‹ Previous'),
    h('span', {}, `${offset + 1}–${Math.min(total, offset + limit)} of ${total}`),
    h('button', { type: 'button', disabled: offset >= last, onclick: () => go(offset + limit) }, 'Next ›'));
}

// A modal confirmation (native <dialog>: focus stays inside, Esc cancels).
function confirmDialog(text, okLabel) {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'button', class: 'danger' }, okLabel || 'Delete');
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const dlg = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-text' },
      h('p', { id: 'confirm-text' }, text), h('div', { class: 'row' }, cancel, ok));
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    ok.addEventListener('click', () => done(true));
    cancel.addEventListener('click', () => done(false));
    dlg.addEventListener('cancel', (e) => { e.preventDefault(); done(false); });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

// Polls fn until it returns true, waiting 0.5 s, then 1.5× longer each time up
// to 5 s, while alive() holds (the user is still on the page).
async function pollWithBackoff(fn, alive) {
  let wait = 500;
  while (alive()) {
    let done = false;
    try {
      done = await fn();
    } catch (e) {
      showError(e);
      // Gone, or no longer ours to see: asking again will not change that.
      if (e.status >= 400 && e.status < 500 && e.status !== 429) return;
    }
    if (done || !alive()) return;
    await new Promise((r) => setTimeout(r, wait));
    wait = Math.min(5000, Math.round(wait * 1.5));
  }
}

function copyButton(getText) {
  const b = h('button', { type: 'button' }, 'Copy');
  b.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(getText());
      b.textContent = 'Copied';
    } catch {
      b.textContent = 'Select and copy by hand';
    }
    setTimeout(() => { b.textContent = 'Copy'; }, 2000);
  });
  return b;
}

// ---- agents.js
// The agents list: status badges, pagination by X-Total-Count, and the create form.

const LIMIT = 20;

function agentsPage(main, _params, ctx) {
  const list = h('div', { id: 'agents-list', 'aria-busy': 'true' });
  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Agents')), list, createForm());
  const state = { offset: 0 };
  const load = () => loadAgents(list, state, ctx, (o) => { state.offset = o; load(); });
  // While a deploy runs, the list follows it (back-off polling, see ui.js).
  load().then((deploying) => {
    if (deploying) pollWithBackoff(async () => !(await load()), ctx.alive);
  });
}

// Draws one page of the list; true when one of its agents is deploying.
async function loadAgents(list, state, ctx, go) {
  try {
    const r = await api('GET', '/agents', { query: { limit: LIMIT, offset: state.offset } });
    if (!ctx.alive()) return false;
    const rows = r.data.map((a) => h('tr', {},
      h('td', {}, h('a', { href: `#/agents/${enc(a.slug)}`, class: 'agent-name' }, a.name)),
      h('td', {}, h('code', {}, a.slug)),
      h('td', {}, badge(a.status), a.needs_redeploy ? h('span', { class: 'muted' }, ' needs redeploy') : null),
      h('td', {}, a.source_type),
      h('td', {}, fmtDate(a.updated_at))));
    fill(list, table(['Name', 'Slug', 'Status', 'Source', 'Updated'], rows, 'Your agents'),
      pager(r.total, state.offset, LIMIT, go));
    list.setAttribute('aria-busy', 'false');
    // For scripts/bench-dashboard: the list is on screen and its links work.
    if (!performance.getEntriesByName('agents-ready').length) performance.mark('agents-ready');
    document.body.dataset.ready = 'agents';
    return r.data.some((a) => a.status === 'deploying');
  } catch (e) {
    showError(e, list);
    return false;
  }
}

function createForm() {
  const name = input('name', { required: true, maxlength: 200 });
  const source = h('select', { name: 'source_type' },
    h('option', { value: 'local' }, 'Local (upload a tarball)'), h('option', { value: 'git' }, 'Git repository'));
  const url = input('git_repo_url', { type: 'url', placeholder: 'https://…' });
  const branch = input('git_branch', { placeholder: 'default branch' });
  const gitFields = h('div', { class: 'git-fields', hidden: true }, field('Git repository URL', url), field('Branch or tag', branch));
  source.addEventListener('change', () => { gitFields.hidden = source.value !== 'git'; url.required = source.value === 'git'; });
  const desc = h('textarea', { name: 'description', rows: 2 });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Create agent');
  const form = h('form', { class: 'card', id: 'create-agent' },
    h('h2', {}, 'New agent'), field('Name', name), field('Source', source), gitFields,
    field('Description', desc), slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { name: name.value, source_type: source.value };
      if (desc.value) body.description = desc.value;
      if (source.value === 'git') {
        body.git_repo_url = url.value;
        if (branch.value) body.git_branch = branch.value;
      }
      const r = await api('POST', '/agents', { json: body });
      location.hash = `#/agents/${enc(r.data.slug)}`;
    });
  });
  return form;
}

// ---- sha256.js
// SHA-256 of a File, read in slices: the presigned upload's confirm needs the
// hash, and crypto.subtle exists only in secure contexts (a dashboard opened
// as http://HOST/ on a LAN is not one) and wants the whole file in memory.

const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// Compresses every whole 64-byte block of bytes[0..len) into state.
function blocks(state, w, bytes, len) {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, len);
  for (let off = 0; off + 64 <= len; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = dv.getInt32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15], b = w[i - 2];
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
    }
    let a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
    for (let i = 0; i < 64; i++) {
      const t1 = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7)))
        + ((e & f) ^ (~e & g)) + K256[i] + w[i]) | 0;
      const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10)))
        + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      h = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
    }
    state[0] += a; state[1] += b; state[2] += c; state[3] += d;
    state[4] += e; state[5] += f; state[6] += g; state[7] += h;
  }
}

async function sha256File(file, onProgress) {
  // The browser's own, where it has one and the file fits in memory comfortably.
  if (globalThis.crypto && crypto.subtle && file.size <= (256 << 20)) {
    const d = await crypto.subtle.digest('SHA-256', await file.arrayBuffer());
    return [...new Uint8Array(d)].map((x) => x.toString(16).padStart(2, '0')).join('');
  }
  return sha256Slices(file, onProgress);
}

async function sha256Slices(file, onProgress) {
  const state = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Int32Array(64);
  const SLICE = 4 << 20;
  let carry = new Uint8Array(0);
  for (let pos = 0; pos < file.size; pos += SLICE) {
    const chunk = new Uint8Array(await file.slice(pos, pos + SLICE).arrayBuffer());
    const buf = new Uint8Array(carry.length + chunk.length);
    buf.set(carry);
    buf.set(chunk, carry.length);
    const whole = buf.length - (buf.length % 64);
    blocks(state, w, buf, whole);
    carry = buf.slice(whole);
    if (onProgress) onProgress(Math.min(file.size, pos + SLICE) / file.size);
  }
  // Padding: 0x80, zeros, then the length in bits as a 64-bit big-endian number.
  const padLen = carry.length < 56 ? 64 : 128;
  const last = new Uint8Array(padLen);
  last.set(carry);
  last[carry.length] = 0x80;
  const dv = new DataView(last.buffer);
  dv.setUint32(padLen - 8, Math.floor(file.size / 0x20000000));
  dv.setUint32(padLen - 4, (file.size * 8) >>> 0);
  blocks(state, w, last, padLen);
  return [...state].map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
}

// ---- storage.js
// Files (list, search, upload, download, delete, usage), buckets (register,
// credentials, test, delete) and an agent's bucket mounts.

function filesPage(main, _p, ctx) {
  const LIMIT = 20;
  const usage = h('p', { id: 'files-usage', class: 'muted' });
  const list = h('div', { id: 'files-list' });
  const search = input('search', { type: 'search' });
  const slot = errorSlot();
  let offset = 0;
  const loadUsage = async () => {
    try {
      const u = (await api('GET', '/files/usage')).data;
      usage.textContent = `${u.total_files} files, ${fmtBytes(u.total_size_bytes)} of ${fmtBytes(u.quota_bytes)} (${Number(u.quota_used_percent).toFixed(1)} %, plan ${u.plan})`;
    } catch (e) { showError(e, usage); }
  };
  const load = async (o) => {
    offset = o;
    try {
      const r = await api('GET', '/files', { query: { limit: LIMIT, offset, search: search.value, scope: scope.value, tags: tagFilter.value } });
      if (!ctx.alive()) return;
      fill(list, table(['Name', 'Size', 'Scope', 'Status', 'Uploaded', ''], r.data.map((f) => {
        const dl = button('Download', () => act(dl, slot, () => download(f)), 'small');
        const del = button('Delete', async () => {
          if (!await confirmDialog(`Delete the file ${f.filename}?`)) return;
          act(del, slot, async () => { await api('DELETE', `/files/${enc(f.file_id)}`); load(offset); loadUsage(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, f.filename, f.description ? h('small', { class: 'muted block' }, f.description) : null,
          f.tags && f.tags.length ? h('small', { class: 'muted block' }, `tags: ${f.tags.join(', ')}`) : null),
          h('td', {}, fmtBytes(f.size_bytes)), h('td', {}, f.scope, f.agent_slug ? ` (${f.agent_slug})` : ''),
          h('td', {}, f.status), h('td', {}, fmtDate(f.created_at)), h('td', {}, h('div', { class: 'row' }, dl, del)));
      }), 'Files'), pager(r.total, offset, LIMIT, load));
    } catch (e) { showError(e, list); }
  };
  const scope = h('select', { name: 'scope' }, [['', 'All'], ['user', 'Yours'], ['agent', "Agents'"], ['session', "Sessions'"]]
    .map(([v, t]) => h('option', { value: v }, t)));
  const tagFilter = input('tags', { placeholder: 'all of: a,b' });
  const searchForm = h('form', { class: 'inline-form', role: 'search', id: 'files-search' }, field('Search names and descriptions', search),
    field('Scope', scope), field('Tags', tagFilter), h('button', { type: 'submit' }, 'Search'));
  searchForm.addEventListener('submit', (e) => { e.preventDefault(); load(0); });
  const file = h('input', { type: 'file', name: 'file', required: true });
  const desc = input('description');
  const tags = input('tags', { placeholder: 'comma,separated' });
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Upload');
  const progress = h('p', { class: 'muted', id: 'upload-progress', 'aria-live': 'polite' });
  const up = h('form', { class: 'card', id: 'upload-file' }, h('h2', {}, 'Upload a file'),
    field('File', file, 'Over 10 MB it goes by a presigned upload: sent straight to storage, then checked by its SHA-256.'),
    field('Description', desc), field('Tags', tags), progress, slot, btn);
  up.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const f = file.files[0];
      if (f.size > DIRECT_LIMIT) {
        await presignedUpload(f, desc.value, tags.value, progress);
      } else {
        const fd = new FormData();
        fd.append('file', f);
        if (desc.value) fd.append('description', desc.value);
        if (tags.value) fd.append('tags', tags.value);
        progress.textContent = `Uploading ${f.name}…`;
        await api('POST', '/files', { body: fd });
      }
      progress.textContent = '';
      up.reset();
      notice(`Uploaded ${f.name}.`, 'info');
      load(0);
      loadUsage();
    });
  });
  main.append(h('h1', {}, 'Files'), usage, searchForm, list, up);
  loadUsage();
  load(0);
}

const DIRECT_LIMIT = 10 * 1024 * 1024;

// POST /files takes 10 MB; larger files: reserve, PUT the bytes to the signed
// URL (no bearer key), confirm with their SHA-256 (computed meanwhile).
async function presignedUpload(f, description, tags, progress) {
  const body = { filename: f.name, size_bytes: f.size, content_type: f.type || 'application/octet-stream' };
  if (description) body.description = description;
  if (tags) body.tags = tags;
  const p = (await api('POST', '/files/presigned-upload', { json: body })).data;
  if (new URL(p.upload_url, location.href).origin !== location.origin) {
    await api('DELETE', `/files/${enc(p.file_id)}`).catch(() => {});
    throw new Error('This server keeps files in a bucket at another address, which the dashboard may not contact: upload files over 10 MB with the command-line client (agenthost files upload).');
  }
  progress.textContent = `Uploading ${f.name} (${fmtBytes(f.size)})…`;
  const put = fetch(p.upload_url, { method: 'PUT', body: f, headers: { 'Content-Type': body.content_type } });
  const [res, hash] = await Promise.all([put.catch(() => null), sha256File(f)]);
  if (!res) throw new Error('Network error: the upload did not reach the server.');
  if (!res.ok) {
    const text = await res.text();
    let detail = `HTTP ${res.status}`;
    try {
      const d = JSON.parse(text).detail;
      if (typeof d === 'string') detail = d;
    } catch { /* not JSON: keep the status */ }
    throw new Error(`Upload failed: ${detail}`);
  }
  progress.textContent = `Checking ${f.name}…`;
  await api('POST', `/files/${enc(p.file_id)}/confirm`, { json: { sha256_hash: hash } });
}

// The download needs the bearer key, so it goes through fetch and a blob URL.
async function download(f) {
  const res = await api('GET', `/files/${enc(f.file_id)}/download`, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: f.filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

function bucketsPage(main, _p, ctx) {
  const list = h('div', { id: 'buckets-list' });
  const slot = errorSlot();
  const load = async (offset) => {
    try {
      const r = await api('GET', '/buckets', { query: { limit: 20, offset } });
      if (!ctx.alive()) return;
      fill(list, table(['Name', 'Provider', 'Bucket', 'Credentials', ''], r.data.map((b) => bucketRow(b, slot, () => load(offset))), 'Buckets'),
        pager(r.total, offset, 20, load));
    } catch (e) { showError(e, list); }
  };
  main.append(h('h1', {}, 'Buckets'), list, slot, bucketForm(() => load(0)));
  load(0);
}

function bucketRow(b, slot, reload) {
  const result = h('span', { class: 'test-result', 'aria-live': 'polite' });
  const test = button('Test', () => act(test, slot, async () => {
    const r = (await api('POST', `/buckets/${enc(b.slug)}/test`)).data;
    result.textContent = `${r.ok ? 'OK' : 'Failed'}: ${r.message}`;
    result.className = r.ok ? 'test-result ok' : 'test-result error';
  }), 'small');
  const creds = button('Set credentials', () => credentialsDialog(b, reload), 'small');
  const del = button('Delete', async () => {
    if (!await confirmDialog(`Delete the bucket ${b.name}? Its mounts stop working.`)) return;
    act(del, slot, async () => { await api('DELETE', `/buckets/${enc(b.slug)}`); reload(); });
  }, 'danger small');
  return h('tr', {}, h('td', {}, b.name, h('small', { class: 'muted block' }, b.slug)), h('td', {}, b.provider),
    h('td', {}, b.bucket_name, b.region ? ` (${b.region})` : '', b.endpoint_url ? h('small', { class: 'muted block' }, b.endpoint_url) : null),
    h('td', {}, b.has_credentials ? 'set' : 'none'), h('td', {}, h('div', { class: 'row' }, test, creds, del), result));
}

function bucketForm(reload) {
  const name = input('name', { required: true });
  const provider = h('select', { name: 'provider' }, ['s3', 'gcs', 'r2'].map((p) => h('option', { value: p }, p)));
  const bucket = input('bucket_name', { required: true });
  const region = input('region');
  const endpoint = input('endpoint_url', { type: 'url', placeholder: 'required for r2' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Add bucket');
  const form = h('form', { class: 'card', id: 'create-bucket' }, h('h2', {}, 'Add a bucket'), field('Name', name), field('Provider', provider),
    field('Bucket name', bucket), field('Region', region), field('Endpoint URL', endpoint), slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { name: name.value, provider: provider.value, bucket_name: bucket.value };
      if (region.value) body.region = region.value;
      if (endpoint.value) body.endpoint_url = endpoint.value;
      await api('POST', '/buckets', { json: body });
      form.reset();
      reload();
    });
  });
  return form;
}

function credentialsDialog(b, reload) {
  const fields = b.provider === 'gcs'
    ? { service_account_json: h('textarea', { rows: 6, required: true }) }
    : { access_key_id: input('access_key_id', { required: true }), secret_access_key: h('input', { type: 'password', required: true, autocomplete: 'new-password' }) };
  const labels = { service_account_json: 'Service account JSON key', access_key_id: 'Access key id', secret_access_key: 'Secret access key' };
  const slot = errorSlot();
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const form = h('form', { method: 'dialog' }, h('h2', {}, `Credentials for ${b.name}`),
    Object.entries(fields).map(([k, el]) => field(labels[k], el)), h('p', { class: 'muted' }, 'Stored encrypted; never shown again.'),
    slot, h('div', { class: 'row' }, cancel, save));
  const dlg = h('dialog', { class: 'confirm' }, form);
  cancel.addEventListener('click', () => { dlg.close(); dlg.remove(); });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(save, slot, async () => {
      const body = Object.fromEntries(Object.entries(fields).map(([k, el]) => [k, el.value]));
      await api('POST', `/buckets/${enc(b.slug)}/credentials`, { json: body });
      dlg.close();
      dlg.remove();
      reload();
    });
  });
  document.body.append(dlg);
  dlg.showModal();
}

// The agent page's mounts: a bucket (by slug) at a path in the sandbox.
function mountsSection(page) {
  const list = h('div', {});
  const slot = errorSlot();
  const bucket = h('select', { name: 'bucket_slug', required: true });
  const path = input('mount_path', { required: true, placeholder: '/data' });
  const prefix = input('source_prefix');
  const ro = h('input', { type: 'checkbox', name: 'read_only', checked: true });
  const btn = h('button', { type: 'submit' }, 'Add mount');
  const load = async () => {
    try {
      const [m, b] = await Promise.all([api('GET', `${page.path}/mounts`, { query: { limit: 100 } }), api('GET', '/buckets', { query: { limit: 100 } })]);
      fill(bucket, b.data.map((x) => h('option', { value: x.slug }, `${x.name} (${x.provider})`)));
      btn.disabled = !b.data.length;
      fill(list, table(['Bucket', 'Path', 'Prefix', 'Access', ''], m.data.map((x) => {
        const del = button('Remove', async () => {
          if (!await confirmDialog(`Remove the mount at ${x.mount_path}?`, 'Remove')) return;
          act(del, slot, async () => { await api('DELETE', `${page.path}/mounts/${enc(x.id)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, x.bucket_slug), h('td', {}, h('code', {}, x.mount_path)), h('td', {}, x.source_prefix || '—'),
          h('td', {}, x.read_only ? 'read-only' : 'read-write', x.enabled ? '' : ', disabled'), h('td', {}, del));
      }), 'Mounts'), b.data.length ? null : h('p', { class: 'muted' }, h('a', { href: '#/buckets' }, 'Add a bucket'), ' to mount one.'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form' }, field('Bucket', bucket), field('Mount path', path), field('Prefix in the bucket', prefix),
    h('div', { class: 'field check' }, ro, h('label', { for: (ro.id = 'mount-ro') }, 'Read-only')), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { bucket_slug: bucket.value, mount_path: path.value, read_only: ro.checked };
      if (prefix.value) body.source_prefix = prefix.value;
      await api('POST', `${page.path}/mounts`, { json: body });
      path.value = '';
      load();
      const a = (await api('GET', page.path)).data;
      page.refresh(a);
    });
  });
  load();
  return h('section', { class: 'card', id: 'mounts', 'aria-labelledby': 'mounts-h' }, h('h2', { id: 'mounts-h' }, 'Bucket mounts'),
    h('p', { class: 'muted' }, 'Changes apply at the next deploy.'), list, form, slot);
}

// The agent page's attached files: a file of the user's at /files/agent/… in
// the agent's sandboxes.
function attachmentsSection(page) {
  const list = h('div', {});
  const slot = errorSlot();
  const file = h('select', { name: 'file_id', required: true });
  const path = input('mount_path', { placeholder: '/files/agent/<file name>' });
  const ro = h('input', { type: 'checkbox', name: 'read_only', checked: true, id: 'attach-ro' });
  const btn = h('button', { type: 'submit' }, 'Attach');
  const load = async () => {
    try {
      const [a, f] = await Promise.all([api('GET', `${page.path}/files`, { query: { limit: 100 } }),
        api('GET', '/files', { query: { limit: 100, scope: 'user' } })]);
      const attached = new Set(a.data.map((x) => x.file_id));
      const free = f.data.filter((x) => !attached.has(x.file_id) && x.status === 'confirmed');
      fill(file, free.map((x) => h('option', { value: x.file_id }, `${x.filename} (${fmtBytes(x.size_bytes)})`)));
      btn.disabled = !free.length;
      fill(list, table(['File', 'Path in the sandbox', 'Access', ''], a.data.map((x) => {
        const del = button('Detach', async () => {
          if (!await confirmDialog(`Detach ${x.filename} from this agent? The file itself stays.`, 'Detach')) return;
          act(del, slot, async () => { await api('DELETE', `${page.path}/files/${enc(x.file_id)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, x.filename), h('td', {}, h('code', {}, x.mount_path)),
          h('td', {}, x.read_only ? 'read-only' : 'read-write'), h('td', {}, del));
      }), 'Attached files'), free.length || a.data.length ? null : h('p', { class: 'muted' }, h('a', { href: '#/files' }, 'Upload a file'), ' to attach one.'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form', id: 'attach-form' }, field('File', file), field('Path (optional)', path),
    h('div', { class: 'field check' }, ro, h('label', { for: ro.id }, 'Read-only')), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { file_id: file.value, read_only: ro.checked };
      if (path.value) body.mount_path = path.value;
      await api('POST', `${page.path}/files`, { json: body });
      path.value = '';
      load();
      page.refresh((await api('GET', page.path)).data);
    });
  });
  load();
  return h('section', { class: 'card', id: 'attachments', 'aria-labelledby': 'attachments-h' }, h('h2', { id: 'attachments-h' }, 'Attached files'),
    h('p', { class: 'muted' }, 'Files of yours the agent reads under /files/agent/.'), list, form, slot);
}

// ---- deploys.js
// An agent's deploy history: each deploy's source, status and image, its
// build output (followed while it runs), and a rollback to a kept image.

function source(d) {
  const s = d.source || {};
  if (s.type === 'git') return `${s.git_branch || 'default branch'} ${s.git_commit ? s.git_commit.slice(0, 12) : ''}`.trim();
  return s.code_sha256 ? `upload ${s.code_sha256.slice(0, 12)}` : 'upload';
}

function deploysSection(page) {
  const LIMIT = 10;
  const box = h('div', {});
  const slot = errorSlot();
  const logHead = h('h3', { id: 'deploy-log-h' });
  const log = h('pre', { class: 'response', id: 'deploy-log', 'aria-labelledby': 'deploy-log-h', hidden: true });
  let shownId = null;
  // The log of one deploy, read again each second while it runs.
  const showLog = async (d) => {
    shownId = d.id;
    logHead.textContent = `Build output of ${d.id}`;
    log.hidden = false;
    for (;;) {
      let r;
      try {
        r = (await api('GET', `${page.path}/deploys/${enc(d.id)}/logs`)).data;
      } catch (e) { showError(e, slot); return; }
      if (!page.ctx.alive() || shownId !== d.id) return;
      log.textContent = (r.truncated ? '[… earlier output dropped: only the last 256 KiB are kept]\n' : '') + (r.log || '(no output yet)');
      if (r.done) return;
      await new Promise((res) => setTimeout(res, 1000));
    }
  };
  const load = async (offset) => {
    try {
      const r = await api('GET', `${page.path}/deploys`, { query: { limit: LIMIT, offset } });
      if (!page.ctx.alive()) return;
      const rows = r.data.map((d) => {
        const view = button('Log', () => showLog(d), 'small');
        const back = button('Roll back', async () => {
          if (!await confirmDialog(`Switch ${page.agent.name} back to the image of ${d.id}? Warm processes and sessions of the current image end.`, 'Roll back')) return;
          act(back, slot, async () => {
            await api('POST', `${page.path}/rollback`, { json: { deploy_id: d.id } });
            page.refresh((await api('GET', page.path)).data);
            notice(`Rolled back to ${d.id}.`, 'info');
            load(0);
          });
        }, 'small');
        const can = d.status === 'succeeded' && d.image_kept && !d.active;
        return h('tr', {}, h('td', {}, fmtDate(d.created_at)), h('td', {}, badge(d.status), d.active ? ' active' : ''),
          h('td', {}, source(d)), h('td', {}, h('code', {}, d.image_sha256 ? d.image_sha256.slice(0, 12) : '—')),
          h('td', {}, d.duration_ms === null ? '—' : `${(d.duration_ms / 1000).toFixed(1)} s`),
          h('td', { class: 'clip' }, d.error || ''), h('td', {}, view, can ? back : null));
      });
      fill(box, table(['When', 'Status', 'Source', 'Image', 'Duration', 'Error', ''], rows, 'Deploys'),
        pager(r.total, offset, LIMIT, load));
    } catch (e) { showError(e, box); }
  };
  page.afterDeploy = page.afterDeploy || [];
  page.afterDeploy.push(() => load(0));
  load(0);
  return h('section', { class: 'card', id: 'deploys', 'aria-labelledby': 'deploys-h' },
    h('div', { class: 'page-head' }, h('h2', { id: 'deploys-h' }, 'Deploys'), button('Refresh', () => load(0), 'small')),
    box, slot, logHead, log);
}

// ---- schedules.js
// An agent's schedules (issue 32): runs at the times of a cron expression in a
// time zone. The list with pause/resume and delete, and a form that creates
// one and shows its next five run times.

function localZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch (e) { return 'UTC'; }
}

function lastRun(s) {
  if (!s.last_status) return 'never';
  const text = `${s.last_status} ${fmtDate(s.last_run_at)}`;
  return s.last_error ? h('span', { title: s.last_error }, text) : text;
}

function schedulesSection(page) {
  const list = h('div', {});
  const slot = errorSlot();
  const next = h('div', { 'aria-live': 'polite' });
  const cron = input('cron', { required: true, placeholder: '0 9 * * 1-5', autocomplete: 'off' });
  const zone = input('timezone', { required: true, value: localZone(), autocomplete: 'off' });
  const prompt = h('textarea', { name: 'prompt', required: true, rows: 2 });
  const btn = h('button', { type: 'submit' }, 'Create schedule');
  const base = `${page.path}/schedules`;
  const load = async () => {
    try {
      const r = await api('GET', base, { query: { limit: 100 } });
      fill(list, table(['Cron', 'Time zone', 'Prompt', 'Next run', 'Last run', ''], r.data.map((s) => {
        const toggle = button(s.paused ? 'Resume' : 'Pause', () => act(toggle, slot, async () => {
          await api('PATCH', `${base}/${enc(s.id)}`, { json: { paused: !s.paused } });
          load();
        }), 'small');
        const del = button('Delete', async () => {
          if (!await confirmDialog(`Delete the schedule “${s.cron}”?`)) return;
          act(del, slot, async () => { await api('DELETE', `${base}/${enc(s.id)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, h('code', {}, s.cron)), h('td', {}, s.timezone),
          h('td', {}, s.prompt.length > 60 ? s.prompt.slice(0, 60) + '…' : s.prompt),
          h('td', {}, s.paused ? badge('paused') : fmtDate(s.next_run_at)), h('td', {}, lastRun(s)),
          h('td', {}, toggle, ' ', del));
      }), 'Schedules'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form', id: 'schedule-form' },
    field('Cron', cron, 'minute hour day month weekday'), field('Time zone', zone), field('Input for each run', prompt, 'The prompt each scheduled run sends.'), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const s = (await api('POST', base, { json: { cron: cron.value, timezone: zone.value, prompt: prompt.value } })).data;
      fill(next, h('p', { class: 'muted' }, 'Next runs: ', s.next_runs.map(fmtDate).join(', ')));
      cron.value = '';
      prompt.value = '';
      load();
    });
  });
  load();
  return h('section', { class: 'card', id: 'schedules', 'aria-labelledby': 'schedules-h' },
    h('h2', { id: 'schedules-h' }, 'Schedules'),
    h('p', { class: 'muted' }, 'Runs of the agent at the times of a cron expression; each is an ordinary invocation in the history.'),
    list, form, next, slot);
}

// ---- webhooks.js
// An agent's webhook deliveries: each finished call sent to a webhook_url,
// its status, attempts and the receiver's last answer.

function webhooksSection(page) {
  const LIMIT = 10;
  const box = h('div', {});
  const slot = errorSlot();
  const load = async (offset) => {
    try {
      const r = await api('GET', `${page.path}/webhook-deliveries`, { query: { limit: LIMIT, offset } });
      if (!page.ctx.alive()) return;
      const rows = r.data.map((d) => h('tr', {}, h('td', {}, fmtDate(d.created_at)), h('td', {}, badge(d.status)),
        h('td', {}, h('code', {}, d.invocation_id)), h('td', {}, String(d.attempt_count)),
        h('td', {}, d.last_status_code === null ? '—' : String(d.last_status_code)),
        h('td', {}, d.next_attempt_at ? fmtDate(d.next_attempt_at) : '—'),
        h('td', { class: 'clip' }, d.last_error || '')));
      fill(box, r.data.length ? table(['When', 'Status', 'Invocation', 'Attempts', 'Last code', 'Next try', 'Error'], rows, 'Webhook deliveries')
        : h('p', {}, 'No deliveries yet: set a webhook URL below, or pass webhook_url to a call.'),
        pager(r.total, offset, LIMIT, load));
    } catch (e) { showError(e, box); }
  };
  load(0);
  return h('section', { class: 'card', id: 'webhooks', 'aria-labelledby': 'webhooks-h' },
    h('div', { class: 'page-head' }, h('h2', { id: 'webhooks-h' }, 'Webhook deliveries'), button('Refresh', () => load(0), 'small')),
    box, slot);
}

// ---- agent.js
// One agent: status with live polling, deploy/stop/delete, edit, code upload,
// the invoke console, secrets, schedules, sessions, invocation history and bucket mounts.

async function agentPage(main, [slug], ctx) {
  const path = `/agents/${enc(slug)}`;
  let agent;
  try {
    agent = (await api('GET', path)).data;
  } catch (e) {
    main.append(h('h1', {}, 'Agent'));
    showError(e, main.appendChild(errorSlot()));
    return;
  }
  if (!ctx.alive()) return;
  const status = h('section', { class: 'card', id: 'status', 'aria-labelledby': 'status-h', 'aria-live': 'polite' });
  const title = h('h1', {}, agent.name);
  const page = { slug, path, ctx, agent, status, title, refresh: null, afterInvoke: [] };
  page.refresh = (a) => {
    // Polls bring the same record most of the time: redrawing it would only
    // take the keyboard focus away from the buttons.
    if (JSON.stringify(a) === JSON.stringify(page.agent) && status.firstChild) return;
    page.agent = a;
    title.textContent = a.name;
    const focused = status.contains(document.activeElement) ? document.activeElement.textContent : null;
    renderStatus(page);
    const again = focused && [...status.querySelectorAll('button')].find((b) => b.textContent === focused && !b.disabled);
    if (again) again.focus();
  };
  main.append(h('p', { class: 'crumbs' }, h('a', { href: '#/agents' }, '← Agents')), title, status,
    h('div', { class: 'grid' }, codeSection(page), invokeSection(page)),
    secretsSection(page), schedulesSection(page), deploysSection(page), historySection(page, 'invocations'), historySection(page, 'sessions'),
    webhooksSection(page), attachmentsSection(page), mountsSection(page), editSection(page));
  renderStatus(page);
  if (agent.status === 'deploying') watch(page);
}

function renderStatus(page) {
  const a = page.agent;
  const slot = errorSlot();
  const deploy = button(a.status === 'active' ? 'Redeploy' : 'Deploy', () => act(deploy, slot, async () => {
    page.refresh((await api('POST', `${page.path}/deploy`)).data);
    (page.afterDeploy || []).forEach((fn) => fn());
    watch(page);
  }), 'primary');
  deploy.disabled = a.status === 'deploying';
  const stop = button('Stop', () => act(stop, slot, async () => {
    page.refresh((await api('DELETE', `${page.path}/sandbox`)).data);
  }));
  stop.disabled = a.status !== 'active';
  const del = button('Delete agent', async () => {
    if (!await confirmDialog(`Delete the agent “${a.name}” with its sandbox, sessions, secrets, mounts and history? This cannot be undone.`)) return;
    act(del, slot, async () => {
      await api('DELETE', page.path);
      go('#/agents', `Deleted ${a.name}.`, 'info');
    });
  }, 'danger');
  fill(page.status,
    h('h2', { id: 'status-h' }, 'Status'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, badge(a.status), a.needs_redeploy ? ' (changes need a redeploy)' : ''),
      h('dt', {}, 'Slug'), h('dd', {}, h('code', {}, a.slug)),
      h('dt', {}, 'Source'), h('dd', {}, a.source_type === 'git' ? `git ${a.git_repo_url || ''} ${a.git_branch || ''}` : 'local upload'),
      h('dt', {}, 'Deployed'), h('dd', {}, fmtDate(a.deployed_at)),
      h('dt', {}, 'Sandbox'), h('dd', {}, a.sandbox_id || '—')),
    a.status_message ? h('pre', { class: a.status === 'error' ? 'status-message error' : 'status-message', id: 'status-message' }, a.status_message) : null,
    h('div', { class: 'row' }, deploy, stop, del), slot);
}

// Follows a deploy until it leaves `deploying`, with back-off polling.
function watch(page) {
  pollWithBackoff(async () => {
    const a = (await api('GET', page.path)).data;
    if (!page.ctx.alive()) return true;
    page.refresh(a);
    if (a.status !== 'deploying') (page.afterDeploy || []).forEach((fn) => fn());
    return a.status !== 'deploying';
  }, page.ctx.alive);
}

function codeSection(page) {
  const slot = errorSlot();
  const result = h('p', { class: 'muted', id: 'upload-result', 'aria-live': 'polite' });
  const picker = h('input', { type: 'file', id: 'code-file', accept: '.tar.gz,.tgz,application/gzip' });
  const upload = async (file) => {
    if (!file) return;
    result.textContent = `Uploading ${file.name}…`;
    await act(null, slot, async () => {
      const r = await api('PUT', `${page.path}/code`, { body: file, headers: { 'Content-Type': 'application/gzip' } });
      result.textContent = `Uploaded ${file.name}: ${r.data.size} bytes, sha256 ${r.data.sha256}. Deploy to run it.`;
    });
    if (slot.firstChild) result.textContent = '';
  };
  picker.addEventListener('change', () => upload(picker.files[0]));
  const zone = h('div', { class: 'dropzone', id: 'dropzone' },
    h('p', {}, 'Drop a .tar.gz of the project (agent.json at its root) here, or '),
    h('label', { for: 'code-file', class: 'button' }, 'choose a file'), picker);
  zone.addEventListener('dragover', (e) => { e.preventDefault(); zone.classList.add('over'); });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    upload(e.dataTransfer.files[0]);
  });
  return h('section', { class: 'card', 'aria-labelledby': 'code-h' }, h('h2', { id: 'code-h' }, 'Code'),
    page.agent.source_type === 'local' ? [zone, result, slot]
      : h('p', {}, 'This agent deploys from its git repository; edit its settings below.'));
}

function invokeSection(page) {
  const prompt = h('textarea', { name: 'prompt', rows: 4, required: true });
  const session = input('session_id', { pattern: '[A-Za-z0-9._:\\-]{1,128}', placeholder: 'new session each call' });
  const timeout = input('timeout_seconds', { type: 'number', min: 1, max: 600, placeholder: String(page.agent.timeout_seconds) });
  const out = h('div', { id: 'invoke-result', 'aria-live': 'polite' });
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Invoke');
  // While a call streams: stops it (POST …/cancel); it is recorded cancelled.
  const stop = h('button', { type: 'button', id: 'invoke-cancel', hidden: true }, 'Cancel');
  const form = h('form', { class: 'card', id: 'invoke' }, h('h2', {}, 'Invoke'),
    field('Prompt', prompt), field('Session id (optional)', session, 'Reuse an id to keep the sandbox between calls.'),
    field('Timeout in seconds (optional)', timeout), btn, stop, out);
  let running = null;
  stop.addEventListener('click', () => {
    if (!running) return;
    stop.disabled = true;
    api('POST', `${page.path}/invocations/${enc(running)}/cancel`).catch((err) => showError(err, out));
  });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const body = { prompt: prompt.value };
    if (session.value) body.session_id = session.value;
    if (timeout.value) body.timeout_seconds = Number(timeout.value);
    // The response shows as the agent writes it.
    const live = h('pre', { class: 'response', id: 'invoke-response' }, '');
    fill(out, h('p', { class: 'muted' }, 'Running…'), h('h3', {}, 'Response'), live);
    // act's slot would clear the live response: errors go to out here.
    act(btn, null, async () => {
      try {
        await apiStream(`${page.path}/invoke`, body, (name, data) => {
          if (name === 'start') {
            running = data.invocation_id;
            stop.hidden = false;
            stop.disabled = false;
          } else if (name === 'output') {
            live.textContent += data.text;
          } else if (name === 'done') {
            stop.hidden = true;
            showResult(out, data, null, page);
          } else if (name === 'error') {
            stop.hidden = true;
            if (data.invocation) showResult(out, data.invocation, data.detail, page);
            else fill(out, h('p', { class: 'error', role: 'alert' }, data.detail));
          }
        });
      } catch (err) {
        showError(err, out);
      } finally {
        running = null;
        stop.hidden = true;
      }
      // The call is in the history now (failed ones too), and maybe a new session.
      page.afterInvoke.forEach((fn) => fn());
    });
  });
  return form;
}

function showResult(out, r, error, page) {
  // The response's detail usually quotes the record's error already.
  const msg = [error, r.error].filter((x, i, all) => x && !(i === 1 && all[0] && all[0].includes(x))).join(' — ');
  fill(out,
    msg ? h('p', { class: 'error', role: 'alert' }, msg) : null,
    r.files_error ? h('p', { class: 'error', role: 'alert', id: 'invoke-files-error' }, `Files: ${r.files_error}`) : null,
    h('h3', {}, 'Response'), h('pre', { class: 'response', id: 'invoke-response' }, r.response_content || ''),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, badge(r.status)),
      h('dt', {}, 'Tokens'), h('dd', {}, `${r.input_tokens} in, ${r.output_tokens} out`),
      // Behind the model gateway the cost is priced from the provider's tokens.
      r.model_input_tokens != null ? h('dt', {}, 'Model tokens') : null,
      r.model_input_tokens != null ? h('dd', { id: 'invoke-model-tokens' }, `${r.model_input_tokens} in, ${r.model_output_tokens} out`) : null,
      h('dt', {}, 'Cost'), h('dd', {}, fmtUsd(r.total_cost_usd)),
      h('dt', {}, 'Duration'), h('dd', {}, `${r.duration_ms} ms`),
      h('dt', {}, 'Session'), h('dd', {}, h('code', {}, r.session_id || '—'))),
    r.invocation_id ? h('p', {}, h('a', { id: 'invoke-details', href: invocationHref(page, r.invocation_id) }, 'Details and logs')) : null);
}

// The invocation's own view (invocation.js): its record and its stderr.
function invocationHref(page, id) {
  return `#/agents/${enc(page.slug)}/invocations/${enc(id)}`;
}

function secretsSection(page) {
  const list = h('div', {});
  const key = input('key', { required: true, pattern: '[A-Za-z_][A-Za-z0-9_]{0,127}', autocomplete: 'off' });
  const value = h('input', { name: 'value', type: 'password', required: true, autocomplete: 'new-password' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit' }, 'Save secret');
  const load = async () => {
    try {
      const r = await api('GET', `${page.path}/secrets`, { query: { limit: 100 } });
      fill(list, table(['Key', 'Updated', ''], r.data.map((s) => {
        const del = button('Delete', async () => {
          if (!await confirmDialog(`Delete the secret ${s.key}?`)) return;
          act(del, slot, async () => { await api('DELETE', `${page.path}/secrets/${enc(s.key)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, h('code', {}, s.key)), h('td', {}, fmtDate(s.updated_at)), h('td', {}, del));
      }), 'Secrets'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form', id: 'secret-form' }, field('Name', key), field('Value', value, 'Stored encrypted; never shown again.'), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      await api('POST', `${page.path}/secrets`, { json: { key: key.value, value: value.value } });
      value.value = '';
      key.value = '';
      load();
    });
  });
  load();
  return h('section', { class: 'card', id: 'secrets', 'aria-labelledby': 'secrets-h' },
    h('h2', { id: 'secrets-h' }, 'Secrets'), h('p', { class: 'muted' }, 'Environment variables of the agent. Values are never shown.'),
    list, form, slot);
}

// Invocation history or sessions, newest first, paged by X-Total-Count.
function historySection(page, kind) {
  const LIMIT = 10;
  const box = h('div', {});
  const load = async (offset) => {
    try {
      const r = await api('GET', `${page.path}/${kind}`, { query: { limit: LIMIT, offset } });
      if (!page.ctx.alive()) return;
      const rows = kind === 'invocations'
        ? r.data.map((i) => h('tr', {}, h('td', {}, h('a', { href: invocationHref(page, i.invocation_id), class: 'inv-link' }, fmtDate(i.created_at))), h('td', {}, badge(i.status), i.trigger === 'schedule' ? h('small', { class: 'muted', title: i.schedule_id }, ' scheduled') : null),
          clip(i.prompt), clip(i.error || i.response_content),
          h('td', {}, `${i.input_tokens}/${i.output_tokens}` + (i.model_input_tokens != null ? ` (model ${i.model_input_tokens}/${i.model_output_tokens})` : '')), h('td', {}, fmtUsd(i.total_cost_usd)), h('td', {}, `${i.duration_ms} ms`)))
        : r.data.map((s) => {
          const del = button('End', async () => {
            if (!await confirmDialog(`End the session ${s.id} and destroy its sandbox?`, 'End session')) return;
            act(del, box, async () => { await api('DELETE', `${page.path}/sessions/${enc(s.id)}`); load(offset); });
          }, 'danger small');
          return h('tr', {}, h('td', {}, h('code', {}, s.id)), h('td', {}, String(s.invocation_count)),
            h('td', {}, fmtDate(s.last_invoked_at)), h('td', {}, del));
        });
      const head = kind === 'invocations' ? ['When', 'Status', 'Prompt', 'Response or error', 'Tokens in/out', 'Cost', 'Duration']
        : ['Session', 'Invocations', 'Last used', ''];
      fill(box, table(head, rows, kind), pager(r.total, offset, LIMIT, load));
    } catch (e) { showError(e, box); }
  };
  const reload = button('Refresh', () => load(0), 'small');
  page.afterInvoke.push(() => load(0));
  load(0);
  return h('section', { class: 'card', id: kind, 'aria-labelledby': `${kind}-h` },
    h('div', { class: 'page-head' }, h('h2', { id: `${kind}-h` }, kind === 'invocations' ? 'Invocation history' : 'Sessions'), reload), box);
}

// A long prompt or answer is cut in the table; the whole text is in its tooltip.
function clip(text) {
  const t = text || '';
  return h('td', { class: 'clip', title: t.length > 160 ? t.slice(0, 2000) : null }, t.length > 160 ? `${t.slice(0, 160)}…` : t);
}

function editSection(page) {
  const a = page.agent;
  const name = input('name', { value: a.name, required: true });
  const desc = h('textarea', { name: 'description', rows: 2 });
  desc.value = a.description || '';
  const timeout = input('timeout_seconds', { type: 'number', min: 1, max: 600, value: String(a.timeout_seconds) });
  const warm = input('min_warm', { type: 'number', min: 0, max: 50, value: String(a.min_warm || 0) });
  // Egress (issue 32): open, or only an allow-list (one entry a line).
  const net = a.network || { mode: 'open', allow: [] };
  const netMode = h('select', { name: 'network_mode' },
    [['open', 'Open: the internet, no private ranges'], ['allow', 'Only the hosts listed below']]
      .map(([v, t]) => h('option', { value: v }, t)));
  netMode.value = net.mode;
  const netAllow = h('textarea', { name: 'network_allow', rows: 3, placeholder: 'api.example.com:443\n203.0.113.0/24' });
  netAllow.value = (net.allow || []).join('\n');
  const url = input('git_repo_url', { type: 'url', value: a.git_repo_url || '' });
  const branch = input('git_branch', { value: a.git_branch || '' });
  const hook = input('webhook_url', { type: 'url', value: a.webhook_url || '', placeholder: 'https://…' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit' }, 'Save changes');
  const form = h('form', { class: 'card', id: 'edit' }, h('h2', {}, 'Settings'), field('Name', name), field('Description', desc),
    field('Default timeout (seconds)', timeout),
    field('Warm processes', warm, 'Kept started between calls, so a call does not wait for node to start; each holds its memory while it waits. 0: none.'),
    field('Network', netMode, 'Where the agent may connect. The model gateway is always reachable.'),
    field('Allowed hosts', netAllow, 'With "only the hosts listed": one host name, IPv4 address or CIDR a line, each with an optional :port. Names are resolved when a sandbox is made.'),
    field('Webhook URL', hook, 'Each finished call is POSTed there, signed with your webhook secret (API keys page). Empty: none.'),
    a.source_type === 'git' ? [field('Git repository URL', url), field('Branch or tag', branch)] : null, slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { name: name.value, description: desc.value, timeout_seconds: Number(timeout.value) };
      if (a.source_type === 'git') { body.git_repo_url = url.value; body.git_branch = branch.value || null; }
      // Only a change: setting min_warm retires the warm processes there are.
      if (Number(warm.value) !== (a.min_warm || 0)) body.min_warm = Number(warm.value);
      // Only a change, too: new rules replace the agent's sandboxes.
      const allow = netAllow.value.split('\n').map((s) => s.trim()).filter((s) => s);
      const network = netMode.value === 'open' ? { mode: 'open', allow: [] } : { mode: 'allow', allow };
      if (JSON.stringify(network) !== JSON.stringify({ mode: net.mode, allow: net.allow || [] })) body.network = network;
      if (hook.value !== (a.webhook_url || '')) body.webhook_url = hook.value || null;
      const r = await api('PATCH', page.path, { json: body });
      page.refresh(r.data);
      notice('Saved.', 'info');
    });
  });
  return form;
}

// ---- invocation.js
// One invocation: its record (from the agent's history) and its logs, the end
// of what the agent wrote to stderr with its secrets redacted (issue 29).
// Reached from the history table and from the invoke console's result.

const SCAN_PAGES = 5; // the record is looked up among the latest 500 invocations

async function findRecord(path, id, ctx) {
  for (let p = 0; p < SCAN_PAGES && ctx.alive(); p++) {
    const r = await api('GET', `${path}/invocations`, { query: { limit: 100, offset: p * 100 } });
    const hit = r.data.find((i) => i.invocation_id === id);
    if (hit || r.data.length < 100) return hit || null;
  }
  return null;
}

function recordView(r) {
  if (!r) return h('p', { class: 'muted' }, 'This invocation is older than the latest 500: its record is in the history.');
  return [
    r.error ? h('p', { class: 'error', id: 'invocation-error' }, r.error) : null,
    h('dl', { class: 'facts' },
      h('dt', {}, 'Status'), h('dd', {}, badge(r.status)),
      h('dt', {}, 'When'), h('dd', {}, fmtDate(r.created_at)),
      h('dt', {}, 'Tokens'), h('dd', {}, `${r.input_tokens} in, ${r.output_tokens} out`),
      // Behind the model gateway: the provider's counts, which price the call.
      r.model_input_tokens != null ? [h('dt', {}, 'Model tokens'),
        h('dd', { id: 'invocation-model-tokens' }, `${r.model_input_tokens} in, ${r.model_output_tokens} out`)] : null,
      h('dt', {}, 'Cost'), h('dd', {}, fmtUsd(r.total_cost_usd)),
      h('dt', {}, 'Duration'), h('dd', {}, `${r.duration_ms} ms`),
      r.timing ? [h('dt', {}, 'Time'), h('dd', { id: 'invocation-timing' }, timingText(r.timing))] : null,
      h('dt', {}, 'Session'), h('dd', {}, h('code', {}, r.session_id || '—'))),
    h('h3', {}, 'Prompt'), h('pre', { id: 'invocation-prompt' }, r.prompt || ''),
    h('h3', {}, 'Response'), h('pre', { id: 'invocation-response' }, r.response_content || ''),
  ];
}

// Where the call's time went (issue 31), as its Server-Timing header said.
const PHASES = ['queue', 'take', 'start', 'run', 'collect', 'record'];
function timingText(t) {
  return PHASES.filter((p) => typeof t[`${p}_ms`] === 'number')
    .map((p) => `${p} ${t[`${p}_ms`].toFixed(2)}`).join(' · ') + ' ms';
}

function logsView(l) {
  return [
    l.truncated ? h('p', { class: 'muted', id: 'logs-truncated' }, 'It wrote more: these are the last 64 KiB.') : null,
    l.logs ? h('pre', { id: 'invocation-logs', class: 'logs' }, l.logs)
      : h('p', { class: 'muted', id: 'invocation-logs-empty' }, 'It wrote nothing to stderr.'),
  ];
}

async function invocationPage(main, [slug, id], ctx) {
  const path = `/agents/${enc(slug)}`;
  const slot = errorSlot();
  const record = h('section', { class: 'card', id: 'invocation', 'aria-labelledby': 'invocation-h' },
    h('h2', { id: 'invocation-h' }, 'Result'), h('p', { class: 'muted' }, 'Loading…'));
  const logs = h('section', { class: 'card', id: 'logs', 'aria-labelledby': 'logs-h' },
    h('h2', { id: 'logs-h' }, 'Logs (stderr)'),
    h('p', { class: 'muted' }, 'The end of what the agent wrote to stderr; the values of its secrets are shown as [redacted].'),
    h('div', { id: 'logs-body' }, h('p', { class: 'muted' }, 'Loading…')));
  main.append(h('p', { class: 'crumbs' }, h('a', { href: `#/agents/${enc(slug)}` }, `← ${slug}`)),
    h('h1', {}, 'Invocation ', h('code', {}, id)), slot, record, logs);
  try {
    // The logs answer 404 for an invocation that is not this agent's.
    const l = (await api('GET', `${path}/invocations/${enc(id)}/logs`)).data;
    if (!ctx.alive()) return;
    fill(logs.querySelector('#logs-body'), logsView(l));
    const r = await findRecord(path, id, ctx);
    if (ctx.alive()) fill(record, h('h2', { id: 'invocation-h' }, 'Result'), recordView(r));
  } catch (e) {
    record.remove();
    logs.remove();
    showError(e, slot);
  }
}

// ---- account.js
// Usage (a daily chart drawn as SVG, with totals) and API keys (create: the key
// shown once with a copy button; revoke).

const METRICS = {
  invocations: { label: 'Invocations', of: (d) => d.invocations, fmt: String },
  tokens: { label: 'Tokens', of: (d) => d.input_tokens + d.output_tokens, fmt: String },
  cost: { label: 'Cost', of: (d) => Number(d.total_cost_usd), fmt: fmtUsd },
};

function usagePage(main, _p, ctx) {
  const box = h('div', {});
  const view = { days: 30, metric: 'invocations', data: null };
  const group = (label, values, key, text) => h('div', { class: 'row', role: 'group', 'aria-label': label },
    values.map((v) => h('button', { type: 'button', 'data-value': String(v), 'aria-pressed': String(view[key] === v),
      onclick: () => { view[key] = v; show(key === 'days'); } }, text(v))));
  const days = group('Period', [7, 30, 90], 'days', (d) => `${d} days`);
  const metric = group('Measure', Object.keys(METRICS), 'metric', (m) => METRICS[m].label);
  const show = async (reload) => {
    for (const [g, key] of [[days, 'days'], [metric, 'metric']]) {
      g.querySelectorAll('button').forEach((b) => b.setAttribute('aria-pressed', String(b.dataset.value === String(view[key]))));
    }
    try {
      if (reload || !view.data) {
        const q = { query: { days: view.days } };
        const [tot, daily] = await Promise.all([api('GET', '/usage', q), api('GET', '/usage/daily', q)]);
        view.data = { totals: tot.data, items: daily.data.items };
      }
      if (!ctx.alive()) return;
      const { totals: t, items } = view.data;
      fill(box,
        h('dl', { class: 'totals', id: 'usage-totals' },
          h('div', {}, h('dt', {}, 'Invocations'), h('dd', {}, String(t.total_invocations))),
          h('div', {}, h('dt', {}, 'Input tokens'), h('dd', {}, String(t.input_tokens))),
          h('div', {}, h('dt', {}, 'Output tokens'), h('dd', {}, String(t.output_tokens))),
          t.model_invocations ? h('div', {}, h('dt', {}, 'Model tokens'), h('dd', { id: 'usage-model-tokens' }, `${t.model_input_tokens} in, ${t.model_output_tokens} out`)) : null,
          h('div', {}, h('dt', {}, 'Cost'), h('dd', {}, fmtUsd(t.total_cost_usd)))),
        budgets(t.budgets || []),
        chart(items, view.days, METRICS[view.metric]),
        h('details', {}, h('summary', {}, 'The same data as a table'),
          table(['Date', 'Invocations', 'Input tokens', 'Output tokens', 'Model tokens (in/out)', 'Cost'],
            items.slice().reverse().map((d) => h('tr', {}, h('td', {}, d.date), h('td', {}, String(d.invocations)),
              h('td', {}, String(d.input_tokens)), h('td', {}, String(d.output_tokens)),
              h('td', {}, d.model_invocations ? `${d.model_input_tokens}/${d.model_output_tokens}` : '—'),
              h('td', {}, fmtUsd(d.total_cost_usd)))), 'Daily usage')));
    } catch (e) { showError(e, box); }
  };
  main.append(h('h1', {}, 'Usage'), h('div', { class: 'row spread' }, days, metric), box);
  show(true);
}

// Each spend limit (the user's, its agents', its keys') with what its UTC day
// or month has spent and has left; set with the CLI or the API.
const SCOPES = { user: 'You', agent: 'Agent', key: 'API key' };
function budgets(list) {
  if (!list.length) return null;
  return h('section', { id: 'usage-budgets' }, h('h2', {}, 'Spend limits'),
    table(['Of', 'Name', 'Period', 'Limit', 'Spent', 'Remaining', 'Resets'],
      list.map((b) => h('tr', { 'data-budget': `${b.scope}:${b.scope_id}:${b.period}` },
        h('td', {}, SCOPES[b.scope] || b.scope), h('td', {}, b.name), h('td', {}, b.period === 'day' ? 'Day' : 'Month'),
        h('td', {}, fmtUsd(b.limit_usd)), h('td', {}, fmtUsd(b.spent_usd)),
        h('td', {}, fmtUsd(b.remaining_usd)),
        h('td', {}, fmtDate(b.resets_at)))), 'Spend limits'));
}

// Bars of one measure per day. Readable without colour: every bar has its
// value in a <title>, the axis carries numbers and dates, bars of days with
// use have a dark outline besides the fill, and a table follows.
function chart(items, days, m) {
  const W = 720, H = 220, L = 84, B = 30, T = 10;
  const vals = items.map(m.of);
  const max = Math.max(...vals) || 1;
  const bw = (W - L - 10) / Math.max(1, items.length);
  const y = (v) => H - B - ((H - B - T) * v) / max;
  const bars = items.map((d, i) => svg('rect', {
    x: (L + i * bw + bw * 0.15).toFixed(1), y: y(vals[i]).toFixed(1), width: Math.max(1, bw * 0.7).toFixed(1),
    height: (H - B - y(vals[i])).toFixed(1), class: vals[i] ? 'bar' : 'bar zero',
  }, svg('title', {}, `${d.date}: ${d.invocations} invocations, ${d.input_tokens + d.output_tokens} tokens, ${fmtUsd(d.total_cost_usd)}`)));
  const steps = m.fmt === String && max < 2 ? [0, max] : [0, max / 2, max];
  const ticks = steps.map((v) => [
    svg('line', { x1: L - 4, x2: W - 10, y1: y(v), y2: y(v), class: 'grid' }),
    svg('text', { x: L - 8, y: y(v) + 4, 'text-anchor': 'end' }, m.fmt(m.fmt === String ? Math.round(v) : v))]);
  const step = Math.ceil(items.length / 6);
  const labels = items.map((d, i) => (i % step === 0 || i === items.length - 1)
    ? svg('text', { x: L + i * bw + bw / 2, y: H - 10, 'text-anchor': 'middle' }, d.date.slice(5)) : null).filter(Boolean);
  const total = vals.reduce((s, v) => s + v, 0);
  return h('figure', { class: 'chart' },
    svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'chart-title', id: 'usage-chart' },
      svg('title', { id: 'chart-title' }, `${m.label} per day over the last ${days} days: ${m.fmt(total)} in all, at most ${m.fmt(Math.max(...vals))} on one day`),
      ticks, bars, labels),
    h('figcaption', {}, `${m.label} per day, last ${days} days. Each bar's tooltip gives its day; the table below lists them all.`));
}

function keysPage(main, _p, ctx) {
  const list = h('div', { id: 'keys-list' });
  const shown = h('div', { id: 'new-key', 'aria-live': 'polite' });
  const name = input('name', { placeholder: 'Default', maxlength: 100 });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Create key');
  const load = async (offset) => {
    try {
      const r = await api('GET', '/api-keys', { query: { limit: 20, offset } });
      if (!ctx.alive()) return;
      fill(list, table(['Name', 'Prefix', 'Created', 'Last used', ''], r.data.map((k) => {
        const del = button('Revoke', async () => {
          if (!await confirmDialog(`Revoke the key “${k.name}” (${k.prefix}…)? Programs using it stop working at once.`, 'Revoke')) return;
          act(del, slot, async () => { await api('DELETE', `/api-keys/${enc(k.id)}`); load(0); });
        }, 'danger small');
        return h('tr', { 'data-key-id': k.id }, h('td', {}, k.name), h('td', {}, h('code', {}, k.prefix)), h('td', {}, fmtDate(k.created_at)),
          h('td', {}, fmtDate(k.last_used_at)), h('td', {}, del));
      }), 'API keys'), pager(r.total, offset, 20, load));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'card', id: 'create-key' }, h('h2', {}, 'New key'), field('Name', name), slot, btn, shown);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = name.value ? { name: name.value } : {};
      const r = await api('POST', '/api-keys', { json: body });
      const out = h('input', { type: 'text', readonly: true, value: r.data.key, id: 'new-key-value', class: 'mono' });
      fill(shown, h('p', { role: 'status' }, 'Your new key. Copy it now: it is not shown again.'),
        field('New API key', out), copyButton(() => r.data.key));
      name.value = '';
      load(0);
    });
  });
  main.append(h('h1', {}, 'API keys'), list, form, webhookSecretForm());
  load(0);
}

// The webhook signing secret: made or replaced here, shown once.
function webhookSecretForm() {
  const shown = h('div', { id: 'new-webhook-secret', 'aria-live': 'polite' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit' }, 'New webhook secret');
  const form = h('form', { class: 'card', id: 'webhook-secret' }, h('h2', {}, 'Webhook signing secret'),
    h('p', {}, 'Webhooks are signed with it (Agenthost-Signature). A new one replaces the one before at once.'), slot, btn, shown);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!await confirmDialog('Make a new webhook secret? The current one stops being used at once.', 'Replace')) return;
    act(btn, slot, async () => {
      const r = await api('POST', '/users/me/webhook-secret');
      const out = h('input', { type: 'text', readonly: true, value: r.data.secret, id: 'new-webhook-secret-value', class: 'mono' });
      fill(shown, h('p', { role: 'status' }, 'Your new webhook secret. Copy it now: it is not shown again.'),
        field('Webhook secret', out), copyButton(() => r.data.secret));
    });
  });
  return form;
}

// ---- app.js
// The dashboard's shell: a hash router (#/agents, #/agents/<slug>, …), the
// navigation, and sign-in/sign-out. Pages render into <main> and get a ctx whose
// alive() turns false when the user navigates away (it stops their polling).

const routes = [
  [/^agents$/, agentsPage, 'Agents'],
  [/^agents\/([^/]+)$/, agentPage, 'Agent'],
  [/^agents\/([^/]+)\/invocations\/([^/]+)$/, invocationPage, 'Invocation'],
  [/^files$/, filesPage, 'Files'],
  [/^buckets$/, bucketsPage, 'Buckets'],
  [/^usage$/, usagePage, 'Usage'],
  [/^keys$/, keysPage, 'API keys'],
];

let generation = 0;

function signinPage(main) {
  const key = input('key', { type: 'password', autocomplete: 'current-password', required: true, spellcheck: 'false' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title', tabindex: '-1' }, 'Sign in'),
    h('p', {}, 'Paste an API key (ahk_…). It is kept in this browser tab only and forgotten when the tab closes.'),
    field('API key', key, 'scripts/run prints the first user\'s key; scripts/admin key create EMAIL makes more, as does the API keys page once you are in.'), slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const k = key.value.trim();
      const me = await api('GET', '/users/me', { key: k, noRedirect: true });
      setKey(k);
      sessionStorage.setItem('agenthost.email', me.data.email || '');
      // Where the user was headed (a bookmarked #/usage), else the agents.
      const wanted = location.hash && location.hash !== '#/signin' ? location.hash : '#/agents';
      go(wanted);
    });
  });
  main.append(form);
  key.focus();
}

function nav(current) {
  const link = (href, label) => h('a', { href, 'aria-current': current === href ? 'page' : null }, label);
  const email = sessionStorage.getItem('agenthost.email');
  return h('nav', { class: 'topnav', 'aria-label': 'Main' },
    h('a', { href: '#/agents', class: 'brand' }, 'agenthost'),
    h('ul', {},
      h('li', {}, link('#/agents', 'Agents')), h('li', {}, link('#/files', 'Files')),
      h('li', {}, link('#/buckets', 'Buckets')), h('li', {}, link('#/usage', 'Usage')),
      h('li', {}, link('#/keys', 'API keys'))),
    h('span', { class: 'who' }, email || ''),
    h('button', { type: 'button', class: 'link', id: 'signout', onclick: signOut }, 'Sign out'));
}

function signOut() {
  dropKey();
  sessionStorage.removeItem('agenthost.email');
  go('#/signin', 'Signed out.', 'info');
}

function render() {
  const gen = ++generation;
  const path = location.hash.replace(/^#\/?/, '');
  const header = document.getElementById('header');
  const main = clear(document.getElementById('main'));
  clear(header);
  if (!getKey() || path === 'signin') {
    if (getKey()) { location.hash = '#/agents'; return; }
    document.title = 'Sign in · agenthost';
    signinPage(main);
    return;
  }
  for (const [re, page, title] of routes) {
    const m = path.match(re);
    if (!m) continue;
    header.append(nav(`#/${path.split('/')[0]}`));
    document.title = `${title} · agenthost`;
    const ctx = { alive: () => gen === generation };
    page(main, m.slice(1).map(decodeURIComponent), ctx);
    const h1 = main.querySelector('h1');
    if (h1 && document.activeElement === document.body) { h1.setAttribute('tabindex', '-1'); h1.focus(); }
    return;
  }
  location.hash = '#/agents';
}

setUnauthorizedHandler(() => {
  dropKey();
  go('#/signin', 'Your API key was not accepted (revoked or expired). Sign in again.', 'error');
});
window.addEventListener('hashchange', () => {
  if (!noticeSurvivesNavigation()) notice('');
  render();
});
window.addEventListener('offline', () => notice('You are offline: changes cannot be saved until the network is back.', 'error'));
window.addEventListener('online', () => notice('Back online.', 'info'));
render();
