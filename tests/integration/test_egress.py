"""Egress allow-lists (issue 32): an agent's `network` {mode, allow}.

The servers an agent tries to reach run in network namespaces this module
makes (ip netns, a veth pair to the host each, /32 addresses and routes), on TEST-NET-3 addresses
(203.0.113.0/24: public as far as the sandbox's host firewall is concerned)
and, for the private-range cases, on 192.168.250.0/30. Each answers a TCP
connection with its own letter and closes it. A host name entry is a name
this module adds to the host's /etc/hosts (the runner's resolver) for the
module's run and removes afterwards.

The agent connects as told (a JSON list of steps in its prompt) and reports
what each step saw: "ok:<letter>", "error:<code>" or "timeout" (its own
connect timeout, 15 s): a refused connection must be ECONNREFUSED, never a
timeout."""
import json
import os
import socket
import subprocess
import time
import uuid

import pytest

from agent_code import deployed_agent, needs_runner
from conftest import assert_422, db_query
from test_deploy_faults import runner_with

TAG = "%04d" % (os.getpid() % 10000)
HOSTS_NAME = f"egress-{uuid.uuid4().hex[:10]}.test"      # -> server B
PRIVATE_NAME = f"egress-{uuid.uuid4().hex[:10]}.test"    # -> server P (private)
OPEN = {"mode": "open", "allow": []}

AGENT_JS = r"""
const net = require('net'), dns = require('dns');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', async () => {
  const steps = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = [];
  for (const s of steps) out.push(await step(s));
  process.stdout.write(JSON.stringify(out));
});
function connect(host, port) {
  return new Promise(done => {
    const c = net.connect({host, port, timeout: 15000});
    let data = '';
    c.on('data', d => data += d);
    c.on('end', () => done('ok:' + data.trim()));
    c.on('timeout', () => { c.destroy(); done('timeout'); });
    c.on('error', e => done('error:' + e.code));
  });
}
function lookup(name) {
  return new Promise(done => dns.lookup(name, {family: 4}, (e, a) => done(e ? 'error:' + e.code : a)));
}
async function gateway() {
  try {
    const r = await fetch(process.env.ANTHROPIC_BASE_URL + '/v1/messages', {method: 'POST',
      headers: {'x-api-key': process.env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01',
                'content-type': 'application/json'},
      body: JSON.stringify({model: 'm', max_tokens: 8, messages: [{role: 'user', content: 'hi'}]})});
    return 'ok:' + r.status;
  } catch (e) { return 'error:' + (e.cause ? e.cause.code : e.message); }
}
async function step(s) {
  if (s[0] === 'connect') return connect(s[1], s[2]);
  if (s[0] === 'lookup') return lookup(s[1]);
  return gateway();
}
"""

SERVER = r"""
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[3].encode() + b"\n")
    c.close()
"""


def sh(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


def can_make_namespaces():
    return os.geteuid() == 0 and sh("ip", "netns", "list", check=False).returncode == 0


class Box:
    """A namespace with a veth pair to the host and a server on port 8080."""

    def __init__(self, label, host_ip, ns_ip):
        self.ns, self.veth, self.ip, self.proc = f"aheg{TAG}{label}", f"aheg{TAG}{label}", ns_ip, None
        sh("ip", "netns", "add", self.ns)
        sh("ip", "link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", self.ns)
        # /32s and a route each way: no subnet on the host, whose attached
        # subnets a runner starting meanwhile would put off-limits (net.c).
        sh("ip", "addr", "add", host_ip + "/32", "dev", self.veth)
        sh("ip", "link", "set", self.veth, "up")
        sh("ip", "route", "add", ns_ip + "/32", "dev", self.veth)
        sh("ip", "-n", self.ns, "addr", "add", ns_ip + "/32", "dev", "eth0")
        sh("ip", "-n", self.ns, "link", "set", "eth0", "up")
        sh("ip", "-n", self.ns, "link", "set", "lo", "up")
        sh("ip", "-n", self.ns, "route", "add", host_ip + "/32", "dev", "eth0")
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-c", SERVER,
                                      ns_ip, "8080", label], stdin=subprocess.DEVNULL)
        deadline = time.time() + 10
        while True:
            try:
                with socket.create_connection((ns_ip, 8080), timeout=2) as c:
                    assert c.recv(16).strip() == label.encode()
                    return
            except OSError:
                assert time.time() < deadline, f"server {label} did not start"
                time.sleep(0.1)

    def remove(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
        sh("ip", "netns", "del", self.ns, check=False)
        sh("ip", "link", "del", self.veth, check=False)


@pytest.fixture(scope="module")
def boxes():
    if not can_make_namespaces():
        pytest.skip("needs root and ip netns")
    made = {}
    try:
        for label, host_ip, ns_ip in (("A", "203.0.113.1", "203.0.113.2"),
                                      ("B", "203.0.113.5", "203.0.113.6"),
                                      ("P", "192.168.250.1", "192.168.250.2")):
            made[label] = Box(label, host_ip, ns_ip)
        yield {k: v.ip for k, v in made.items()}
    finally:
        for b in made.values():
            b.remove()


@pytest.fixture(scope="module")
def host_names(boxes):
    """HOSTS_NAME -> B and PRIVATE_NAME -> P in the runner's resolver."""
    lines = f"{boxes['B']} {HOSTS_NAME}\n{boxes['P']} {PRIVATE_NAME}\n"
    with open("/etc/hosts", "a") as f:
        f.write(lines)
    try:
        yield
    finally:
        with open("/etc/hosts") as f:
            kept = f.read().replace(lines, "")
        with open("/etc/hosts", "w") as f:
            f.write(kept)


def run(client, slug, steps, session_id=None):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": json.dumps(steps), "session_id": session_id},
                    timeout=120)
    assert r.status_code == 200, r.text
    return json.loads(r.json()["response_content"])


def set_network(client, slug, network):
    r = client.patch(f"/agents/{slug}", json={"network": network})
    assert r.status_code == 200, r.text
    return r.json()["network"]


# ---- the setting itself (no runner needed) ----------------------------------

def test_network_defaults_to_open_and_is_stored_canonical(client, make_agent):
    a = make_agent()
    assert a["network"] == OPEN
    got = set_network(client, a["slug"], {"mode": "allow", "allow": ["Example.COM:443", "203.0.113.0/24",
                                                                      "198.51.100.7"]})
    assert got == {"mode": "allow", "allow": ["example.com:443", "203.0.113.0/24", "198.51.100.7"]}
    assert client.get(f"/agents/{a['slug']}").json()["network"] == got
    assert set_network(client, a["slug"], {"mode": "allow"}) == {"mode": "allow", "allow": []}
    assert set_network(client, a["slug"], None) == OPEN
    r = client.post("/agents", json={"name": "egress " + uuid.uuid4().hex[:8], "source_type": "local",
                                     "network": {"mode": "allow", "allow": ["203.0.113.9:80"]}})
    assert r.status_code == 201, r.text
    assert r.json()["network"] == {"mode": "allow", "allow": ["203.0.113.9:80"]}


@pytest.mark.parametrize("network, loc", [
    ({"mode": "allow", "allow": ["10.0.0.0/33"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["203.0.113.0/24", "300.1.2.3"]}, ["body", "network", "allow", 1]),
    ({"mode": "allow", "allow": ["203.0.113.1/24"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["10.0.0.0/8"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["192.168.1.5:80"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["127.0.0.1"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["169.254.169.254"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["example.com:0"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["example.com:70000"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["[2001:db8::1]:443"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["bad_name.com"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["a" * 64 + ".com"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": [("a" * 60 + ".") * 5 + "com"]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": [5]}, ["body", "network", "allow", 0]),
    ({"mode": "allow", "allow": ["203.0.113.%d" % i for i in range(65)]}, ["body", "network", "allow"]),
    ({"mode": "allow", "allow": "203.0.113.1"}, ["body", "network", "allow"]),
    ({"mode": "closed"}, ["body", "network", "mode"]),
    ({"allow": ["203.0.113.1"]}, ["body", "network", "mode"]),
    ({"mode": "open", "allow": ["203.0.113.1"]}, ["body", "network", "allow"]),
    ({"mode": "allow", "deny": []}, ["body", "network", "deny"]),
    ("allow", ["body", "network"]),
])
def test_bad_network_is_422_naming_the_field(client, make_agent, network, loc):
    a = make_agent()
    r = client.patch(f"/agents/{a['slug']}", json={"network": network})
    assert_422(r, tuple(loc))
    assert client.get(f"/agents/{a['slug']}").json()["network"] == OPEN
    r = client.post("/agents", json={"name": "e " + uuid.uuid4().hex[:8], "source_type": "local",
                                     "network": network})
    assert r.status_code == 422, r.text


# ---- enforced in the sandbox ------------------------------------------------

@needs_runner
def test_open_agent_reaches_every_test_server(client, boxes):
    """The premise of the tests below: the servers are reachable at all."""
    slug = deployed_agent(client, AGENT_JS)["slug"]
    got = run(client, slug, [["connect", boxes["A"], 8080], ["connect", boxes["B"], 8080]])
    assert got == ["ok:A", "ok:B"]


@needs_runner
def test_allowed_server_is_reached_and_another_refused_at_once(client, boxes):
    slug = deployed_agent(client, AGENT_JS, network={"mode": "allow",
                                                     "allow": [f"{boxes['A']}:8080"]})["slug"]
    got = run(client, slug, [["connect", boxes["A"], 8080], ["connect", boxes["B"], 8080],
                             ["lookup", "example.com"]])
    assert got[0] == "ok:A"
    assert got[1] == "error:ECONNREFUSED"     # never a timeout
    assert got[2].startswith("error:")        # no name resolves but the listed ones


@needs_runner
def test_host_name_entry_is_pinned_to_the_runners_answer(client, boxes, host_names):
    slug = deployed_agent(client, AGENT_JS, network={"mode": "allow",
                                                     "allow": [f"{HOSTS_NAME}:8080"]})["slug"]
    got = run(client, slug, [["lookup", HOSTS_NAME], ["connect", HOSTS_NAME, 8080],
                             ["connect", boxes["A"], 8080], ["lookup", PRIVATE_NAME]])
    assert got[0] == boxes["B"]
    assert got[1] == "ok:B"
    assert got[2] == "error:ECONNREFUSED"
    assert got[3].startswith("error:")


@needs_runner
def test_private_range_refused_unless_the_operator_allows_it(client, boxes, host_names):
    """The API refuses a private entry (test_bad_network_is_422_naming_the_field);
    here the entry is stored as an API with egress_allow_private would store
    it, and a name resolving into the range is listed too: the runner
    without the setting refuses both, with it reaches them."""
    a = deployed_agent(client, AGENT_JS)
    net = {"mode": "allow", "allow": [f"{boxes['P']}:8080", PRIVATE_NAME]}
    db_query("UPDATE agents SET network = '%s' WHERE id = '%s'" % (json.dumps(net), a["id"]))
    steps = [["connect", boxes["P"], 8080], ["lookup", PRIVATE_NAME], ["connect", boxes["A"], 8080]]
    got = run(client, a["slug"], steps)
    assert got[0] == "error:ECONNREFUSED" and got[1].startswith("error:") and got[2] == "error:ECONNREFUSED"
    with runner_with(egress_allow_private="1"):
        got = run(client, a["slug"], steps)
    assert got == ["ok:P", boxes["P"], "error:ECONNREFUSED"]


@needs_runner
def test_changed_rules_reach_sessions_and_warm_processes(client, boxes):
    """Rules are fixed when a sandbox is made: a session's sandbox and the
    agent's warm processes made under the old rules are not used again."""
    slug = deployed_agent(client, AGENT_JS, min_warm=1,
                          network={"mode": "allow", "allow": [f"{boxes['A']}:8080"]})["slug"]
    both = [["connect", boxes["A"], 8080], ["connect", boxes["B"], 8080]]
    assert run(client, slug, both, session_id="s1") == ["ok:A", "error:ECONNREFUSED"]
    assert run(client, slug, both) == ["ok:A", "error:ECONNREFUSED"]
    time.sleep(1)  # lets the warm process of the old rules start (not asserted on)
    set_network(client, slug, {"mode": "allow", "allow": [f"{boxes['B']}:8080"]})
    assert run(client, slug, both, session_id="s1") == ["error:ECONNREFUSED", "ok:B"]
    assert run(client, slug, both) == ["error:ECONNREFUSED", "ok:B"]
    set_network(client, slug, None)
    assert run(client, slug, both) == ["ok:A", "ok:B"]


@needs_runner
def test_model_gateway_is_reachable_with_an_empty_allow_list(client):
    from test_model_gateway import OPERATOR_KEY, Provider  # the same provider stand-in
    from http.server import ThreadingHTTPServer
    import threading
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with runner_with(model_gateway="on", model_key_value=OPERATOR_KEY,
                         model_gateway_upstream=f"http://127.0.0.1:{srv.server_address[1]}"):
            slug = deployed_agent(client, AGENT_JS, network={"mode": "allow", "allow": []})["slug"]
            got = run(client, slug, [["gateway"], ["connect", "1.1.1.1", 443]])
    finally:
        srv.shutdown()
        srv.server_close()
    assert got == ["ok:200", "error:ECONNREFUSED"]
