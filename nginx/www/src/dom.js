// DOM helpers. Every string from the API reaches the page as a Text node or an
// attribute value, never as markup: there is no innerHTML anywhere in the app,
// so a name like <img src=x onerror=alert(1)> shows as those characters.

export function h(tag, attrs, ...children) {
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

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  append(el, children);
  return el;
}

// Replaces el's children (null/false children are skipped, unlike Element.append).
export function fill(el, ...children) {
  clear(el);
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

let uid = 0;
// A labelled form field: the label's for= points at the control's id.
export function field(label, control, hint) {
  control.id = control.id || `f${++uid}`;
  const hintEl = hint ? h('small', { id: `${control.id}-hint`, class: 'hint' }, hint) : null;
  if (hintEl) control.setAttribute('aria-describedby', hintEl.id);
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), control, hintEl);
}

export function input(name, attrs) {
  return h('input', { name, type: 'text', autocomplete: 'off', ...attrs });
}

export function button(label, onclick, cls) {
  return h('button', { type: 'button', class: cls || '', onclick }, label);
}

export function table(headers, rows, caption) {
  // Each cell names its column, for the narrow-screen layout (app.css).
  for (const tr of rows) [...tr.children].forEach((td, i) => { td.dataset.label = headers[i] || ''; });
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption || 'table' },
    h('table', {},
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', {}, h('tr', {}, headers.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, rows.length ? rows : h('tr', {}, h('td', { colspan: headers.length, class: 'empty' }, 'Nothing here yet.')))));
}

export function fmtDate(s) {
  if (!s) return '—';
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? String(s) : d.toLocaleString();
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}

export function fmtUsd(n) {
  return `$${Number(n || 0).toFixed(6).replace(/0{1,4}$/, '')}`;
}

export function badge(status) {
  return h('span', { class: `badge badge-${String(status).replace(/[^a-z]/g, '')}` }, String(status));
}
