// One agent: status with live polling, deploy/stop/delete, edit, code upload,
// the invoke console, secrets, schedules, sessions, invocation history and bucket mounts.
import { h, fill, clear, field, input, table, fmtDate, fmtUsd, badge, button } from './dom.js';
import { api, apiStream, enc } from './api.js';
import { errorSlot, act, pager, showError, confirmDialog, pollWithBackoff, notice, go } from './ui.js';
import { mountsSection, attachmentsSection } from './storage.js';
import { deploysSection } from './deploys.js';
import { schedulesSection } from './schedules.js';
import { webhooksSection } from './webhooks.js';

export async function agentPage(main, [slug], ctx) {
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
