"""Images share identical files (issue 27, lib/deploy/dedupe.c): two agents whose
images hold the same bytes hold one inode, linked from the host-wide store
under data_dir; deleting one agent leaves the other's file whole and working,
and the store entry goes with the last image that links it. (The SDK agent's
400 MB binary is the case this is for; test_sdk_agent.py covers a redeploy.)"""
import os
import uuid

from agent_code import needs_runner
from test_deploy import DATA, assert_active, deploy_and_wait, local_agent, project, tgz

pytestmark = needs_runner

STORE = os.path.join(DATA, "store")

READ_JS = r"""
const fs = require('fs');
process.stdin.on('data', () => {}).on('end', () => {
  const b = fs.readFileSync('big.bin');
  let w = 'no';
  try { fs.writeFileSync('big.bin', 'changed'); w = fs.readFileSync('big.bin', 'utf8'); } catch (e) { w = e.code; }
  process.stdout.write(`${b.length} ${b.subarray(0, 8).toString()} ${w}`);
});
"""


def image_file(agent_id, name):
    images = os.path.join(DATA, "images", agent_id)
    job = max((d for d in os.listdir(images) if "." not in d), key=int)
    return os.path.join(images, job, name)


def store_entries():
    found = []
    for dirpath, _, files in os.walk(STORE):
        found += [os.path.join(dirpath, f) for f in files]
    return found


def test_identical_files_are_one_inode_and_outlive_one_agent(client):
    big = "shared: " + uuid.uuid4().hex + "x" * 200000  # unique to this test run
    data = tgz([e if e[0] != "index.js" else ("index.js", "f", READ_JS) for e in project()] +
               [("big.bin", "f", big)])
    a = local_agent(client, data)
    b = local_agent(client, data)
    assert_active(deploy_and_wait(client, a))
    assert_active(deploy_and_wait(client, b))

    fa, fb = os.stat(image_file(a["id"], "big.bin")), os.stat(image_file(b["id"], "big.bin"))
    assert (fa.st_ino, fa.st_dev) == (fb.st_ino, fb.st_dev), "two copies of the same bytes"
    assert fa.st_nlink == 3  # both images and the store
    assert not fa.st_mode & 0o222 and fa.st_uid == 0
    entry = [p for p in store_entries() if os.stat(p).st_ino == fa.st_ino]
    assert len(entry) == 1

    # Read-only in the sandbox: the agent reads the bytes and cannot write them.
    r = client.post(f"/agents/{b['slug']}/invoke", json={"prompt": "x"})
    assert r.status_code == 200, r.text
    assert r.json()["response_content"] == f"{len(big)} shared:  EACCES", r.text
    with open(image_file(a["id"], "big.bin")) as f:
        assert f.read() == big  # the shared inode did not change

    # Deleting one agent leaves the other's file, and the agent, whole.
    assert client.delete(f"/agents/{a['slug']}").status_code == 204
    with open(image_file(b["id"], "big.bin")) as f:
        assert f.read() == big
    assert os.path.exists(entry[0])
    r = client.post(f"/agents/{b['slug']}/invoke", json={"prompt": "x"})
    assert r.status_code == 200 and r.json()["response_content"].startswith(f"{len(big)} "), r.text

    # The last one takes the store's entry with it.
    assert client.delete(f"/agents/{b['slug']}").status_code == 204
    assert not os.path.exists(entry[0])
