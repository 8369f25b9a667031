// Model tokens in the dashboard (issue 27): a call whose agent used the model
// through the gateway shows the provider's token counts beside the prompt's
// (which agenthost counts itself) wherever the call is shown: the invoke
// console's result, the history row, the invocation's own view and the usage
// page. The runner is restarted with the gateway on and a stand-in for the
// Messages API on loopback as its upstream, and put back as it was after:
// like tests/integration's runner_with, it assumes no other test file invokes
// agents on the same stack meanwhile (node --test runs files one at a time on
// 2 cores). Run like dashboard.test.mjs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { ORIGIN, launch, newUser, call, signedIn, shot, tarball, restartRunner } from './lib.mjs';

let browser;
let provider;
const bag = { errors: [], dialogs: [] };
const T = { timeout: 180000 };
const OPERATOR_KEY = `sk-ant-test-${randomBytes(16).toString('hex')}`;
// What the stand-in reports for every answer: 1,234 input tokens (1,000 plain,
// 200 cache writes, 34 cache reads) and 567 output tokens.
const USAGE = { input_tokens: 1000, cache_creation_input_tokens: 200, cache_read_input_tokens: 34, output_tokens: 567 };
const MODEL_IN = 1234;
const MODEL_OUT = 567;

// POST /v1/messages with the operator's key: an echo with USAGE.
function standIn(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const ok = req.method === 'POST' && req.url === '/v1/messages' && req.headers['x-api-key'] === OPERATOR_KEY;
    const body = ok
      ? { id: 'msg_1', type: 'message', role: 'assistant', model: 'test-model', stop_reason: 'end_turn', usage: USAGE,
        content: [{ type: 'text', text: `echo: ${JSON.parse(Buffer.concat(chunks)).messages[0].content}` }] }
      : { type: 'error', error: { type: 'authentication_error' } };
    res.writeHead(ok ? 200 : 401, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  });
}

// Asks the model through the gateway as an SDK would, and answers its text.
const AGENT_JS = `const c=[];process.stdin.on('data',d=>c.push(d));process.stdin.on('end',async()=>{
const r=await fetch(process.env.ANTHROPIC_BASE_URL+'/v1/messages',{method:'POST',headers:{'x-api-key':process.env.ANTHROPIC_API_KEY,
'anthropic-version':'2023-06-01','content-type':'application/json'},body:JSON.stringify({model:'test-model',max_tokens:64,
messages:[{role:'user',content:Buffer.concat(c).toString()}]})});
const j=await r.json();if(r.status!==200){process.stderr.write(JSON.stringify(j));process.exitCode=3;return;}
process.stdout.write(j.content[0].text);});
`;

before(async () => {
  provider = http.createServer(standIn);
  await new Promise((r) => provider.listen(0, '127.0.0.1', r));
  await restartRunner({ model_gateway: 'on', model_key_value: OPERATOR_KEY,
    model_gateway_upstream: `http://127.0.0.1:${provider.address().port}` });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await restartRunner();
  provider?.close();
});

async function deployed(key, name) {
  assert.equal((await call(key, 'POST', '/agents', { name, source_type: 'local' })).status, 201);
  const code = tarball({ 'agent.json': JSON.stringify({ name, version: '1.0.0', entrypoint: 'index.js', runtime: 'node' }), 'index.js': AGENT_JS });
  const put = await fetch(`${ORIGIN}/api/v1/agents/${name}/code`, { method: 'PUT', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/gzip' }, body: code });
  assert.equal(put.status, 200);
  assert.equal((await call(key, 'POST', `/agents/${name}/deploy`)).status, 202);
}

// A <dl class="facts">'s terms and their values, in order.
const facts = (dl) => dl.evaluate((el) => [...el.querySelectorAll('dt')].map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]));

test("a call that used the model shows the model's tokens beside the prompt's: result, history, detail, usage", T, async () => {
  const { key } = newUser();
  await deployed(key, 'modeller');
  const page = await signedIn(browser, bag, key);
  await page.goto(`${ORIGIN}/#/agents/modeller`);
  await page.locator('#status .badge', { hasText: /^(active|error)$/ }).waitFor({ timeout: 100000 });
  assert.equal(await page.locator('#status .badge').textContent(), 'active', await page.locator('#status').textContent());
  await page.getByLabel('Prompt').fill('hello model');
  await page.getByRole('button', { name: 'Invoke' }).click();
  await page.locator('#invoke-result .facts, #invoke-result .error').first().waitFor({ timeout: 60000 });
  assert.equal(await page.locator('#invoke-response').textContent(), 'echo: hello model');

  // The record's own counts: the prompt's tokens (agenthost's count) and the provider's.
  const inv = (await call(key, 'GET', '/agents/modeller/invocations')).data[0];
  assert.equal(inv.model_input_tokens, MODEL_IN);
  assert.equal(inv.model_output_tokens, MODEL_OUT);
  assert.ok(inv.input_tokens > 0 && inv.input_tokens !== MODEL_IN, `prompt tokens ${inv.input_tokens}`);
  const prompts = `${inv.input_tokens} in, ${inv.output_tokens} out`;
  const model = `${MODEL_IN} in, ${MODEL_OUT} out`;

  // The invoke console's result: Model tokens right after Tokens.
  const result = await facts(page.locator('#invoke-result dl.facts'));
  const at = result.findIndex(([t]) => t === 'Tokens');
  assert.deepEqual(result.slice(at, at + 2), [['Tokens', prompts], ['Model tokens', model]], JSON.stringify(result));
  await shot(page, 'invoke-model-tokens');

  // The history row: the prompt's tokens, then the model's.
  const row = page.locator('#invocations tr', { hasText: 'hello model' });
  await row.waitFor();
  assert.ok((await row.textContent()).includes(`${inv.input_tokens}/${inv.output_tokens} (model ${MODEL_IN}/${MODEL_OUT})`),
    await row.textContent());

  // The invocation's own view.
  await row.locator('a.inv-link').click();
  await page.locator('#invocation-prompt').waitFor();
  const detail = await facts(page.locator('#invocation dl.facts'));
  const at2 = detail.findIndex(([t]) => t === 'Tokens');
  assert.deepEqual(detail.slice(at2, at2 + 2), [['Tokens', prompts], ['Model tokens', model]], JSON.stringify(detail));
  await shot(page, 'invocation-model-tokens');

  // The usage page's totals.
  await page.goto(`${ORIGIN}/#/usage`);
  const totals = await facts(page.locator('#usage-totals'));
  assert.deepEqual(totals.find(([t]) => t === 'Model tokens'), ['Model tokens', model], JSON.stringify(totals));
  assert.deepEqual(bag.errors, []);
  assert.deepEqual(bag.dialogs, []);
  await page.context().close();
  assert.equal((await call(key, 'DELETE', '/agents/modeller')).status, 204);
});
