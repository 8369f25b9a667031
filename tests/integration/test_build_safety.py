"""What a deploy's build may leave behind. npm runs a project's install scripts,
i.e. a stranger's code: nothing it writes may reach the host's file system as
anything but the image the runner extracts (root's, without setuid bits, with no
link leading out of it, within image_max_mb), and a deleted agent's images go at
once. Regressions of two probes of issue 17 and 21: a postinstall that left a
setuid-root shell under var/ for the length of the build, and one whose 300 MB
file became part of an active agent's image."""
import os
import stat
import threading
import time

import pytest

from conftest import VAR
from test_deploy_faults import runner_with
from test_deploy import (DATA, assert_active, assert_nothing_left_behind, deploy,
                         deploy_and_wait, local_agent, project, tgz, wait_deployed)

MASTER_KEY = os.path.join(VAR, "master.key")


def package(postinstall):
    return ("package.json", "f",
            '{"name": "p", "version": "1.0.0", "scripts": {"postinstall": %s}}'
            % __import__("json").dumps(postinstall))


def setuid_root_files(top):
    """Files under top that are setuid or setgid and owned by root."""
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames + dirnames:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if st.st_uid == 0 and st.st_mode & (stat.S_ISUID | stat.S_ISGID) \
                    and not stat.S_ISDIR(st.st_mode):
                found.append(p)
    return found


def test_a_build_leaves_no_setuid_file_and_no_link_to_a_host_path(client):
    """While its postinstall sleeps, nothing setuid and root's exists under var/;
    the link it leaves to the master key fails the deploy, naming the link."""
    script = ("cp /bin/bash /app/suidsh && chmod 4755 /app/suidsh && "
              f"ln -s {MASTER_KEY} /app/key-link && sleep 6")
    agent = local_agent(client, tgz(project(extra=[package(script)])))
    seen = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(setuid_root_files(DATA))
            time.sleep(0.3)

    t = threading.Thread(target=watch)
    t.start()
    try:
        deploy(client, agent["slug"])
        rec = wait_deployed(client, agent["slug"])
    finally:
        stop.set()
        t.join()
    assert seen == [], f"setuid root files under {DATA} during the build: {set(seen)}"
    assert setuid_root_files(DATA) == []
    assert rec["status"] == "error", rec
    assert "key-link" in rec["status_message"] and "outside" in rec["status_message"], rec
    assert rec["status_message"].startswith("The built image was refused"), rec
    assert not os.path.exists(os.path.join(DATA, "images", agent["id"]))
    assert_nothing_left_behind()


def test_setuid_bits_never_reach_an_image(client):
    """A setuid copy made by an install script is in the image as a plain
    file of root's; the agent deploys and runs."""
    script = "cp /bin/true /app/suid && chmod 6755 /app/suid"
    agent = local_agent(client, tgz(project(extra=[package(script)])))
    rec = deploy_and_wait(client, agent)
    assert_active(rec)
    [image] = [d for d in os.listdir(os.path.join(DATA, "images", agent["id"])) if "." not in d]
    st = os.lstat(os.path.join(DATA, "images", agent["id"], image, "suid"))
    assert st.st_uid == 0 and not st.st_mode & (stat.S_ISUID | stat.S_ISGID), oct(st.st_mode)
    r = client.post(f"/agents/{agent['slug']}/invoke", json={"prompt": "hi"})
    assert r.status_code == 200 and r.json()["response_content"] == "echo: hi", r.text


def test_data_dir_is_the_runners_alone(client):
    mode = stat.S_IMODE(os.stat(DATA).st_mode)
    assert mode == 0o700, oct(mode)


@pytest.mark.slow
def test_an_image_over_image_max_mb_fails_and_leaves_no_bytes(client):
    """With image_max_mb = 100 (the default, 1024, holds an SDK agent: see
    test_sdk_agent.py), a 110 MB file written by postinstall fails the deploy
    with a message naming the setting, and nothing of it stays."""
    script = "dd if=/dev/zero of=/app/big bs=1M count=110 status=none"
    agent = local_agent(client, tgz(project(extra=[package(script)])))
    before = os.statvfs(DATA)
    with runner_with(image_max_mb=100):
        rec = deploy_and_wait(client, agent)
    assert rec["status"] == "error", rec
    assert "image_max_mb" in rec["status_message"] and "100 MB" in rec["status_message"], rec
    assert not os.path.exists(os.path.join(DATA, "images", agent["id"]))
    assert_nothing_left_behind()
    after = os.statvfs(DATA)
    grown = (before.f_bfree - after.f_bfree) * before.f_frsize
    assert grown < 100 << 20, f"{grown >> 20} MB more in use on {DATA} after the failed deploy"


def test_deleting_an_agent_removes_its_images_at_once(client):
    agent = local_agent(client, tgz(project()))
    assert_active(deploy_and_wait(client, agent))
    images = os.path.join(DATA, "images", agent["id"])
    assert os.listdir(images)
    r = client.delete(f"/agents/{agent['slug']}")
    assert r.status_code == 204, r.text
    assert not os.path.exists(images), os.listdir(images)
