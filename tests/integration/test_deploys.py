"""Deploys as records and rollback (issue 29), against the real stack: the
deploy history paged like the invocation history, each deploy's source, image,
times and who started it, the build's output (npm and the project's install
scripts, redacted, the last 256 KiB), and POST /agents/{slug}/rollback to a
kept image without a rebuild, with every refusal changing nothing.

The projects here need no registry: a package.json without dependencies, whose
own install script writes the output."""
import json
import os
import subprocess
import time
import uuid

import pytest

from conftest import VAR, admin, db_query, new_client, wait_until
from test_deploy import (create_agent, deploy, deploy_and_wait, git, local_agent, make_repo, serve_git,
                         tgz, upload, wait_deployed)

MARK = "install-script-says-" + uuid.uuid4().hex[:8]



def assert_redeploy_failed(rec):
    """A redeploy that failed leaves the agent active on its previous image,
    its status_message saying so (runner/jobs.c)."""
    assert rec["status"] == "active", rec
    assert rec["status_message"].endswith("the previous deploy keeps serving"), rec

def version_js(v):
    return ("let d = ''; process.stdin.on('data', c => d += c)"
            f".on('end', () => process.stdout.write('{v}:' + d));\n")


def versioned(v, extra=()):
    return tgz([("agent.json", "f", '{"name": "v", "version": "1.0.0", "entrypoint": "index.js",'
                 ' "runtime": "node"}'), ("index.js", "f", version_js(v)), *extra])


def pkg_with_install(script):
    """A package.json whose own install script is `node -e script`."""
    return ("package.json", "f", json.dumps({"name": "x", "version": "1.0.0", "scripts": {
        "install": "node -e " + json.dumps(script)}}))


def deploys(client, slug, **params):
    r = client.get(f"/agents/{slug}/deploys", params=params)
    assert r.status_code == 200, r.text
    return r


def logs(client, slug, dep):
    r = client.get(f"/agents/{slug}/deploys/{dep}/logs")
    assert r.status_code == 200, r.text
    return r.json()


def invoke(client, slug, prompt="hi", **kw):
    r = client.post(f"/agents/{slug}/invoke", json={"prompt": prompt, **kw})
    assert r.status_code == 200, r.text
    return r.json()["response_content"]


def refs(sha):
    rows = db_query(f"SELECT refcount FROM file_blobs WHERE sha256 = '{sha}'")
    return int(rows[0][0]) if rows else 0


# ---- records and logs ------------------------------------------------------------

def test_a_deploy_is_recorded_with_its_output_redacted(client):
    secret = "s3cr3t-" + uuid.uuid4().hex
    script = f"console.log('{MARK}'); console.error('err-line ' + '{secret}')"
    agent = local_agent(client, versioned("v1", [pkg_with_install(script)]))
    r = client.post(f"/agents/{agent['slug']}/secrets", json={"key": "TOKEN", "value": secret})
    assert r.status_code == 201, r.text
    rec = deploy_and_wait(client, agent)
    assert rec["status"] == "active", rec["status_message"]
    r = deploys(client, agent["slug"])
    assert r.headers["X-Total-Count"] == "1"
    (d,) = r.json()
    assert d["id"].startswith("dep_") and d["status"] == "succeeded" and d["active"] is True
    assert d["source"]["type"] == "local" and len(d["source"]["code_sha256"]) == 64
    assert len(d["image_sha256"]) == 64 and d["image_kept"] is True
    assert d["error"] is None and d["duration_ms"] >= 0
    assert d["started_at"] and d["finished_at"] and d["created_at"] <= d["started_at"]
    key_id = db_query(f"SELECT id FROM api_keys WHERE key_id = '{client.key[4:12]}'")[0][0]
    assert d["started_by"]["user_id"] and d["started_by"]["api_key_id"] == key_id
    assert d["started_by"]["api_key_name"]
    out = logs(client, agent["slug"], d["id"])
    assert out["status"] == "succeeded" and out["done"] is True and out["truncated"] is False
    assert MARK in out["log"] and "npm install" in out["log"]
    assert "err-line [redacted]" in out["log"]  # stderr too, the secret's value never
    assert secret not in out["log"]
    r = client.get(f"/agents/{agent['slug']}/deploys/{d['id']}")
    assert r.status_code == 200 and r.json()["id"] == d["id"]


def test_a_failed_build_keeps_the_tail_of_its_output(client):
    # ~400 KiB of numbered lines, then the failure: the record keeps the end.
    script = ("for (let i = 0; i < 8000; i++) console.log('line ' + i + ' ' + 'x'.repeat(40));"
              f" console.error('{MARK} failing'); process.exitCode = 3")
    agent = local_agent(client, versioned("v1", [pkg_with_install(script)]))
    rec = deploy_and_wait(client, agent)
    assert rec["status"] == "error"
    (d,) = deploys(client, agent["slug"]).json()
    assert d["status"] == "failed" and d["active"] is False and d["image_sha256"] is None
    assert d["error"].startswith("Dependency installation failed")
    out = logs(client, agent["slug"], d["id"])
    assert out["truncated"] is True and out["bytes"] > 262144
    assert 200000 < len(out["log"].encode()) <= 262144 + 4096  # + the ==> lines after the cut
    assert f"{MARK} failing" in out["log"] and "line 7999 " in out["log"]
    assert "line 0 " not in out["log"]


def test_a_log_full_of_a_short_secret_shows_none_of_it(client):
    # 4 bytes become 10 when redacted, and the cut at 256 KiB may halve one.
    secret = "Qx7Z"
    script = f"process.stdout.write('{secret}'.repeat(100000) + '\\n')"
    agent = local_agent(client, versioned("v1", [pkg_with_install(script)]))
    r = client.post(f"/agents/{agent['slug']}/secrets", json={"key": "SHORT", "value": secret})
    assert r.status_code == 201, r.text
    assert deploy_and_wait(client, agent)["status"] == "active"
    (d,) = deploys(client, agent["slug"]).json()
    out = logs(client, agent["slug"], d["id"])
    assert out["truncated"] is True
    assert secret not in out["log"] and not out["log"].startswith(("x7Z", "7Z", "Z["))
    assert out["log"].count("[redacted]") > 60000


def test_the_log_can_be_read_while_the_deploy_runs(client):
    script = f"console.log('{MARK} early'); setTimeout(() => console.log('late'), 6000)"
    agent = local_agent(client, versioned("v1", [pkg_with_install(script)]))
    deploy(client, agent["slug"])
    (d,) = deploys(client, agent["slug"]).json()
    deadline = time.time() + 120
    seen = None
    while time.time() < deadline:
        out = logs(client, agent["slug"], d["id"])
        if out["done"]:
            break
        if "==> npm install" in out["log"]:
            seen = out
            break
        time.sleep(0.3)
    assert seen is not None, "the log said nothing while the deploy ran"
    assert seen["status"] == "running"
    assert wait_deployed(client, agent["slug"])["status"] == "active"
    assert "late" in logs(client, agent["slug"], d["id"])["log"]


def test_a_git_deploy_records_the_commit_built(client, tmp_path):
    root = str(tmp_path)
    path = make_repo(root, "g", {"agent.json": '{"name": "g", "version": "1.0.0", "entrypoint": "i.js",'
                                               ' "runtime": "node"}', "i.js": version_js("g")})

    def head():
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True,
                              check=True).stdout.strip()

    with serve_git(root) as port:
        agent = create_agent(client, git_repo_url=f"git://127.0.0.1:{port}/g")
        assert deploy_and_wait(client, agent)["status"] == "active"
        good = head()
        # A build that fails after the clone still says which commit it was.
        git(path, "rm", "-q", "agent.json")
        git(path, "commit", "-qm", "break it")
        assert_redeploy_failed(deploy_and_wait(client, agent))
    failed, d = deploys(client, agent["slug"]).json()
    assert d["source"] == {"type": "git", "git_repo_url": agent["git_repo_url"], "git_branch": None,
                           "git_commit": good}
    assert f"checked out commit {good}" in logs(client, agent["slug"], d["id"])["log"]
    assert failed["status"] == "failed" and failed["source"]["git_commit"] == head() != good


def test_deploys_page_like_the_history(client):
    agent = local_agent(client, versioned("v1"))
    for _ in range(3):
        deploy_and_wait(client, agent)
    r = deploys(client, agent["slug"], limit=2)
    assert r.headers["X-Total-Count"] == "3"
    first = r.json()
    assert len(first) == 2 and first[0]["created_at"] >= first[1]["created_at"]
    cursor = r.headers["X-Next-Cursor"]
    rest = deploys(client, agent["slug"], limit=2, cursor=cursor).json()
    assert [d["id"] for d in rest] == [deploys(client, agent["slug"], offset=2).json()[0]["id"]]
    assert {d["id"] for d in first + rest} == {d["id"] for d in deploys(client, agent["slug"]).json()}
    r = client.get(f"/agents/{agent['slug']}/deploys", params={"limit": 0})
    assert r.status_code == 422


# ---- rollback --------------------------------------------------------------------

def two_versions(client):
    agent = local_agent(client, versioned("v1"))
    assert deploy_and_wait(client, agent)["status"] == "active"
    assert upload(client, agent, versioned("v2")).status_code == 200
    assert deploy_and_wait(client, agent)["status"] == "active"
    return agent


def test_rollback_switches_to_the_previous_image_without_a_rebuild(client):
    agent = two_versions(client)
    slug = agent["slug"]
    assert invoke(client, slug, session_id="s1") == "v2:hi"
    jobs = db_query(f"SELECT COUNT(*) FROM deploy_jobs WHERE agent_id = '{agent['id']}'")[0][0]
    r = client.post(f"/agents/{slug}/rollback")
    assert r.status_code == 200, r.text
    rolled = r.json()
    assert rolled["active"] is True
    older = deploys(client, slug).json()[1]
    assert rolled["id"] == older["id"]
    # No new job, nothing built again: the kept image, in use at once.
    assert db_query(f"SELECT COUNT(*) FROM deploy_jobs WHERE agent_id = '{agent['id']}'")[0][0] == jobs
    rec = client.get(f"/agents/{slug}").json()
    assert rec["status"] == "active"
    assert invoke(client, slug) == "v1:hi"
    assert invoke(client, slug, session_id="s1") == "v1:hi"  # the session's old sandbox is gone
    # Only the running image has a directory on the runner (the other is in the store).
    images = os.path.join(VAR, "data", "images", agent["id"])
    assert wait_until(lambda: len(os.listdir(images)) == 1), os.listdir(images)
    # And forward again by id.
    newest = deploys(client, slug).json()[0]
    r = client.post(f"/agents/{slug}/rollback", json={"deploy_id": newest["id"]})
    assert r.status_code == 200, r.text
    assert invoke(client, slug) == "v2:hi"


def test_rollback_refusals_change_nothing(client, other_client):
    agent = two_versions(client)
    slug = agent["slug"]
    before = client.get(f"/agents/{slug}").json()
    current, older = deploys(client, slug).json()
    other = local_agent(other_client, versioned("o"))
    assert deploy_and_wait(other_client, other)["status"] == "active"
    (other_dep,) = deploys(other_client, other["slug"]).json()
    cases = [
        ({"deploy_id": other_dep["id"]}, 404, "Deploy not found"),
        ({"deploy_id": "dep_nosuchdeployatall00000"}, 404, "Deploy not found"),
        ({"deploy_id": current["id"]}, 409, "already the agent's active deploy"),
    ]
    # Another agent's deploy is not found through this agent, nor this agent by another user.
    assert client.get(f"/agents/{slug}/deploys/{other_dep['id']}/logs").status_code == 404
    assert client.get(f"/agents/{slug}/deploys/{other_dep['id']}").status_code == 404
    assert other_client.get(f"/agents/{slug}/deploys").status_code == 404
    assert other_client.post(f"/agents/{slug}/rollback").status_code == 404
    for body, status, detail in cases:
        r = client.post(f"/agents/{slug}/rollback", json=body)
        assert r.status_code == status, (body, r.text)
        assert detail in r.json()["detail"]
    r = client.post(f"/agents/{slug}/rollback", json={"deploy_id": older["id"], "force": True})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "extra_forbidden"
    r = client.post(f"/agents/{slug}/rollback", data="{", headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    after = client.get(f"/agents/{slug}").json()
    assert after["updated_at"] == before["updated_at"] and invoke(client, slug) == "v2:hi"


def test_rollback_to_a_failed_deploy_or_during_a_deploy_is_refused(client):
    agent = local_agent(client, versioned("v1"))
    assert deploy_and_wait(client, agent)["status"] == "active"
    bad = pkg_with_install("process.exit(1)")
    assert upload(client, agent, versioned("v2", [bad])).status_code == 200
    assert_redeploy_failed(deploy_and_wait(client, agent))
    failed = deploys(client, agent["slug"]).json()[0]
    r = client.post(f"/agents/{agent['slug']}/rollback", json={"deploy_id": failed["id"]})
    assert r.status_code == 409 and "did not succeed" in r.json()["detail"]
    slow = pkg_with_install("setTimeout(() => {}, 8000)")
    assert upload(client, agent, versioned("v3", [slow])).status_code == 200
    deploy(client, agent["slug"])
    r = client.post(f"/agents/{agent['slug']}/rollback")
    assert r.status_code == 409 and "deploy is running" in r.json()["detail"]
    assert client.get(f"/agents/{agent['slug']}").json()["status"] == "deploying"
    assert wait_deployed(client, agent["slug"])["status"] == "active"
    assert invoke(client, agent["slug"]) == "v3:hi"


def test_only_the_last_images_are_kept_and_a_released_one_is_a_409(client):
    agent = local_agent(client, versioned("v0"))
    for i in range(6):  # deploy_images_kept is 5 by default
        assert upload(client, agent, versioned(f"v{i}")).status_code == 200
        assert deploy_and_wait(client, agent)["status"] == "active"
    ds = deploys(client, agent["slug"], limit=10).json()
    assert [d["image_kept"] for d in ds] == [True] * 5 + [False]
    oldest = ds[-1]
    assert refs(oldest["image_sha256"]) == 0  # its bytes went with its reference
    assert all(refs(d["image_sha256"]) >= 1 for d in ds[:5])
    r = client.post(f"/agents/{agent['slug']}/rollback", json={"deploy_id": oldest["id"]})
    assert r.status_code == 409 and "no longer kept" in r.json()["detail"]
    assert "deploy_images_kept" in r.json()["detail"]
    r = client.post(f"/agents/{agent['slug']}/rollback", json={"deploy_id": ds[4]["id"]})
    assert r.status_code == 200, r.text
    assert invoke(client, agent["slug"]) == "v1:hi"
    # Deleting the agent lets go of every kept image.
    assert client.delete(f"/agents/{agent['slug']}").status_code == 204
    assert all(refs(d["image_sha256"]) == 0 for d in ds)


def test_deleting_the_user_releases_every_kept_image():
    c = new_client()
    agent = local_agent(c, versioned("v1"))
    assert deploy_and_wait(c, agent)["status"] == "active"
    assert upload(c, agent, versioned("v2")).status_code == 200
    assert deploy_and_wait(c, agent)["status"] == "active"
    shas = [d["image_sha256"] for d in deploys(c, agent["slug"]).json()]
    assert len(set(shas)) == 2 and all(refs(s) == 1 for s in shas)
    admin("user", "delete", c.email, "--yes")
    assert [refs(s) for s in shas] == [0, 0]
