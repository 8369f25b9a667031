"""No secret in any log or in any answer, across the whole life of an agent
(issue 19): an agent secret, the user's API key and a JWT are used through
deploys, successful and failing invocations, sessions and error paths (a
refused secret, a wrong key, a tampered token, a crashed agent); then every
log of the stack (the API's, the runner's, MariaDB's, nginx's) and every
answer the test received is searched for each value, raw, base64 and hex."""
import base64
import os
import uuid

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import CONFIG, Client, log_files, new_client

# Reads the secret and says only whether it is there; crashes on demand,
# writing to stderr (which goes to the runner's log).
AGENT_JS = """
let d = '';
process.stdin.on('data', c => d += c).on('end', () => {
  const s = process.env.DEPLOY_TOKEN || '';
  if (d.includes('crash')) { console.error('about to crash, token length ' + s.length); process.exit(3); }
  process.stdout.write('has token: ' + (s.length > 0) + ', length ' + s.length);
});
"""


def forms(value):
    v = value.encode()
    return {v, base64.b64encode(v), base64.urlsafe_b64encode(v).rstrip(b"="), v.hex().encode()}


def jwt_of(marker):
    """An HS256 token whose signature is wrong (the API must refuse it and not
    log it); the marker rides in its payload."""
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")
    body = base64.urlsafe_b64encode(('{"sub":"%s","exp":9999999999}' % marker).encode()).rstrip(b"=")
    sig = base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=")
    return b".".join([head, body, sig]).decode()


@needs_runner
def test_no_secret_in_logs_or_answers():
    c = new_client("pro")
    secret = "s3cr3t-" + uuid.uuid4().hex
    answers = []

    def keep(r):
        answers.append(r.content)
        return r

    a = deployed_agent(c, AGENT_JS)
    slug = a["slug"]
    assert keep(c.post(f"/agents/{slug}/secrets", json={"key": "DEPLOY_TOKEN", "value": secret})).status_code == 201
    # The secret is used: redeploy (secrets apply from the next call), ephemeral and session calls.
    r = keep(c.post(f"/agents/{slug}/invoke", json={"prompt": "hi"}))
    assert r.status_code == 200 and "has token: true" in r.json()["response_content"], r.text
    r = keep(c.post(f"/agents/{slug}/invoke", json={"prompt": "hi", "session_id": "s-1"}))
    assert r.status_code == 200, r.text
    r = keep(c.post(f"/agents/{slug}/invoke", json={"prompt": "crash now"}))
    assert r.status_code >= 400 and r.json()["invocation"]["status"] == "failed", r.text
    # Error paths that carry a secret value.
    keep(c.post(f"/agents/{slug}/secrets", json={"key": "bad key", "value": secret}))
    keep(c.post(f"/agents/{slug}/secrets", json={"key": "OK", "value": secret, "extra": secret}))
    keep(c.post(f"/agents/{slug}/secrets", data='{"key":"X","value":"%s"' % secret,
                headers={"Content-Type": "application/json"}))
    keep(Client(c.key[:-4] + "zzzz").get("/users/me"))              # a wrong API key
    keep(Client(secret).get("/agents"))                              # the secret as a key
    token = jwt_of(secret)
    keep(Client(token).get("/users/me"))                             # a forged JWT
    keep(c.get(f"/agents/{slug}/secrets"))
    keep(c.get(f"/agents/{slug}/invocations"))
    keep(c.get(f"/agents/{slug}/sessions"))
    keep(c.get(f"/agents/{slug}"))
    assert keep(c.delete(f"/agents/{slug}")).status_code == 204

    values = {"agent secret": secret, "API key": c.key, "JWT": token,
              "JWT signature": token.rsplit(".", 1)[1]}
    for name, value in values.items():
        for body in answers:
            for f in forms(value) if name != "API key" else {value.encode()}:
                assert f not in body, f"the {name} is in an answer: {body[:300]!r}"
    files = log_files() + [os.path.join(os.path.dirname(CONFIG), "log", "mysql.log")]
    runner_log = [p for p in files if p.endswith("runner.log")]
    assert runner_log, files
    # The logs searched are the ones that saw this test: the agent's stderr is there.
    with open(runner_log[0], "rb") as fh:
        assert b"about to crash, token length %d" % len(secret) in fh.read()
    for path in files:
        if not os.path.exists(path):
            continue
        with open(path, "rb") as fh:
            data = fh.read()
        for name, value in values.items():
            for f in forms(value):
                assert f not in data, f"the {name} is in {path}"
