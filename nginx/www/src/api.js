// The REST client: the same /api/v1 every other client uses, with the API key
// from sessionStorage (never in a URL). Errors come back as ApiError with the
// contract's detail, so pages show them as they are.

const BASE = '/api/v1';
const KEY = 'agenthost.key';

export function getKey() { return sessionStorage.getItem(KEY); }
export function setKey(k) { sessionStorage.setItem(KEY, k); }
export function dropKey() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
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
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export async function api(method, path, opts = {}) {
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

export const enc = encodeURIComponent;

// A streamed call (issue 28): POST with "stream": true, then each server-sent
// event to onEvent(name, data) as it comes; an error before the stream (422,
// 409, 429...) throws ApiError like api().
export async function apiStream(path, json, onEvent, opts = {}) {
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
