// Files (list, search, upload, download, delete, usage), buckets (register,
// credentials, test, delete) and an agent's bucket mounts.
import { h, fill, clear, field, input, table, fmtDate, fmtBytes, button } from './dom.js';
import { api, enc } from './api.js';
import { errorSlot, act, showError, confirmDialog, pager, notice } from './ui.js';
import { sha256File } from './sha256.js';

export function filesPage(main, _p, ctx) {
  const LIMIT = 20;
  const usage = h('p', { id: 'files-usage', class: 'muted' });
  const list = h('div', { id: 'files-list' });
  const search = input('search', { type: 'search' });
  const slot = errorSlot();
  let offset = 0;
  const loadUsage = async () => {
    try {
      const u = (await api('GET', '/files/usage')).data;
      usage.textContent = `${u.total_files} files, ${fmtBytes(u.total_size_bytes)} of ${fmtBytes(u.quota_bytes)} (${Number(u.quota_used_percent).toFixed(1)} %, plan ${u.plan})`;
    } catch (e) { showError(e, usage); }
  };
  const load = async (o) => {
    offset = o;
    try {
      const r = await api('GET', '/files', { query: { limit: LIMIT, offset, search: search.value, scope: scope.value, tags: tagFilter.value } });
      if (!ctx.alive()) return;
      fill(list, table(['Name', 'Size', 'Scope', 'Status', 'Uploaded', ''], r.data.map((f) => {
        const dl = button('Download', () => act(dl, slot, () => download(f)), 'small');
        const del = button('Delete', async () => {
          if (!await confirmDialog(`Delete the file ${f.filename}?`)) return;
          act(del, slot, async () => { await api('DELETE', `/files/${enc(f.file_id)}`); load(offset); loadUsage(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, f.filename, f.description ? h('small', { class: 'muted block' }, f.description) : null,
          f.tags && f.tags.length ? h('small', { class: 'muted block' }, `tags: ${f.tags.join(', ')}`) : null),
          h('td', {}, fmtBytes(f.size_bytes)), h('td', {}, f.scope, f.agent_slug ? ` (${f.agent_slug})` : ''),
          h('td', {}, f.status), h('td', {}, fmtDate(f.created_at)), h('td', {}, h('div', { class: 'row' }, dl, del)));
      }), 'Files'), pager(r.total, offset, LIMIT, load));
    } catch (e) { showError(e, list); }
  };
  const scope = h('select', { name: 'scope' }, [['', 'All'], ['user', 'Yours'], ['agent', "Agents'"], ['session', "Sessions'"]]
    .map(([v, t]) => h('option', { value: v }, t)));
  const tagFilter = input('tags', { placeholder: 'all of: a,b' });
  const searchForm = h('form', { class: 'inline-form', role: 'search', id: 'files-search' }, field('Search names and descriptions', search),
    field('Scope', scope), field('Tags', tagFilter), h('button', { type: 'submit' }, 'Search'));
  searchForm.addEventListener('submit', (e) => { e.preventDefault(); load(0); });
  const file = h('input', { type: 'file', name: 'file', required: true });
  const desc = input('description');
  const tags = input('tags', { placeholder: 'comma,separated' });
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Upload');
  const progress = h('p', { class: 'muted', id: 'upload-progress', 'aria-live': 'polite' });
  const up = h('form', { class: 'card', id: 'upload-file' }, h('h2', {}, 'Upload a file'),
    field('File', file, 'Over 10 MB it goes by a presigned upload: sent straight to storage, then checked by its SHA-256.'),
    field('Description', desc), field('Tags', tags), progress, slot, btn);
  up.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const f = file.files[0];
      if (f.size > DIRECT_LIMIT) {
        await presignedUpload(f, desc.value, tags.value, progress);
      } else {
        const fd = new FormData();
        fd.append('file', f);
        if (desc.value) fd.append('description', desc.value);
        if (tags.value) fd.append('tags', tags.value);
        progress.textContent = `Uploading ${f.name}…`;
        await api('POST', '/files', { body: fd });
      }
      progress.textContent = '';
      up.reset();
      notice(`Uploaded ${f.name}.`, 'info');
      load(0);
      loadUsage();
    });
  });
  main.append(h('h1', {}, 'Files'), usage, searchForm, list, up);
  loadUsage();
  load(0);
}

const DIRECT_LIMIT = 10 * 1024 * 1024;

// POST /files takes 10 MB; larger files: reserve, PUT the bytes to the signed
// URL (no bearer key), confirm with their SHA-256 (computed meanwhile).
async function presignedUpload(f, description, tags, progress) {
  const body = { filename: f.name, size_bytes: f.size, content_type: f.type || 'application/octet-stream' };
  if (description) body.description = description;
  if (tags) body.tags = tags;
  const p = (await api('POST', '/files/presigned-upload', { json: body })).data;
  if (new URL(p.upload_url, location.href).origin !== location.origin) {
    await api('DELETE', `/files/${enc(p.file_id)}`).catch(() => {});
    throw new Error('This server keeps files in a bucket at another address, which the dashboard may not contact: upload files over 10 MB with the command-line client (agenthost files upload).');
  }
  progress.textContent = `Uploading ${f.name} (${fmtBytes(f.size)})…`;
  const put = fetch(p.upload_url, { method: 'PUT', body: f, headers: { 'Content-Type': body.content_type } });
  const [res, hash] = await Promise.all([put.catch(() => null), sha256File(f)]);
  if (!res) throw new Error('Network error: the upload did not reach the server.');
  if (!res.ok) {
    const text = await res.text();
    let detail = `HTTP ${res.status}`;
    try {
      const d = JSON.parse(text).detail;
      if (typeof d === 'string') detail = d;
    } catch { /* not JSON: keep the status */ }
    throw new Error(`Upload failed: ${detail}`);
  }
  progress.textContent = `Checking ${f.name}…`;
  await api('POST', `/files/${enc(p.file_id)}/confirm`, { json: { sha256_hash: hash } });
}

// The download needs the bearer key, so it goes through fetch and a blob URL.
async function download(f) {
  const res = await api('GET', `/files/${enc(f.file_id)}/download`, { raw: true });
  const url = URL.createObjectURL(await res.blob());
  const a = h('a', { href: url, download: f.filename, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function bucketsPage(main, _p, ctx) {
  const list = h('div', { id: 'buckets-list' });
  const slot = errorSlot();
  const load = async (offset) => {
    try {
      const r = await api('GET', '/buckets', { query: { limit: 20, offset } });
      if (!ctx.alive()) return;
      fill(list, table(['Name', 'Provider', 'Bucket', 'Credentials', ''], r.data.map((b) => bucketRow(b, slot, () => load(offset))), 'Buckets'),
        pager(r.total, offset, 20, load));
    } catch (e) { showError(e, list); }
  };
  main.append(h('h1', {}, 'Buckets'), list, slot, bucketForm(() => load(0)));
  load(0);
}

function bucketRow(b, slot, reload) {
  const result = h('span', { class: 'test-result', 'aria-live': 'polite' });
  const test = button('Test', () => act(test, slot, async () => {
    const r = (await api('POST', `/buckets/${enc(b.slug)}/test`)).data;
    result.textContent = `${r.ok ? 'OK' : 'Failed'}: ${r.message}`;
    result.className = r.ok ? 'test-result ok' : 'test-result error';
  }), 'small');
  const creds = button('Set credentials', () => credentialsDialog(b, reload), 'small');
  const del = button('Delete', async () => {
    if (!await confirmDialog(`Delete the bucket ${b.name}? Its mounts stop working.`)) return;
    act(del, slot, async () => { await api('DELETE', `/buckets/${enc(b.slug)}`); reload(); });
  }, 'danger small');
  return h('tr', {}, h('td', {}, b.name, h('small', { class: 'muted block' }, b.slug)), h('td', {}, b.provider),
    h('td', {}, b.bucket_name, b.region ? ` (${b.region})` : '', b.endpoint_url ? h('small', { class: 'muted block' }, b.endpoint_url) : null),
    h('td', {}, b.has_credentials ? 'set' : 'none'), h('td', {}, h('div', { class: 'row' }, test, creds, del), result));
}

function bucketForm(reload) {
  const name = input('name', { required: true });
  const provider = h('select', { name: 'provider' }, ['s3', 'gcs', 'r2'].map((p) => h('option', { value: p }, p)));
  const bucket = input('bucket_name', { required: true });
  const region = input('region');
  const endpoint = input('endpoint_url', { type: 'url', placeholder: 'required for r2' });
  const slot = errorSlot();
  const btn = h('button', { type: 'submit', class: 'primary' }, 'Add bucket');
  const form = h('form', { class: 'card', id: 'create-bucket' }, h('h2', {}, 'Add a bucket'), field('Name', name), field('Provider', provider),
    field('Bucket name', bucket), field('Region', region), field('Endpoint URL', endpoint), slot, btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { name: name.value, provider: provider.value, bucket_name: bucket.value };
      if (region.value) body.region = region.value;
      if (endpoint.value) body.endpoint_url = endpoint.value;
      await api('POST', '/buckets', { json: body });
      form.reset();
      reload();
    });
  });
  return form;
}

function credentialsDialog(b, reload) {
  const fields = b.provider === 'gcs'
    ? { service_account_json: h('textarea', { rows: 6, required: true }) }
    : { access_key_id: input('access_key_id', { required: true }), secret_access_key: h('input', { type: 'password', required: true, autocomplete: 'new-password' }) };
  const labels = { service_account_json: 'Service account JSON key', access_key_id: 'Access key id', secret_access_key: 'Secret access key' };
  const slot = errorSlot();
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  const cancel = h('button', { type: 'button' }, 'Cancel');
  const form = h('form', { method: 'dialog' }, h('h2', {}, `Credentials for ${b.name}`),
    Object.entries(fields).map(([k, el]) => field(labels[k], el)), h('p', { class: 'muted' }, 'Stored encrypted; never shown again.'),
    slot, h('div', { class: 'row' }, cancel, save));
  const dlg = h('dialog', { class: 'confirm' }, form);
  cancel.addEventListener('click', () => { dlg.close(); dlg.remove(); });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(save, slot, async () => {
      const body = Object.fromEntries(Object.entries(fields).map(([k, el]) => [k, el.value]));
      await api('POST', `/buckets/${enc(b.slug)}/credentials`, { json: body });
      dlg.close();
      dlg.remove();
      reload();
    });
  });
  document.body.append(dlg);
  dlg.showModal();
}

// The agent page's mounts: a bucket (by slug) at a path in the sandbox.
export function mountsSection(page) {
  const list = h('div', {});
  const slot = errorSlot();
  const bucket = h('select', { name: 'bucket_slug', required: true });
  const path = input('mount_path', { required: true, placeholder: '/data' });
  const prefix = input('source_prefix');
  const ro = h('input', { type: 'checkbox', name: 'read_only', checked: true });
  const btn = h('button', { type: 'submit' }, 'Add mount');
  const load = async () => {
    try {
      const [m, b] = await Promise.all([api('GET', `${page.path}/mounts`, { query: { limit: 100 } }), api('GET', '/buckets', { query: { limit: 100 } })]);
      fill(bucket, b.data.map((x) => h('option', { value: x.slug }, `${x.name} (${x.provider})`)));
      btn.disabled = !b.data.length;
      fill(list, table(['Bucket', 'Path', 'Prefix', 'Access', ''], m.data.map((x) => {
        const del = button('Remove', async () => {
          if (!await confirmDialog(`Remove the mount at ${x.mount_path}?`, 'Remove')) return;
          act(del, slot, async () => { await api('DELETE', `${page.path}/mounts/${enc(x.id)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, x.bucket_slug), h('td', {}, h('code', {}, x.mount_path)), h('td', {}, x.source_prefix || '—'),
          h('td', {}, x.read_only ? 'read-only' : 'read-write', x.enabled ? '' : ', disabled'), h('td', {}, del));
      }), 'Mounts'), b.data.length ? null : h('p', { class: 'muted' }, h('a', { href: '#/buckets' }, 'Add a bucket'), ' to mount one.'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form' }, field('Bucket', bucket), field('Mount path', path), field('Prefix in the bucket', prefix),
    h('div', { class: 'field check' }, ro, h('label', { for: (ro.id = 'mount-ro') }, 'Read-only')), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { bucket_slug: bucket.value, mount_path: path.value, read_only: ro.checked };
      if (prefix.value) body.source_prefix = prefix.value;
      await api('POST', `${page.path}/mounts`, { json: body });
      path.value = '';
      load();
      const a = (await api('GET', page.path)).data;
      page.refresh(a);
    });
  });
  load();
  return h('section', { class: 'card', id: 'mounts', 'aria-labelledby': 'mounts-h' }, h('h2', { id: 'mounts-h' }, 'Bucket mounts'),
    h('p', { class: 'muted' }, 'Changes apply at the next deploy.'), list, form, slot);
}

// The agent page's attached files: a file of the user's at /files/agent/… in
// the agent's sandboxes.
export function attachmentsSection(page) {
  const list = h('div', {});
  const slot = errorSlot();
  const file = h('select', { name: 'file_id', required: true });
  const path = input('mount_path', { placeholder: '/files/agent/<file name>' });
  const ro = h('input', { type: 'checkbox', name: 'read_only', checked: true, id: 'attach-ro' });
  const btn = h('button', { type: 'submit' }, 'Attach');
  const load = async () => {
    try {
      const [a, f] = await Promise.all([api('GET', `${page.path}/files`, { query: { limit: 100 } }),
        api('GET', '/files', { query: { limit: 100, scope: 'user' } })]);
      const attached = new Set(a.data.map((x) => x.file_id));
      const free = f.data.filter((x) => !attached.has(x.file_id) && x.status === 'confirmed');
      fill(file, free.map((x) => h('option', { value: x.file_id }, `${x.filename} (${fmtBytes(x.size_bytes)})`)));
      btn.disabled = !free.length;
      fill(list, table(['File', 'Path in the sandbox', 'Access', ''], a.data.map((x) => {
        const del = button('Detach', async () => {
          if (!await confirmDialog(`Detach ${x.filename} from this agent? The file itself stays.`, 'Detach')) return;
          act(del, slot, async () => { await api('DELETE', `${page.path}/files/${enc(x.file_id)}`); load(); });
        }, 'danger small');
        return h('tr', {}, h('td', {}, x.filename), h('td', {}, h('code', {}, x.mount_path)),
          h('td', {}, x.read_only ? 'read-only' : 'read-write'), h('td', {}, del));
      }), 'Attached files'), free.length || a.data.length ? null : h('p', { class: 'muted' }, h('a', { href: '#/files' }, 'Upload a file'), ' to attach one.'));
    } catch (e) { showError(e, list); }
  };
  const form = h('form', { class: 'inline-form', id: 'attach-form' }, field('File', file), field('Path (optional)', path),
    h('div', { class: 'field check' }, ro, h('label', { for: ro.id }, 'Read-only')), btn);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    act(btn, slot, async () => {
      const body = { file_id: file.value, read_only: ro.checked };
      if (path.value) body.mount_path = path.value;
      await api('POST', `${page.path}/files`, { json: body });
      path.value = '';
      load();
      page.refresh((await api('GET', page.path)).data);
    });
  });
  load();
  return h('section', { class: 'card', id: 'attachments', 'aria-labelledby': 'attachments-h' }, h('h2', { id: 'attachments-h' }, 'Attached files'),
    h('p', { class: 'muted' }, 'Files of yours the agent reads under /files/agent/.'), list, form, slot);
}
