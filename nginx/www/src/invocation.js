// One invocation: its record (from the agent's history) and its logs, the end
// of what the agent wrote to stderr with its secrets redacted (issue 29).
// Reached from the history table and from the invoke console's result.
import { h, fill, fmtDate, fmtUsd, badge } from './dom.js';
import { api, enc } from './api.js';
import { errorSlot, showError } from './ui.js';

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

export async function invocationPage(main, [slug, id], ctx) {
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
