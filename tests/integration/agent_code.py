"""Helpers for tests that really run agents: tiny Node projects packed as the
tarball `PUT /agents/{slug}/code` takes, deployed through the API, and a check
that the runner is there to run them. Used by test_invoke.py and test_usage.py."""
import io
import json
import os
import socket
import tarfile
import time
import uuid
from decimal import ROUND_CEILING, Decimal

import pytest

VAR = os.environ.get("AGENTHOST_VAR", "")
CONFIG = os.environ.get("AGENTHOST_CONFIG", os.path.join(VAR, "agenthost.conf"))

# Echoes stdin to stdout byte for byte.
ECHO_JS = """
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => process.stdout.write(Buffer.concat(chunks)));
"""

# Reads the whole prompt, then acts on it: "!cmd arg" runs a command, anything
# else is echoed. Commands write and read state in /tmp and the working
# directory (/app), sleep, crash, print binary or nothing, or dump the env.
TOOL_JS = r"""
const fs = require('fs');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  const p = Buffer.concat(chunks).toString('utf8');
  const [cmd, ...rest] = p.split(' ');
  const arg = rest.join(' ');
  const read = f => { try { return fs.readFileSync(f, 'utf8'); } catch (e) { return 'none'; } };
  switch (cmd) {
  case '!write':
    fs.writeFileSync('/tmp/state.txt', arg);
    fs.writeFileSync('state.txt', arg);
    process.stdout.write('ok');
    break;
  case '!read':
    process.stdout.write(read('/tmp/state.txt') + '|' + read('state.txt'));
    break;
  case '!append': {
    /* read, pause, write: concurrent calls in one session would lose updates */
    const n = parseInt(read('/tmp/count.txt'), 10) || 0;
    setTimeout(() => { fs.writeFileSync('/tmp/count.txt', String(n + 1)); process.stdout.write(String(n + 1)); }, 150);
    break;
  }
  case '!sleep':
    process.stdout.write('sleeping');
    setInterval(() => {}, 1000);
    break;
  case '!crash':
    process.stdout.write('partial output');
    process.stderr.write('stderr must stay in the runner log');
    process.exit(1);
    break;
  case '!binary':
    process.stdout.write(Buffer.from([0x61, 0xff, 0xfe, 0x00, 0x62, 0xe2, 0x82, 0x63, 0xc3, 0xa9]));
    break;
  case '!nothing':
    break;
  case '!env':
    process.stdout.write(JSON.stringify(process.env));
    break;
  case '!flood':
    process.stdout.write(Buffer.alloc(11 * 1024 * 1024, 0x78));
    break;
  default:
    process.stdout.write(p);
  }
});
"""

# Exits at once without reading stdin.
EARLY_JS = """
process.stdout.write('early');
process.exit(0);
"""


def tarball(files):
    """A .tar.gz (bytes) holding files {name: text}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def project(js):
    manifest = {"name": "test agent", "version": "1.0.0", "entrypoint": "index.js", "runtime": "node"}
    return tarball({"agent.json": json.dumps(manifest), "index.js": js})


def wait_status(client, slug, want=("active", "error"), timeout=90):
    deadline = time.time() + timeout
    while True:
        a = client.get(f"/agents/{slug}").json()
        if a["status"] in want:
            return a
        assert time.time() < deadline, f"agent still {a['status']}"
        time.sleep(0.2)


def deploy(client, slug):
    r = client.post(f"/agents/{slug}/deploy")
    assert r.status_code == 202, r.text
    a = wait_status(client, slug)
    assert a["status"] == "active", a
    return a


def deployed_agent(client, js=TOOL_JS, **fields):
    """Creates a local agent running js, deploys it and returns its record."""
    body = {"name": "inv " + uuid.uuid4().hex[:10], "source_type": "local"}
    body.update(fields)
    r = client.post("/agents", json=body)
    assert r.status_code == 201, r.text
    slug = r.json()["slug"]
    r = client.put(f"/agents/{slug}/code", data=project(js),
                   headers={"Content-Type": "application/gzip"})
    assert r.status_code == 200, r.text
    return deploy(client, slug)


def runner_available():
    """True when the stack's runner answers a ping on its socket."""
    path = config_get("runner_socket", os.path.join(VAR, "run", "runner.sock"))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(path)
            s.sendall(b'{"op":"ping"}\n')
            return b'"ok":true' in s.recv(4096).replace(b" ", b"")
    except OSError:
        return False


def config_get(key, default):
    """A key of the stack's configuration; AGENTHOST_<KEY> wins, as in the service."""
    if os.environ.get("AGENTHOST_" + key.upper()):
        return os.environ["AGENTHOST_" + key.upper()]
    try:
        with open(CONFIG) as f:
            for line in f:
                k, sep, v = line.partition("=")
                if sep and k.strip() == key:
                    return v.strip()
    except OSError:
        pass
    return default


needs_runner = pytest.mark.skipif(not runner_available(),
                                  reason="agenthost-runner is not running: agents cannot be run")


def prices():
    """(input, output) USD per million tokens, as the stack is configured."""
    return (Decimal(config_get("price_input_per_mtok", "3.00")),
            Decimal(config_get("price_output_per_mtok", "15.00")))


def cost(input_tokens, output_tokens):
    pin, pout = prices()
    return (input_tokens * pin + output_tokens * pout) / Decimal(1000000)


def cache_prices():
    """(cache write, 1-hour cache write, cache read) USD per million tokens: as
    configured, else 1.25 x, 2 x and 0.1 x the input price rounded up to the
    micro-dollar."""
    pin, _ = prices()

    def price(key, times):
        default = (pin * Decimal(times)).quantize(Decimal("0.000001"), rounding=ROUND_CEILING)
        return Decimal(config_get(key, default))
    return (price("price_cache_write_per_mtok", "1.25"),
            price("price_cache_write_1h_per_mtok", "2"),
            price("price_cache_read_per_mtok", "0.1"))


def model_cost(input_tokens, output_tokens, cache_write=0, cache_read=0, cache_write_1h=0):
    """The cost of a model gateway's counts: input_tokens is all input, the
    cache's parts included (cache_write_1h a part of cache_write), each part at
    its own price."""
    pin, pout = prices()
    pcw, pcw1h, pcr = cache_prices()
    return ((input_tokens - cache_write - cache_read) * pin +
            (cache_write - cache_write_1h) * pcw + cache_write_1h * pcw1h +
            cache_read * pcr + output_tokens * pout) / Decimal(1000000)


def exact(resp):
    """The response body with every JSON number that has a fraction as a Decimal."""
    return json.loads(resp.text, parse_float=Decimal)
