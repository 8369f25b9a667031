"""An installed dependency tree, reused across one user's agents and never
across users (issue 27, lib/deploy/reuse.c): a second agent of the same user
with the same lockfile takes the first one's node_modules without running
npm; another user's agent with the same lockfile runs npm and gets a tree
nothing of the first user's changed.

The first user's tree is altered in place (as the runner, standing for what
that user's own install output could hold): its own second agent gets that
tree (one tenant trusting its own output), the other user's does not.
Uses is-number 7.0.0 (test_npm_cache.py's package and lockfile)."""
import hashlib
import os

from agent_code import needs_runner
from conftest import VAR, new_client
from test_deploy import tgz
from test_npm_cache import deploy_log, image_file, local_agent, package

pytestmark = needs_runner

OWN = "dependencies unchanged from another of your agents' images"
ALTERED = "module.exports = () => false; // altered in place\n"


def answer(client, agent):
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "42"}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["response_content"]


def alter(path, text):
    """Replaces a read-only image file by a new inode with text (a rename:
    the store's shared inode is left as it was)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o444)
    os.rename(tmp, path)


def assert_kept_image_is_its_hash(client, agent):
    """The image kept for another runner (its node_modules frame and that
    frame's hash state linked from the other image) hashes to its name."""
    d = client.get(f"/agents/{agent['slug']}/deploys").json()[0]
    sha = d["image_sha256"]
    with open(os.path.join(VAR, "files", "blobs", sha[:2], sha), "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == sha


def test_same_users_agents_share_a_tree_other_users_never(client):
    first = local_agent(client, tgz(package()))
    assert "npm ci" in deploy_log(client, first)
    assert answer(client, first) == "number"
    alter(image_file(first["id"], "node_modules/is-number/index.js"), ALTERED)
    assert answer(client, first) == "text"

    # The same user's second agent: the first one's tree, no npm.
    second = local_agent(client, tgz(package()))
    log = deploy_log(client, second)
    assert OWN in log and "npm ci" not in log, log
    assert answer(client, second) == "text"
    a = os.stat(image_file(first["id"], "node_modules/is-number/index.js"))
    b = os.stat(image_file(second["id"], "node_modules/is-number/index.js"))
    assert (a.st_ino, a.st_dev) == (b.st_ino, b.st_dev)
    assert_kept_image_is_its_hash(client, second)

    # Another user, the same lockfile: npm runs, and the tree is npm's.
    other = new_client()
    theirs = local_agent(other, tgz(package()))
    log = deploy_log(other, theirs)
    assert "npm ci" in log and OWN not in log, log
    assert answer(other, theirs) == "number"
    with open(image_file(theirs["id"], "node_modules/is-number/index.js")) as f:
        assert "altered" not in f.read()


def test_a_tree_its_install_scripts_changed_is_never_reused(client):
    """A project whose own package.json has install scripts leaves no note:
    even the same user's next agent runs npm."""
    first = local_agent(client, tgz(package({"postinstall": "node -e 1"})))
    assert "npm ci" in deploy_log(client, first)
    second = local_agent(client, tgz(package()))
    log = deploy_log(client, second)
    assert OWN not in log and "npm ci" in log, log
