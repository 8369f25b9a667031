// An agent's deploy history: each deploy's source, status and image, its
// build output (followed while it runs), and a rollback to a kept image.
import { h, fill, table, fmtDate, badge, button } from './dom.js';
import { api, enc } from './api.js';
import { act, pager, showError, confirmDialog, errorSlot, notice } from './ui.js';

function source(d) {
  const s = d.source || {};
  if (s.type === 'git') return `${s.git_branch || 'default branch'} ${s.git_commit ? s.git_commit.slice(0, 12) : ''}`.trim();
  return s.code_sha256 ? `upload ${s.code_sha256.slice(0, 12)}` : 'upload';
}

export function deploysSection(page) {
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
