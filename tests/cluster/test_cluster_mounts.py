"""A taken-over agent keeps its bucket mounts: the runner that adopts its image
from the file store plans its mounts as a deploy does, so the agent reads its
bucket (s3rver on loopback, started and stopped by PID here) on the live
runner after its own runner was killed. When the plan cannot be made (its
credentials unreadable) the call fails naming the mount rather than running
without it, and the next call, once they are set again, mounts it."""
import json
import os
import signal
import uuid

import pytest

from conftest import BUILD, kit, new_agent, pid_of, sql, wait_until
from s3server import KEY, SECRET, S3rver
from test_cluster_faults import holder_host

import agent_code

S3_TOOL = os.path.join(BUILD, "tests", "unit", "s3_tool")

# The prompt is a path; the answer its text, or the error's code.
CAT_JS = r"""
const fs = require('fs');
const chunks = [];
process.stdin.on('data', c => chunks.push(c));
process.stdin.on('end', () => {
  let out;
  try { out = fs.readFileSync(Buffer.concat(chunks).toString(), 'utf8'); }
  catch (e) { out = 'ERR ' + e.code; }
  process.stdout.write(JSON.stringify(out));
});
"""


def agent_with_mount(client, s3):
    r = client.post("/buckets", json={"name": "cl " + uuid.uuid4().hex[:6], "provider": "s3",
                                      "bucket_name": s3.bucket, "endpoint_url": s3.endpoint})
    assert r.status_code == 201, r.text
    bucket = r.json()["slug"]
    r = client.post(f"/buckets/{bucket}/credentials", json={"access_key_id": KEY,
                                                            "secret_access_key": SECRET})
    assert r.status_code == 200, r.text
    slug = new_agent(client, CAT_JS)
    r = client.post(f"/agents/{slug}/mounts", json={"bucket_slug": bucket, "mount_path": "/mnt/data",
                                                    "read_only": True})
    assert r.status_code == 201, r.text
    return agent_code.deploy(client, slug), bucket


@pytest.mark.slow
def test_taken_over_agent_reads_its_mounted_bucket(user):
    s3 = S3rver("agent-data")
    agent = None
    dead = None
    try:
        s3.put(S3_TOOL, "hello.txt", "hello from the bucket")
        agent, bucket = agent_with_mount(user, s3)
        slug = agent["slug"]
        r = user.post(f"/agents/{slug}/invoke", json={"prompt": "/mnt/data/hello.txt"})
        assert r.status_code == 200, r.text
        assert json.loads(r.json()["response_content"]) == "hello from the bucket"

        dead = holder_host(agent["id"])
        live = "b" if dead == "a" else "a"
        os.kill(pid_of(dead, "runner"), signal.SIGKILL)
        client = user.on(live)

        # Credentials the live runner cannot open (as if sealed with another
        # master key): no plan, so no call without the mount.
        sql(f"UPDATE buckets SET cred_sealed = 'not sealed' WHERE slug = '{bucket}'")

        # Refused with a 503 until the dead runner's heartbeat is old enough;
        # then the live runner takes the agent over.
        def call():
            r = client.post(f"/agents/{slug}/invoke", json={"prompt": "/mnt/data/hello.txt"})
            return None if r.status_code == 503 else [r]  # a 500 Response is falsy
        r = wait_until(call, 90, interval=1, what="the agent to move to the live runner")[0]
        assert r.status_code == 500, r.text
        assert "Bucket mount at /mnt/data" in r.json()["detail"], r.text
        assert "cannot be read" in r.json()["detail"], r.text

        # Set again: the next call plans the mount and reads the bucket.
        r = user.post(f"/buckets/{bucket}/credentials", json={"access_key_id": KEY,
                                                              "secret_access_key": SECRET})
        assert r.status_code == 200, r.text
        r = client.post(f"/agents/{slug}/invoke", json={"prompt": "/mnt/data/hello.txt"})
        assert r.status_code == 200, r.text
        assert json.loads(r.json()["response_content"]) == "hello from the bucket"
        assert holder_host(agent["id"]) == live
    finally:
        if dead:
            kit("start-host", dead)
        if agent:  # its rclone processes go with it
            user.delete(f"/agents/{agent['slug']}")
        s3.stop()
