// An agent's webhook deliveries: each finished call sent to a webhook_url,
// its status, attempts and the receiver's last answer.
import { h, fill, table, fmtDate, badge, button } from './dom.js';
import { api } from './api.js';
import { pager, showError, errorSlot } from './ui.js';

export function webhooksSection(page) {
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
