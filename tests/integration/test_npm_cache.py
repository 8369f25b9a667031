"""The host-wide npm download cache (issue 27, lib/deploy/npm_cache.c): a
tarball one tenant's build downloaded is not downloaded again by another
tenant's build with the same lockfile, and nothing a build does changes what
another build gets from the cache: the cache only holds files the runner
checked against their SHA-512 name, a build sees them read-only (its writes go
to its own layer), and npm checks a cached tarball against the lockfile's
integrity (a corrupted entry is downloaded again, never installed).

Uses is-number 7.0.0 from the npm registry (a 3 KB tarball), with a lockfile
that has `resolved` (npm's default)."""
import base64
import hashlib
import json
import os
import uuid

import pytest

from agent_code import needs_runner
from conftest import new_client
from test_deploy import DATA, assert_active, deploy_and_wait, local_agent, tgz
from test_deploys import deploys, logs

pytestmark = needs_runner

CACHE = os.path.join(DATA, "npm-cache")
INTEGRITY = ("sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9c"
             "GvNp6NZWZUBlbGXYxxng==")
HEX = base64.b64decode(INTEGRITY[7:]).hex()
ENTRY = os.path.join(CACHE, "content-v2", "sha512", HEX[:2], HEX[2:4], HEX[4:])
KEPT = "downloaded tarball(s) checked and kept for later builds"

MANIFEST = '{"name": "Cache agent", "version": "1.0.0", "entrypoint": "index.js", "runtime": "node"}'
INDEX_JS = ("const isNumber = require('is-number');\n"
            "let d = ''; process.stdin.on('data', c => d += c)"
            ".on('end', () => process.stdout.write(isNumber(d.trim()) ? 'number' : 'text'));\n")


def package(scripts=None):
    pkg = {"name": "cache-agent", "version": "1.0.0", "private": True,
           "dependencies": {"is-number": "7.0.0"}}
    if scripts:
        pkg["scripts"] = scripts
    lock = {"name": "cache-agent", "version": "1.0.0", "lockfileVersion": 3, "requires": True,
            "packages": {"": {"name": "cache-agent", "version": "1.0.0",
                              "dependencies": {"is-number": "7.0.0"}},
                         "node_modules/is-number": {
                             "version": "7.0.0",
                             "resolved": "https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz",
                             "integrity": INTEGRITY, "engines": {"node": ">=0.12.0"}}}}
    return [("agent.json", "f", MANIFEST), ("index.js", "f", INDEX_JS),
            ("package.json", "f", json.dumps(pkg)), ("package-lock.json", "f", json.dumps(lock))]


def deploy_log(client, agent):
    rec = deploy_and_wait(client, agent)
    assert_active(rec)
    newest = deploys(client, agent["slug"]).json()[0]
    return logs(client, agent["slug"], newest["id"])["log"]


def works(client, agent):
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "42"}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == "number"


def image_file(agent_id, name):
    images = os.path.join(DATA, "images", agent_id)
    job = max((d for d in os.listdir(images) if "." not in d), key=int)
    return os.path.join(images, job, name)


def sha512_hex(path):
    with open(path, "rb") as f:
        return hashlib.sha512(f.read()).hexdigest()


@pytest.fixture
def cached(client):
    """is-number's tarball in the host cache, put there by a first build."""
    if not os.path.exists(ENTRY):
        agent = local_agent(client, tgz(package()))
        log = deploy_log(client, agent)
        assert "1 " + KEPT in log, log
    st = os.stat(ENTRY)
    assert st.st_uid == 0 and not st.st_mode & 0o222
    assert sha512_hex(ENTRY) == HEX
    return ENTRY


def test_another_tenants_build_takes_the_tarball_from_the_cache(cached):
    other = new_client()
    agent = local_agent(other, tgz(package()))
    log = deploy_log(other, agent)
    # npm wrote no tarball into its cache: it downloaded none.
    assert "npm cache:" not in log, log
    works(other, agent)
    # The image holds the package, not the cache.
    assert os.path.exists(image_file(agent["id"], "node_modules/is-number/index.js"))
    assert not os.path.exists(image_file(agent["id"], ".agenthost-npm-cache"))


# Runs in the build as the root package's postinstall: tries to change the
# cached tarball it was given, and to add one under a name that is not its
# hash and one that is.
POISON_JS = r"""
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const root = path.join(process.env.npm_config_cache, '_cacache', 'content-v2', 'sha512');
const put = (hex, data) => {
  const p = path.join(root, hex.slice(0, 2), hex.slice(2, 4), hex.slice(4));
  fs.mkdirSync(path.dirname(p), { recursive: true });
  try { fs.chmodSync(p, 0o644); } catch (e) {}
  fs.writeFileSync(p, data);
};
const gz = s => Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from(s)]);  // as tarballs start
put(process.argv[2], gz('poisoned is-number'));
put('ab'.repeat(64), gz('not the bytes of this name'));
const honest = gz('honest bytes ' + process.argv[3]);
put(crypto.createHash('sha512').update(honest).digest('hex'), honest);
"""


def test_install_scripts_cannot_change_what_other_builds_get(client, cached):
    mark = uuid.uuid4().hex
    honest = hashlib.sha512(b"\x1f\x8b" + f"honest bytes {mark}".encode()).hexdigest()
    agent = local_agent(client, tgz(package({"postinstall": f"node poison.js {HEX} {mark}"}) +
                                    [("poison.js", "f", POISON_JS)]))
    log = deploy_log(client, agent)
    assert "1 already kept, 1 refused" in log, log
    assert sha512_hex(cached) == HEX  # the shared tarball did not change
    bogus = os.path.join(CACHE, "content-v2", "sha512", "ab", "ab", "ab" * 62)
    assert not os.path.exists(bogus)
    # Bytes named by their own hash are kept: only a lockfile asking for that
    # hash ever gets them.
    assert os.path.exists(os.path.join(CACHE, "content-v2", "sha512", honest[:2], honest[2:4],
                                       honest[4:]))
    # And another tenant's build still gets the real package.
    other = new_client()
    b = local_agent(other, tgz(package()))
    assert "npm cache:" not in deploy_log(other, b)
    works(other, b)


def test_a_corrupted_entry_is_downloaded_again_never_installed(client, cached):
    genuine = open(cached, "rb").read()
    os.chmod(cached, 0o644)
    try:
        with open(cached, "wb") as f:  # what a bug or a bad disk could leave
            f.write(b"corrupted" + genuine[9:])
        other = new_client()
        agent = local_agent(other, tgz(package()))
        log = deploy_log(other, agent)
        # npm saw the mismatch with the lockfile's integrity and downloaded it.
        assert "1 already kept" in log, log
        works(other, agent)
        assert sha512_hex(cached) == HEX  # and the checked download replaced it
    finally:
        if sha512_hex(cached) != HEX:
            os.chmod(cached, 0o644)
            with open(cached, "wb") as f:
                f.write(genuine)
            os.chmod(cached, 0o444)
            os.utime(cached, (1, 1))  # as the runner dates what it keeps


def test_without_a_lockfile_the_tarball_comes_from_the_cache_too(cached):
    """npm resolves the version from the registry (its metadata is never
    shared) and then asks the cache for the integrity the registry gave."""
    other = new_client()
    agent = local_agent(other, tgz([e for e in package() if e[0] != "package-lock.json"]))
    log = deploy_log(other, agent)
    assert "npm install" in log and "npm cache:" not in log, log
    works(other, agent)
