// The dashboard in a real headless Chromium against the real stack (nginx,
// API workers, MariaDB, runner): what a user does with it and sees in it.
// Run by scripts/test: node --test tests/browser/*.test.mjs (env as for tests/integration).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { API, ORIGIN, STORAGE_ENDPOINT, launch, newUser, call, watch, signedIn, shot, tarball, ECHO_PROJECT } from './lib.mjs';

let browser;
const bag = { errors: [], dialogs: [] };
const XSS = '<img src=x onerror=alert(1)>';
const T = { timeout: 120000 };

before(async () => { browser = await launch(); });
after(async () => { await browser?.close(); });

test('the page carries the security headers and caches only its hashed assets', async () => {
  const r = await fetch(`${ORIGIN}/`);
  assert.equal(r.status, 200);
  const csp = r.headers.get('content-security-policy') || '';
  for (const d of ["default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"]) assert.ok(csp.includes(d), `CSP lacks ${d}: ${csp}`);
  assert.equal(r.headers.get('x-frame-options'), 'DENY');
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(r.headers.get('cache-control'), 'no-cache');
  const html = await r.text();
  const js = html.match(/src="(\/assets\/app\.[0-9a-f]+\.js)"/);
  assert.ok(js, 'index.html names a hashed script');
  assert.ok(!/<script(?![^>]*\ssrc=)/.test(html), 'no inline script');
  const a = await fetch(ORIGIN + js[1]);
  assert.equal(a.status, 200);
  assert.match(a.headers.get('cache-control'), /max-age=31536000, immutable/);
});

test('sign in: a wrong key is refused in place, the right one opens the agents list; sign out forgets it', T, async () => {
  const { key, email } = newUser();
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  watch(page, bag);
  await page.goto(`${ORIGIN}/`);
  await shot(page, 'signin');
  await page.getByLabel('API key').fill('ahk_AAAAAAAA_BBBBBBBBBB');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  assert.match(await page.getByRole('alert').textContent(), /API key|Invalid|credential|not/i);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
  assert.equal(new URL(page.url()).hash, '#/agents');
  assert.ok(!page.url().includes(key), 'the key is never in the URL');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agenthost.key')), key);
  assert.ok((await page.locator('.topnav').textContent()).includes(email));
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agenthost.key')), null);
  // A bookmarked page asks for the key first, then opens.
  await page.goto(`${ORIGIN}/#/usage`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();
  await ctx.close();
});

test('an agent named like markup shows as text, and no script of it runs', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: XSS, source_type: 'local' })).status, 201);
  const page = await signedIn(browser, bag, key);
  const before = bag.dialogs.length;
  await page.goto(`${ORIGIN}/#/agents`);
  const link = page.locator('a.agent-name').first();
  await link.waitFor();
  assert.equal(await link.textContent(), XSS);
  assert.equal(await page.locator('main img').count(), 0);
  await link.click();
  await page.getByRole('heading', { name: XSS, level: 1 }).waitFor();
  assert.equal(await page.locator('main img').count(), 0);
  await page.waitForTimeout(300);
  assert.equal(bag.dialogs.length, before, `a dialog fired: ${bag.dialogs}`);
  await page.context().close();
});

test('create → upload → deploy → invoke, all in the page; history shows the call', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents`);
  await page.locator('#agents-list table').waitFor();
  await shot(page, 'agents-empty');
  await page.getByLabel('Name').fill('Echo bot');
  await page.getByLabel('Source').selectOption('local');
  await page.getByRole('button', { name: 'Create agent' }).click();
  await page.getByRole('heading', { name: 'Echo bot', level: 1 }).waitFor();
  assert.equal(new URL(page.url()).hash, '#/agents/echo-bot');
  assert.equal(await page.locator('#status .badge').textContent(), 'draft');
  await page.locator('#code-file').setInputFiles({ name: 'echo.tar.gz', mimeType: 'application/gzip', buffer: ECHO_PROJECT() });
  await page.locator('#upload-result', { hasText: 'Uploaded echo.tar.gz' }).waitFor();
  await page.getByRole('button', { name: 'Deploy', exact: true }).click();
  // The badge changes without a reload: the page polls the agent.
  await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
  assert.equal(await page.locator('#status .badge').textContent(), 'active', await page.locator('#status').textContent());
  await page.getByLabel('Prompt').fill('hello from the browser');
  await page.getByLabel('Session id (optional)').fill('browser-session-1');
  await page.getByRole('button', { name: 'Invoke' }).click();
  // The response streams into #invoke-response; the facts come with the end.
  await page.locator('#invoke-result .facts, #invoke-result .error').first().waitFor({ timeout: 60000 });
  const facts = await page.locator('#invoke-result').textContent();
  assert.match(facts, /echo: hello from the browser/, 'the invocation answered');
  assert.match(facts, /\d+ in, \d+ out/);
  assert.match(facts, /browser-session-1/);
  assert.match(facts, /\$0\.\d+/);
  // History and sessions show the call without a reload.
  await page.locator('#invocations td', { hasText: /^hello from the browser$/ }).waitFor();
  await page.locator('#sessions code', { hasText: 'browser-session-1' }).waitFor();
  await page.locator('#sessions').getByRole('button', { name: 'Refresh' }).click();
  await page.locator('#sessions code', { hasText: 'browser-session-1' }).waitFor();
  assert.ok(!/\b(null|undefined|NaN)\b/.test(await page.locator('main').textContent()), 'no placeholder leaks into the page');
  await shot(page, 'agent-detail');
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.locator('#status .badge', { hasText: 'stopped' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/echo-bot')).data.status, 'stopped');
  await page.goto(`${ORIGIN}/#/agents`);
  await page.locator('#agents-list .badge', { hasText: 'stopped' }).waitFor();
  await shot(page, 'agents');
  // Delete asks first; cancelling keeps the agent, confirming removes it (and its sandboxes).
  await page.getByRole('link', { name: 'Echo bot' }).click();
  await page.getByRole('button', { name: 'Delete agent' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await call(key, 'GET', '/agents/echo-bot')).status, 200);
  await page.getByRole('button', { name: 'Delete agent' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await page.locator('#agents-list td.empty').waitFor();
  assert.match(await page.locator('#notice').textContent(), /Deleted Echo bot/);
  assert.equal((await call(key, 'GET', '/agents/echo-bot')).status, 404);
  // The call stays in the user's usage: one day with a bar, in every measure.
  await page.goto(`${ORIGIN}/#/usage`);
  await page.locator('#usage-chart').waitFor();
  assert.match(await page.locator('#usage-totals').textContent(), /Invocations1Input tokens[1-9]/);
  assert.equal(await page.locator('#usage-chart rect.bar:not(.zero)').count(), 1);
  await page.getByRole('button', { name: 'Cost' }).click();
  await page.locator('#usage-chart > title', { hasText: /^Cost per day over the last 30 days: \$0\.0*[1-9]/ }).waitFor({ state: 'attached' });
  assert.equal(await page.locator('#usage-chart rect.bar:not(.zero)').count(), 1);
  await shot(page, 'usage-with-calls');
  await page.context().close();
});

test('a git agent is created with its repository and branch, and edited as one', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents`);
  const form = page.locator('#create-agent');
  assert.equal(await form.getByLabel('Git repository URL').isVisible(), false);
  await form.getByLabel('Name').fill('From git');
  await form.getByLabel('Source').selectOption('git');
  await form.getByLabel('Git repository URL').fill('https://git.example.com/team/agent.git');
  await form.getByLabel('Branch or tag').fill('release');
  await form.getByRole('button', { name: 'Create agent' }).click();
  await page.getByRole('heading', { name: 'From git', level: 1 }).waitFor();
  assert.match(await page.locator('#status').textContent(), /git https:\/\/git\.example\.com\/team\/agent\.git release/);
  const a = (await call(key, 'GET', '/agents/from-git')).data;
  assert.equal(a.source_type, 'git');
  assert.equal(a.git_branch, 'release');
  await page.locator('#edit').getByLabel('Branch or tag').fill('main');
  await page.locator('#edit').getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#status', { hasText: 'agent.git main' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/from-git')).data.git_branch, 'main');
  await page.context().close();
});

test('a failed deploy shows its status_message', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  assert.equal((await call(key, 'POST', '/agents', { name: 'broken', source_type: 'local' })).status, 201);
  await page.goto(`${ORIGIN}/#/agents/broken`);
  // Dropped on the drop zone this time, as a file dragged from the desktop.
  const bytes = [...tarball({ 'index.js': 'x' })];
  const dt = await page.evaluateHandle((b) => {
    const d = new DataTransfer();
    d.items.add(new File([new Uint8Array(b)], 'bad.tar.gz', { type: 'application/gzip' }));
    return d;
  }, bytes);
  await page.locator('#dropzone').dispatchEvent('drop', { dataTransfer: dt });
  await page.locator('#upload-result', { hasText: `Uploaded bad.tar.gz: ${bytes.length} bytes` }).waitFor();
  await page.getByRole('button', { name: 'Deploy', exact: true }).click();
  await page.locator('#status .badge', { hasText: 'error' }).waitFor({ timeout: 100000 });
  assert.match(await page.locator('#status-message').textContent(), /manifest|agent\.json/i);
  await page.context().close();
});

test("the deploy history shows each deploy's log, and a rollback switches back to the older image", T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'two-step', source_type: 'local' })).status, 201);
  const version = (v) => tarball({
    'agent.json': JSON.stringify({ name: 'v', version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }),
    'index.js': `process.stdout.write('${v}');\n`,
  });
  const put = async (v) => {
    const r = await fetch(`${API}/agents/two-step/code`, { method: 'PUT', body: version(v),
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' } });
    assert.equal(r.status, 200);
  };
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/two-step`);
  for (const v of ['first', 'second']) {
    await put(v);
    await page.getByRole('button', { name: /^(Deploy|Redeploy)$/ }).click();
    await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
    await page.locator('#deploys tbody tr').nth(v === 'first' ? 0 : 1).waitFor();
  }
  await page.locator('#deploys td', { hasText: /succeeded active/ }).waitFor();
  assert.equal(await page.locator('#deploys tbody tr').count(), 2);
  // The newest deploy's log, then a rollback to the older one from its row.
  await page.locator('#deploys tbody tr').first().getByRole('button', { name: 'Log' }).click();
  await page.locator('#deploy-log', { hasText: "==> image " }).waitFor();
  assert.match(await page.locator('#deploy-log').textContent(), /==> extracting the uploaded code/);
  const older = page.locator('#deploys tbody tr').nth(1);
  assert.equal(await page.locator('#deploys tbody tr').first().getByRole('button', { name: 'Roll back' }).count(), 0);
  await older.getByRole('button', { name: 'Roll back' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Roll back' }).click();
  await page.locator('#notice', { hasText: /Rolled back to dep_/ }).waitFor();
  await page.locator('#deploys tbody tr').nth(1).locator('td', { hasText: /succeeded active/ }).waitFor();
  await shot(page, 'agent-deploys');
  const ds = (await call(key, 'GET', '/agents/two-step/deploys')).data;
  assert.deepEqual(ds.map((d) => d.active), [false, true]);
  const inv = await call(key, 'POST', '/agents/two-step/invoke', { prompt: 'x' });
  assert.equal(inv.data.response_content, 'first');
  await page.context().close();
});

test('the invoke console streams the response and can cancel the call', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'ticker', source_type: 'local' })).status, 201);
  const code = tarball({
    'agent.json': JSON.stringify({ name: 'ticker', version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }),
    'index.js': "process.stdin.resume();process.stdin.on('end',()=>{let i=0;setInterval(()=>process.stdout.write('tick'+(i++)+' '),300);});\n",
  });
  const put = await fetch(`${ORIGIN}/api/v1/agents/ticker/code`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' }, body: code });
  assert.equal(put.status, 200);
  assert.equal((await call(key, 'POST', '/agents/ticker/deploy')).status, 202);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/ticker`);
  await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
  await page.getByLabel('Prompt').fill('go');
  await page.getByRole('button', { name: 'Invoke' }).click();
  // Output shows while the call runs (it never ends by itself).
  await page.locator('#invoke-response', { hasText: 'tick2' }).waitFor({ timeout: 60000 });
  await page.getByRole('button', { name: 'Cancel' }).click();
  await page.locator('#invoke-result .badge', { hasText: 'cancelled' }).waitFor({ timeout: 30000 });
  assert.match(await page.locator('#invoke-response').textContent(), /^tick0 tick1 tick2 /);
  assert.equal(await page.getByRole('button', { name: 'Cancel' }).isVisible(), false);
  await page.locator('#invocations .badge', { hasText: 'cancelled' }).waitFor();
  await shot(page, 'invoke-cancelled');
  assert.equal((await call(key, 'DELETE', '/agents/ticker')).status, 204);
  await page.context().close();
});

test('a failing invocation shows its detail, its partial output and its cost', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'crasher', source_type: 'local' })).status, 201);
  const code = tarball({
    'agent.json': JSON.stringify({ name: 'crasher', version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }),
    'index.js': "process.stdin.resume();process.stdin.on('end',()=>{process.stdout.write('partial output');process.exit(3);});\n",
  });
  const put = await fetch(`${ORIGIN}/api/v1/agents/crasher/code`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' }, body: code });
  assert.equal(put.status, 200);
  assert.equal((await call(key, 'POST', '/agents/crasher/deploy')).status, 202);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/crasher`);
  await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
  await page.getByLabel('Prompt').fill('go');
  await page.getByRole('button', { name: 'Invoke' }).click();
  const alert = page.locator('#invoke-result [role=alert]');
  await alert.waitFor({ timeout: 60000 });
  assert.equal(await alert.textContent(), 'Invocation failed: agent exited with status 3');
  assert.match(await page.locator('#invoke-result').textContent(), /Cost\$0\.0*[1-9]/);
  assert.equal(await page.locator('#invoke-response').textContent(), 'partial output');
  assert.equal(await page.locator('#invoke-result .badge').textContent(), 'failed');
  await page.locator('#invocations .badge', { hasText: 'failed' }).waitFor();
  await shot(page, 'invoke-failed');
  assert.equal((await call(key, 'DELETE', '/agents/crasher')).status, 204);
  await page.context().close();
});

test('a secret is set and listed by name; its value is never shown', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'with secrets', source_type: 'local' })).status, 201);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/with-secrets`);
  const form = page.locator('#secret-form');
  await form.getByLabel('Name').fill('SERVICE_TOKEN');
  await form.getByLabel('Value').fill('s3cr3t-value-xyz');
  await form.getByRole('button', { name: 'Save secret' }).click();
  await page.locator('#secrets code', { hasText: 'SERVICE_TOKEN' }).waitFor();
  assert.ok(!(await page.content()).includes('s3cr3t-value-xyz'), 'the value stays out of the page');
  const list = await call(key, 'GET', '/agents/with-secrets/secrets');
  assert.deepEqual(list.data.map((s) => s.key), ['SERVICE_TOKEN']);
  await page.locator('#secrets').getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await page.locator('#secrets td.empty').waitFor();
  assert.equal((await call(key, 'GET', '/agents/with-secrets/secrets')).data.length, 0);
  await page.context().close();
});

test('usage: the daily chart has one bar per day of the chosen period, and totals', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/usage`);
  await page.locator('#usage-chart').waitFor();
  assert.equal(await page.locator('#usage-chart rect').count(), 30);
  assert.match(await page.locator('#usage-chart > title').textContent(), /last 30 days/);
  assert.match(await page.locator('#usage-totals').textContent(), /Invocations0/);
  await page.getByRole('button', { name: '7 days' }).click();
  await page.waitForFunction(() => document.querySelectorAll('#usage-chart rect').length === 7);
  assert.equal(await page.getByRole('button', { name: '7 days' }).getAttribute('aria-pressed'), 'true');
  await shot(page, 'usage');
  await page.context().close();
});

test('API keys: a new key is shown once and works; revoking it makes it fail, and a tab using it returns to sign-in', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/keys`);
  await page.locator('#keys-list table').waitFor();
  await page.locator('#create-key').getByLabel('Name', { exact: true }).fill('ci key');
  await page.getByRole('button', { name: 'Create key' }).click();
  const fresh = await page.locator('#new-key-value').inputValue();
  assert.match(fresh, /^ahk_[A-Za-z0-9]{8}_[A-Za-z0-9]{10}$/);
  assert.equal((await call(fresh, 'GET', '/users/me')).status, 200);
  await page.locator('#keys-list tr', { hasText: 'ci key' }).waitFor();
  await shot(page, 'keys');
  await page.locator('#keys-list tr', { hasText: 'ci key' }).getByRole('button', { name: 'Revoke' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
  await page.locator('#keys-list tr', { hasText: 'ci key' }).waitFor({ state: 'detached' });
  assert.equal((await call(fresh, 'GET', '/users/me')).status, 401);
  // A tab signed in with the revoked key is sent back to sign-in with a reason.
  const other = await signedIn(browser, bag, fresh);
  await other.goto(`${ORIGIN}/#/agents`);
  await other.getByRole('heading', { name: 'Sign in' }).waitFor();
  assert.match(await other.locator('#notice').textContent(), /Sign in again/);
  await other.context().close();
  await page.context().close();
});

test('files: upload (over 10 MB by presigned upload), list with usage, download, delete; buckets: register one', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/files`);
  await page.locator('#files-list table').waitFor();
  await page.locator('#upload-file').getByLabel('File', { exact: true }).setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello files') });
  await page.locator('#upload-file').getByLabel('Description').fill('my notes');
  await page.locator('#upload-file').getByLabel('Tags').fill('q4,notes');
  await page.getByRole('button', { name: 'Upload' }).click();
  await page.locator('#files-list td', { hasText: 'notes.txt' }).waitFor();
  await page.locator('#files-usage', { hasText: /^1 files/ }).waitFor();
  // The filters reach the API: a tag the file lacks finds nothing, its own tag finds it.
  const search = page.locator('#files-search');
  await search.getByLabel('Tags').fill('q3');
  await search.getByRole('button', { name: 'Search' }).click();
  await page.locator('#files-list td.empty').waitFor();
  await search.getByLabel('Tags').fill('q4');
  await search.getByLabel('Scope').selectOption('user');
  await search.getByRole('button', { name: 'Search' }).click();
  await page.locator('#files-list td', { hasText: 'tags: notes, q4' }).waitFor();
  await search.getByLabel('Tags').fill('');
  await search.getByRole('button', { name: 'Search' }).click();
  const dl = page.waitForEvent('download');
  await page.locator('#files-list').getByRole('button', { name: 'Download' }).click();
  assert.equal((await dl).suggestedFilename(), 'notes.txt');
  await shot(page, 'files');
  await page.locator('#files-list').getByRole('button', { name: 'Delete' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
  await page.locator('#files-list td.empty').waitFor();
  // Over 10 MB the page takes the presigned way: reserve, PUT, confirm by hash.
  const big = randomBytes(11 * 1024 * 1024 + 3);
  await page.locator('#upload-file').getByLabel('File', { exact: true }).setInputFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big });
  await page.getByRole('button', { name: 'Upload' }).click();
  await page.locator('#files-list td', { hasText: 'big.bin' }).waitFor({ timeout: 60000 });
  const rec = (await call(key, 'GET', '/files')).data[0];
  assert.equal(rec.status, 'confirmed');
  assert.equal(rec.size_bytes, big.length);
  assert.equal(rec.sha256_hash, createHash('sha256').update(big).digest('hex'));
  await page.goto(`${ORIGIN}/#/buckets`);
  const f = page.locator('#create-bucket');
  await f.getByLabel('Name', { exact: true }).fill('Team data');
  await f.getByLabel('Bucket name').fill('team-data');
  await f.getByLabel('Endpoint URL').fill(STORAGE_ENDPOINT);
  await f.getByRole('button', { name: 'Add bucket' }).click();
  await page.locator('#buckets-list td', { hasText: 'Team data' }).waitFor();
  assert.equal((await call(key, 'GET', '/buckets')).data[0].slug, 'team-data');
  await shot(page, 'buckets');
  await page.context().close();
});

test("an agent's settings, attached files and bucket mounts are edited in its page", T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'Settings', source_type: 'local' })).status, 201);
  const fd = new FormData();
  fd.append('file', new Blob(['a,b\n1,2\n']), 'data.csv');
  const up = await fetch(`${ORIGIN}/api/v1/files`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: fd });
  assert.equal(up.status, 201);
  assert.equal((await call(key, 'POST', '/buckets', { name: 'Lake', provider: 's3', bucket_name: 'lake', endpoint_url: STORAGE_ENDPOINT })).status, 201);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/settings`);
  const edit = page.locator('#edit');
  await edit.getByLabel('Name').fill('Settings renamed');
  await edit.getByLabel('Default timeout (seconds)').fill('45');
  assert.equal(await edit.getByLabel('Warm processes').inputValue(), '0');
  await edit.getByLabel('Warm processes').fill('1');
  await edit.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('heading', { name: 'Settings renamed', level: 1 }).waitFor();
  const a = (await call(key, 'GET', '/agents/settings')).data;
  assert.equal(a.name, 'Settings renamed');
  assert.equal(a.timeout_seconds, 45);
  assert.equal(a.min_warm, 1);
  // The server's 422 is shown field by field (the browser's own check is
  // turned off here, as an older browser would not have it).
  await page.evaluate(() => { document.querySelector('#edit').noValidate = true; });
  await edit.getByLabel('Default timeout (seconds)').fill('0');
  await edit.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#edit [role=alert]', { hasText: 'timeout_seconds' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/settings')).data.timeout_seconds, 45);
  // Egress (issue 32): an allow-list, one entry a line; a private range is
  // the server's 422, which names the field.
  await edit.getByLabel('Default timeout (seconds)').fill('45');
  assert.equal(await edit.getByLabel('Network').inputValue(), 'open');
  await edit.getByLabel('Network').selectOption('allow');
  await edit.getByLabel('Allowed hosts').fill('API.example.com:443\n203.0.113.0/24');
  await edit.getByRole('button', { name: 'Save changes' }).click();
  for (let i = 0; i < 100 && (await call(key, 'GET', '/agents/settings')).data.network.mode !== 'allow'; i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual((await call(key, 'GET', '/agents/settings')).data.network,
    { mode: 'allow', allow: ['api.example.com:443', '203.0.113.0/24'] });
  await edit.getByLabel('Allowed hosts').fill('10.0.0.0/8');
  await edit.getByRole('button', { name: 'Save changes' }).click();
  await page.locator('#edit [role=alert]', { hasText: 'network' }).waitFor();
  assert.deepEqual((await call(key, 'GET', '/agents/settings')).data.network.allow, ['api.example.com:443', '203.0.113.0/24']);
  const attach = page.locator('#attach-form');
  assert.equal(await attach.locator('option').textContent(), 'data.csv (8 B)');
  await attach.getByRole('button', { name: 'Attach' }).click();
  await page.locator('#attachments code', { hasText: '/files/agent/data.csv' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/settings/files')).data[0].filename, 'data.csv');
  const mount = page.locator('#mounts form');
  await mount.getByLabel('Bucket', { exact: true }).selectOption('lake');
  await mount.getByLabel('Mount path').fill('/data/lake');
  await mount.getByRole('button', { name: 'Add mount' }).click();
  await page.locator('#mounts code', { hasText: '/data/lake' }).waitFor();
  assert.equal((await call(key, 'GET', '/agents/settings/mounts')).data[0].mount_path, '/data/lake');
  await mount.getByLabel('Mount path').fill('/proc/x');
  await mount.getByRole('button', { name: 'Add mount' }).click();
  await page.locator('#mounts [role=alert]', { hasText: 'mount_path' }).waitFor();
  await shot(page, 'agent-settings');
  // The bucket's test makes a real request, to a port where nothing listens.
  await page.goto(`${ORIGIN}/#/buckets`);
  await page.locator('#buckets-list').getByRole('button', { name: 'Set credentials' }).click();
  const dlg = page.getByRole('dialog');
  await dlg.getByLabel('Access key id').fill('AKIDEXAMPLE');
  await dlg.getByLabel('Secret access key').fill('wJalrXUtnFEMI-secret');
  await dlg.getByRole('button', { name: 'Save' }).click();
  await page.locator('#buckets-list td', { hasText: /^set$/ }).waitFor();
  assert.equal((await call(key, 'GET', '/buckets/lake')).data.has_credentials, true);
  assert.ok(!(await page.content()).includes('wJalrXUtnFEMI-secret'));
  await page.locator('#buckets-list').getByRole('button', { name: 'Test' }).click();
  await page.locator('#buckets-list .test-result', { hasText: /^Failed: ./ }).waitFor({ timeout: 30000 });
  await page.context().close();
});

test('every form control has a label and every button a name; sign-in works from the keyboard', T, async () => {
  const { key } = newUser();
  assert.equal((await call(key, 'POST', '/agents', { name: 'labelled', source_type: 'local' })).status, 201);
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  watch(page, bag);
  await page.goto(`${ORIGIN}/`);
  await page.keyboard.type(key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
  for (const route of ['agents', 'agents/labelled', 'files', 'buckets', 'usage', 'keys']) {
    await page.goto(`${ORIGIN}/#/${route}`);
    await page.locator('main h1').waitFor();
    await page.waitForLoadState('networkidle');
    const bad = await page.evaluate(() => [
      ...[...document.querySelectorAll('input, select, textarea')].filter((e) => !e.labels?.length && !e.getAttribute('aria-label')).map((e) => `control ${e.name}`),
      ...[...document.querySelectorAll('button, a')].filter((e) => !e.textContent.trim() && !e.getAttribute('aria-label')).map((e) => `unnamed ${e.tagName}`),
    ]);
    assert.deepEqual(bad, [], `on #/${route}`);
  }
  await ctx.close();
});

test('long lists are paged by X-Total-Count', T, async () => {
  const { key } = newUser();
  for (let i = 1; i <= 22; i++) assert.equal((await call(key, 'POST', '/agents', { name: `paged ${i}`, source_type: 'local' })).status, 201);
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents`);
  const pager = page.locator('#agents-list .pager');
  await pager.getByText('1–20 of 22').waitFor();
  assert.equal(await page.locator('#agents-list tbody tr').count(), 20);
  assert.equal(await pager.getByRole('button', { name: '‹ Previous' }).isDisabled(), true);
  await pager.getByRole('button', { name: 'Next ›' }).click();
  await pager.getByText('21–22 of 22').waitFor();
  assert.equal(await page.locator('#agents-list tbody tr').count(), 2);
  assert.equal(await pager.getByRole('button', { name: 'Next ›' }).isDisabled(), true);
  await page.context().close();
});

test('at 360 px wide no page needs sideways scrolling', T, async () => {
  const { key } = newUser();
  await call(key, 'POST', '/agents', { name: 'a rather long agent name that has to wrap somewhere', source_type: 'local' });
  const page = await signedIn(browser, bag, key, { width: 360, height: 740 });
  await page.goto(`${ORIGIN}/#/agents`);
  await page.locator('#agents-list table').waitFor();
  for (const [route, name] of [['agents', 'agents-360'], ['agents/a-rather-long-agent-name-that-has-to-wrap-somewhere', 'agent-360'], ['usage', 'usage-360'], ['keys', 'keys-360']]) {
    await page.goto(`${ORIGIN}/#/${route}`);
    await page.locator('main h1').waitFor();
    await page.waitForLoadState('networkidle');
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 360, `#/${route} is ${width}px wide`);
    await shot(page, name);
  }
  await page.context().close();
});

test('over the rate limit the page says when to retry; offline it says the network is lost', T, async () => {
  const { key } = newUser();
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/usage`);
  await page.locator('#usage-chart').waitFor();
  await page.context().setOffline(true);
  await page.getByRole('button', { name: '90 days' }).click();
  await page.getByRole('alert').filter({ hasText: /Network error/ }).waitFor();
  await page.context().setOffline(false);
  // Spend the user's requests for this minute (100), then ask once more.
  let last;
  for (let i = 0; i < 12 && last !== 429; i++) {
    const rs = await Promise.all(Array.from({ length: 10 }, () => call(key, 'GET', '/users/me')));
    last = rs.some((r) => r.status === 429) ? 429 : 200;
  }
  assert.equal(last, 429, 'the rate limit was reached');
  await page.getByRole('button', { name: '7 days' }).click();
  const alert = page.getByRole('alert').filter({ hasText: /Too many requests/ });
  await alert.waitFor();
  assert.match(await alert.textContent(), /Try again in \d+ seconds/);
  await page.context().close();
});

test('no console errors, uncaught exceptions or dialogs in any page', () => {
  assert.deepEqual(bag.errors, []);
  assert.deepEqual(bag.dialogs, []);
});
