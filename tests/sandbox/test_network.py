"""Network policy: outbound NAT only. Every target is a listener on this
machine (the host's own addresses, addresses put on a dummy interface, and a
peer network namespace standing for a private neighbour), never an outside
address -- except the npm registry, which deploys really need."""
import ipaddress
import json
import os
import socket
import subprocess
import tarfile
import threading
import time

import pytest

PORT = 18997  # not a port the test stack uses (18080-18081, 18180-18181)
BANNER = b"HOST-LISTENER\n"
DUMMY = "ahtest0"
DUMMY_ADDRS = ["10.77.0.1", "169.254.169.254", "172.16.77.1", "192.168.77.1", "100.64.77.1"]
PEER_NS, PEER_IF, PEER_HOST, PEER_ADDR = "ahtest-peer", "ahtp0", "10.77.1.1", "10.77.1.2"


def sh(*cmd, check=True):
    return subprocess.run(list(cmd), check=check, capture_output=True, text=True)


def host_addresses():
    out = sh("ip", "-j", "-4", "addr").stdout
    addrs = []
    for link in json.loads(out):
        if link["ifname"].startswith(("ahs", "ahtest", PEER_IF)):
            continue
        addrs += [a["local"] for a in link.get("addr_info", [])]
    return addrs


class Listener(threading.Thread):
    def __init__(self, addr, port=PORT):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((addr, port))
        self.sock.listen(16)
        self.hits = 0

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            c.sendall(BANNER)
            c.close()


@pytest.fixture(scope="module")
def targets():
    """Listeners on the host's addresses, a dummy interface and a peer netns."""
    sh("ip", "link", "del", DUMMY, check=False)
    sh("ip", "netns", "del", PEER_NS, check=False)
    # A veth pair stands in for a dummy interface: this kernel has no dummy
    # module. Its addresses are the host's own, as on a cloud host's NIC.
    sh("ip", "link", "add", DUMMY, "type", "veth", "peer", "name", DUMMY + "p")
    peer_srv = None
    listeners = []
    try:
        for a in DUMMY_ADDRS:
            sh("ip", "addr", "add", a + "/32", "dev", DUMMY)
        sh("ip", "link", "set", DUMMY, "up")
        sh("ip", "netns", "add", PEER_NS)
        sh("ip", "link", "add", PEER_IF, "type", "veth", "peer", "name", "eth0", "netns", PEER_NS)
        sh("ip", "addr", "add", PEER_HOST + "/30", "dev", PEER_IF)
        sh("ip", "link", "set", PEER_IF, "up")
        sh("ip", "-n", PEER_NS, "addr", "add", PEER_ADDR + "/30", "dev", "eth0")
        sh("ip", "-n", PEER_NS, "link", "set", "eth0", "up")
        sh("ip", "-n", PEER_NS, "link", "set", "lo", "up")
        peer_srv = subprocess.Popen(
            ["ip", "netns", "exec", PEER_NS, "/usr/bin/python3", "-c",
             "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
             f"s.bind(('0.0.0.0',{PORT}));s.listen(8)\n"
             f"while True:\n c,_=s.accept();c.sendall({BANNER!r});c.close()\n"])
        addrs = sorted(set(host_addresses() + DUMMY_ADDRS))
        for a in addrs:
            l = Listener(a)
            l.start()
            listeners.append(l)
        time.sleep(0.3)
        # The listeners work from the host itself: a failure inside is the policy.
        for a in addrs + [PEER_ADDR]:
            with socket.create_connection((a, PORT), timeout=2) as c:
                assert c.recv(100) == BANNER, a
        yield addrs + [PEER_ADDR]
    finally:
        for l in listeners:
            l.sock.close()
        if peer_srv:
            peer_srv.kill()
            peer_srv.wait()
        sh("ip", "link", "del", DUMMY, check=False)
        sh("ip", "link", "del", PEER_IF, check=False)
        sh("ip", "netns", "del", PEER_NS, check=False)


PROBE = """
const net = require('net');
const targets = %s, res = {};
let left = targets.length;
for (const t of targets) {
  const s = net.connect({host: t, port: %d, timeout: 1500});
  let got = '';
  s.on('data', d => got += d);
  s.on('end', () => { res[t] = 'banner:' + got.trim(); done(); });
  s.on('error', e => { res[t] = e.code; done(); });
  s.on('timeout', () => { res[t] = 'timeout'; s.destroy(); done(); });
}
function done() { if (--left === 0) console.log(JSON.stringify(res)); }
"""


def probe(sandbox, targets, env=None):
    r = sandbox.run(PROBE % (json.dumps(targets), PORT), env=env)
    assert r["exit_code"] == 0, r
    return json.loads(r["stdout"])


def test_no_route_to_host_private_ranges_or_metadata(sandbox, targets):
    res = probe(sandbox, targets + ["127.0.0.1"])
    for t, v in res.items():
        assert not v.startswith("banner"), (t, v)
    # 127.0.0.1 inside is the sandbox's own loopback, where nothing listens.
    assert res["127.0.0.1"] == "ECONNREFUSED"


def test_control_host_addresses_reachable_when_allowed(sandbox, targets):
    """Proves the probe can see a listener: with the test-only switch the host's
    own addresses answer, while the private neighbour stays unreachable."""
    env = {"AGENTHOST_SANDBOX_ALLOW_LOOPBACK_EGRESS": "1"}
    own = [a for a in host_addresses() if not a.startswith("127.")]
    res = probe(sandbox, ["169.254.169.254", PEER_ADDR] + own, env=env)
    for a in own + ["169.254.169.254"]:
        assert res[a] == "banner:HOST-LISTENER", (a, res)
    assert not res[PEER_ADDR].startswith("banner")


def test_only_the_configured_resolver_answers_dns(sandbox, targets):
    """A DNS server on another private address is not reachable on port 53."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("10.77.0.1", 53))
    srv.settimeout(0.1)
    try:
        r = sandbox.run("""
const dgram = require('dgram'); const s = dgram.createSocket('udp4');
s.on('message', () => { console.log('answered'); process.exit(0); });
s.send(Buffer.from('hello'), 53, '10.77.0.1');
setTimeout(() => { console.log('silence'); process.exit(0); }, 1500);
""")
        try:
            srv.recvfrom(100)
            got = True
        except socket.timeout:
            got = False
    finally:
        srv.close()
    assert r["stdout"].strip() == "silence" and not got


def test_no_ipv6(sandbox, targets):
    res = json.loads(sandbox.run("""
const net = require('net');
const s = net.connect({host: 'fd00::2', port: 22, timeout: 1500});
s.on('connect', () => { console.log('"connected"'); process.exit(0); });
s.on('error', e => { console.log(JSON.stringify(e.code)); process.exit(0); });
s.on('timeout', () => { console.log('"timeout"'); process.exit(0); });
""")["stdout"])
    assert res in ("ENETUNREACH", "EADDRNOTAVAIL", "EHOSTUNREACH", "timeout"), res


def test_no_inbound_connection_into_a_sandbox(sandbox):
    before = {l["ifname"] for l in json.loads(sh("ip", "-j", "link").stdout)}
    sandbox.write("agent.js", """
require('net').createServer(c => { c.end('SANDBOX\\n'); }).listen(18081, '0.0.0.0');
setTimeout(() => process.exit(0), 3000);
""")
    p = subprocess.Popen(
        ["/usr/bin/env"] + [f"{k}={v}" for k, v in sandbox.env.items()] +
        [sandbox_cli(), "--image", sandbox.image, "--", "/usr/bin/node", "agent.js"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)
        peers = []
        for link in json.loads(sh("ip", "-j", "-4", "addr").stdout):
            if link["ifname"].startswith("ahs") and link["ifname"] not in before:
                for a in link.get("addr_info", []):
                    peers.append(str(ipaddress.ip_address(a["local"]) + 1))
        assert peers, "no sandbox veth found"
        for a in peers:
            with pytest.raises(OSError):
                socket.create_connection((a, 18081), timeout=1).recv(10)
    finally:
        p.communicate(timeout=30)


def sandbox_cli():
    from conftest import CLI
    return CLI


def test_dns_and_the_npm_registry_work(sandbox):
    try:
        socket.getaddrinfo("registry.npmjs.org", 443)
    except OSError:
        pytest.skip("this machine cannot resolve registry.npmjs.org")
    # A host behind a TLS-inspecting proxy trusts an extra CA; so must node.
    ca = os.environ.get("NODE_EXTRA_CA_CERTS")
    args = ["--env", "NODE_EXTRA_CA_CERTS=" + ca] if ca and ca.startswith("/etc/ssl/") else []
    r = sandbox.run(args=args, js="""
require('https').get('https://registry.npmjs.org/left-pad', r => {
  console.log(r.statusCode); process.exit(0);
}).on('error', e => { console.log(e.code); process.exit(0); });
""")
    assert r["stdout"].strip() == "200", r


def test_a_build_installs_with_network_and_writes_nothing_on_the_host(sandbox, tmp_path):
    """The deploy use: the project as /app's lower layer, npm install with
    network; what npm wrote is read back out of the sandbox (as tar on stdout)
    and none of it landed in the host's project directory."""
    try:
        socket.getaddrinfo("registry.npmjs.org", 443)
    except OSError:
        pytest.skip("this machine cannot resolve registry.npmjs.org")
    work = tmp_path / "work"
    work.mkdir()
    (work / "package.json").write_text(
        '{"name":"t","version":"1.0.0","dependencies":{"left-pad":"1.3.0"}}')
    ca = os.environ.get("NODE_EXTRA_CA_CERTS")
    env = ["--env", "npm_config_cache=/tmp/.npm"]
    if ca and ca.startswith("/etc/ssl/"):
        env += ["--env", "NODE_EXTRA_CA_CERTS=" + ca]
    script = ("/usr/bin/npm install --omit=dev --no-audit --no-fund >&2 && "
              "/usr/bin/tar -C /app -cf - node_modules/left-pad/package.json")
    out = tmp_path / "out.tar"
    p = sandbox.cli(["--image", str(work), "--build", "--timeout", "120000",
                     "--stdout-file", str(out), *env], ["/bin/sh", "-c", script], timeout=170)
    r = json.loads(p.stdout.decode().splitlines()[-1])
    assert r["exit_code"] == 0, r
    with tarfile.open(out) as t:
        assert t.getnames() == ["node_modules/left-pad/package.json"]
    assert sorted(os.listdir(work)) == ["package.json"]


# Leaves a socket in TIME_WAIT (LEAVE=1: a local connection this side closes
# first) and reports the slot (eth0's address), the network namespace and the
# sockets it found at start.
SLOT_PROBE = """
const fs = require('fs'), net = require('net');
const ip = require('os').networkInterfaces().eth0[0].address;
const ns = fs.readlinkSync('/proc/self/ns/net');
const seen = {};
for (const f of ['tcp', 'udp', 'raw', 'unix'])
  seen[f] = fs.readFileSync('/proc/net/' + f, 'utf8').trim().split('\\n').length - 1;
const report = () => { console.log(JSON.stringify({ip, ns, seen})); process.exit(0); };
if (process.env.LEAVE !== '1') report();
const srv = net.createServer(c => c.on('end', () => c.end())).listen(0, '127.0.0.1', () => {
  const c = net.connect(srv.address().port, '127.0.0.1', () => c.end());
  c.on('close', report);
});
"""


def test_a_slots_network_namespace_is_reused_only_when_it_holds_no_socket(sandbox):
    """Sandboxes in one slot share its network namespace while they leave no
    socket behind; one that leaves a TIME_WAIT gets the next one a fresh
    namespace, where nothing of it shows in /proc/net."""
    sandbox.write("agent.js", SLOT_PROBE)

    def runs(leave):
        p = sandbox.cli(["--image", sandbox.image, "--repeat", "6", "--env", f"LEAVE={leave}"],
                        ["/usr/bin/node", "agent.js"])
        assert p.returncode == 0, p.stderr.decode(errors="replace")
        out = [json.loads(json.loads(l)["stdout"]) for l in p.stdout.decode().splitlines()
               if l.startswith("{")]
        assert len(out) == 6
        return out

    clean = runs(0)
    by_slot = {}
    for r in clean:
        assert r["seen"] == {"tcp": 0, "udp": 0, "raw": 0, "unix": 0}, r
        by_slot.setdefault(r["ip"], set()).add(r["ns"])
    assert any(len(nss) == 1 and sum(r["ip"] == ip for r in clean) > 1
               for ip, nss in by_slot.items()), clean

    # (Namespace numbers are recycled once one is freed: only what a run
    # sees can tell whether it got the last one's namespace.)
    dirty = runs(1)
    assert len({r["ip"] for r in dirty}) < 6, "no slot was used twice: nothing tested"
    for r in dirty:
        assert r["seen"] == {"tcp": 0, "udp": 0, "raw": 0, "unix": 0}, r
