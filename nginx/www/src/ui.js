// Shared page parts: the message area, errors, a pager, a confirmation dialog,
// and back-off polling that stops when the user leaves the page.
import { h, clear } from './dom.js';

export function notice(msg, kind) {
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
export function go(hash, msg, kind) {
  if (msg) { notice(msg, kind); keepNotice = true; }
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'));
  else location.hash = hash;
}

export function noticeSurvivesNavigation() {
  const keep = keepNotice;
  keepNotice = false;
  return keep;
}

// Shows an error where the user acted (an inline element) or in the message area.
export function showError(err, where) {
  if (err && err.name === 'AbortError') return;
  const msg = err && err.message ? err.message : String(err);
  if (where) {
    clear(where);
    where.append(h('p', { class: 'error', role: 'alert' }, msg));
  } else {
    notice(msg, 'error');
  }
}

export function errorSlot() { return h('div', { class: 'error-slot', 'aria-live': 'polite' }); }

// Runs an async action with the button disabled meanwhile and errors shown in slot.
export async function act(btn, slot, fn) {
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

export function pager(total, offset, limit, go) {
  if (total === null || total <= limit) return h('p', { class: 'muted' }, total === null ? '' : `${total} in all`);
  const last = Math.max(0, Math.floor((total - 1) / limit) * limit);
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    h('button', { type: 'button', disabled: offset <= 0, onclick: () => go(Math.max(0, offset - limit)) }, '‹ Previous'),
    h('span', {}, `${offset + 1}–${Math.min(total, offset + limit)} of ${total}`),
    h('button', { type: 'button', disabled: offset >= last, onclick: () => go(offset + limit) }, 'Next ›'));
}

// A modal confirmation (native <dialog>: focus stays inside, Esc cancels).
export function confirmDialog(text, okLabel) {
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
export async function pollWithBackoff(fn, alive) {
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

export function copyButton(getText) {
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
