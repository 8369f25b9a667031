// The agents list: status badges, pagination by X-Total-Count, and the create form.
import { h, fill, clear, field, input, table, fmtDate, badge } from './dom.js';
import { api, enc } from './api.js';
import { errorSlot, act, pager, showError, pollWithBackoff } from './ui.js';

const LIMIT = 20;

export function agentsPage(main, _params, ctx) {
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
