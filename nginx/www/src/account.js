// Usage (a daily chart drawn as SVG, with totals) and API keys (create: the key
// shown once with a copy button; revoke).
import { h, fill, svg, clear, field, input, table, fmtDate, fmtUsd, button } from './dom.js';
import { api, enc } from './api.js';
import { errorSlot, act, showError, confirmDialog, copyButton, pager } from './ui.js';

const METRICS = {
  invocations: { label: 'Invocations', of: (d) => d.invocations, fmt: String },
  tokens: { label: 'Tokens', of: (d) => d.input_tokens + d.output_tokens, fmt: String },
  cost: { label: 'Cost', of: (d) => Number(d.total_cost_usd), fmt: fmtUsd },
};

export function usagePage(main, _p, ctx) {
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

export function keysPage(main, _p, ctx) {
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
