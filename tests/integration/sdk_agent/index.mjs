// A Claude Agent SDK agent as a user would write one: the prompt on stdin,
// query() with the Bash tool, the result on stdout. Claude Code runs in the
// sandbox's /app with HOME=/tmp; the gateway is ANTHROPIC_BASE_URL.
import { query } from '@anthropic-ai/claude-agent-sdk';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const prompt = Buffer.concat(chunks).toString('utf8');

const env = {
  ...process.env,
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', // no telemetry or update checks
  CLAUDE_CODE_MAX_RETRIES: process.env.CLAUDE_CODE_MAX_RETRIES ?? '0',
};
let result, why;
try {
  for await (const m of query({ prompt, options: { allowedTools: ['Bash'], maxTurns: 4, env } })) {
    if (m.type === 'result') result = m;
  }
  if (!result || result.subtype !== 'success' || result.is_error)
    why = result ? `${result.subtype}: ${result.result ?? result.errors?.join('; ')}` : 'no result';
} catch (e) {
  why = e.message; // e.g. "Claude Code returned an error result: API Error: 529 …"
}
if (why) {
  process.stderr.write(`agent failed: ${why}\n`);
  process.stdout.write(`agent failed: ${why}`);
  process.exit(3);
}
process.stdout.write(result.result);
