"""A redeploy that does not fit the limits (issue 27) fails naming the limit's
setting, and the agent's previous image keeps answering its calls: the new
image is only switched to once it is built, and the failed redeploy leaves
the agent `active` on the old one, its status_message saying why (while the
redeploy runs the agent is `deploying`, and API.md's 409 holds).
Both limits are real ones of a runner restarted with them lowered: the image
(image_max_mb) and the build's disk (build_disk_mb)."""
import json

import pytest

from agent_code import needs_runner
from test_deploy import assert_active, deploy, deploy_and_wait, local_agent, tgz, upload, wait_deployed
from test_deploy_faults import runner_with
from test_deploys import deploys

pytestmark = needs_runner

MANIFEST = '{"name": "Redeployed", "version": "1.0.0", "entrypoint": "index.js", "runtime": "node"}'


def version(tag, postinstall=None):
    js = (f"let d = ''; process.stdin.on('data', c => d += c)"
          f".on('end', () => process.stdout.write('{tag}: ' + d));\n")
    files = [("agent.json", "f", MANIFEST), ("index.js", "f", js)]
    if postinstall:
        pkg = {"name": "redeployed", "version": "1.0.0", "private": True,
               "dependencies": {"is-number": "7.0.0"}, "scripts": {"postinstall": postinstall}}
        files.append(("package.json", "f", json.dumps(pkg)))
    return tgz(files)


def say(client, agent):
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "hi"}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()["response_content"]


@pytest.mark.parametrize("limit,value,postinstall,message", [
    ("image_max_mb", 1, "sleep 3 && dd if=/dev/zero of=big bs=1M count=2 status=none",
     "The built image is larger than 1 MB (image_max_mb)"),
    ("build_disk_mb", 64, "sleep 3 && dd if=/dev/zero of=big bs=1M count=100 status=none",
     "Dependency installation failed: the build's disk is full (64 MB, build_disk_mb)"),
])
def test_a_redeploy_over_a_limit_fails_and_the_previous_image_keeps_serving(
        client, limit, value, postinstall, message):
    agent = local_agent(client, version("v1"))
    assert_active(deploy_and_wait(client, agent))
    assert say(client, agent) == "v1: hi"
    r = upload(client, agent, version("v2", postinstall))
    assert r.status_code == 200, r.text
    with runner_with(**{limit: value}):
        deploy(client, agent["slug"])
        # While the new image is being built (its postinstall sleeps first): the contract's 409.
        r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "hi"}, timeout=120)
        assert r.status_code == 409 and "deploying" in r.json()["detail"], r.text
        rec = wait_deployed(client, agent["slug"], 240)
        assert rec["status"] == "active", rec
        assert rec["status_message"].startswith(message), rec["status_message"]
        assert rec["status_message"].endswith("the previous deploy keeps serving"), rec
        assert say(client, agent) == "v1: hi"  # the previous image answers
    assert say(client, agent) == "v1: hi"  # also from the runner with its usual limits
    newest, previous = deploys(client, agent["slug"]).json()[:2]
    assert newest["status"] == "failed" and newest["active"] is False
    assert newest["error"].startswith(message)
    assert previous["status"] == "succeeded" and previous["active"] is True
