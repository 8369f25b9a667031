// An agent's schedules (issue 32): runs at the times of a cron expression in a
// time zone. The list with pause/resume and delete, and a form that creates
// one and shows its next five run times.
import { h, fill, field, input, table, fmtDate, badge, button } from './dom.js';
import { api, enc } from './api.js';
import { errorSlot, act, showError, confirmDialog } from './ui.js';

function localZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'; } catch (e) { return 'UTC'; }
}

function lastRun(s) {
  if (!s.last_status) return 'never';
  const text = `${s.last_status} ${fmtDate(s.last_run_at)}`;
  return s.last_error ? h('span', { title: s.last_error }, text) : text;
}

export function schedulesSection(page) {
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
