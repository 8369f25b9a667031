"""The CLI's buckets and mounts commands (lib/cli/buckets.c, mounts.c), run as
built against the real stack and the S3/GCS servers test_bucket_test.py starts
on loopback: the bucket record as a table and as JSON, credentials from stdin
or a terminal that never show up in output and are refused on argv, `buckets
test` exiting 1 when the provider refuses, a bucket in use that delete names
the agents of, mounts added, listed, changed and removed, and the 422 field."""
import json
import re
import subprocess
import uuid

from gcsserver import key_file
from s3server import KEY, SECRET
from test_bucket_test import gcs, gcs_key, s3  # noqa: F401 - fixtures: s3rver and the GCS stand-in
from test_cli import CLI, home, on_pty, run, user  # noqa: F401 - home and user are fixtures


def js(r):
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def create(env, endpoint, *extra, provider="s3", bucket="agent-data"):
    """A bucket of a fresh name; its record."""
    name = "data " + uuid.uuid4().hex[:6]
    return js(run(env, "buckets", "create", "--name", name, "--provider", provider, "--bucket", bucket,
                  "--endpoint-url", endpoint, *extra, "--json"))


def agent(env):
    slug = "mnt-" + uuid.uuid4().hex[:8]
    js(run(env, "agents", "create", slug, "--json"))
    return slug


def one_error_line(r, status):
    assert r.returncode == 1, (r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"(HTTP {status})" in lines[0], r.stderr
    return lines[0]


def test_create_list_get_update_delete(user, s3):
    _e, _k, env = user
    b = create(env, s3.endpoint, "--region", "eu-west-1")
    assert (b["provider"], b["bucket_name"], b["region"]) == ("s3", "agent-data", "eu-west-1")
    assert b["endpoint_url"] == s3.endpoint and b["has_credentials"] is False
    slug = b["slug"]
    table = run(env, "buckets", "list")
    assert table.returncode == 0, table.stderr
    head, row = table.stdout.splitlines()
    assert head.split() == ["slug", "name", "provider", "bucket", "region", "credentials", "endpoint"]
    assert row.startswith(slug + " ") and s3.endpoint in row and " no " in row
    assert [x["id"] for x in js(run(env, "buckets", "list", "--json"))] == [b["id"]]
    rec = run(env, "buckets", "get", slug)
    assert rec.returncode == 0 and f"bucket:      agent-data\n" in rec.stdout, rec.stdout
    assert js(run(env, "buckets", "get", slug, "--json")) == b
    up = js(run(env, "buckets", "update", slug, "--name", "Renamed", "--region", "", "--json"))
    assert (up["name"], up["region"], up["slug"]) == ("Renamed", None, slug)   # "" is the default
    assert run(env, "buckets", "update", slug).returncode == 2                 # nothing to change
    r = run(env, "buckets", "delete", slug)
    assert r.returncode == 0 and r.stdout == "", r.stderr
    assert one_error_line(run(env, "buckets", "get", slug), 404) == "error: Bucket not found (HTTP 404)"
    assert js(run(env, "buckets", "list", "--json")) == []


def test_credentials_from_stdin_are_never_shown_and_test_says_ok(user, s3):
    _e, _k, env = user
    slug = create(env, s3.endpoint)["slug"]
    r = run(env, "buckets", "test", slug)                    # nothing stored yet
    assert r.returncode == 1 and r.stderr.startswith(f"error: {slug}: "), r.stderr
    # The id and the secret on two lines of stdin.
    r = run(env, "buckets", "credentials", slug, stdin=f"{KEY}\n{SECRET}\n")
    assert r.returncode == 0, r.stderr
    assert SECRET not in r.stdout + r.stderr
    got = run(env, "buckets", "get", slug, "--json")
    assert json.loads(got.stdout)["has_credentials"] is True and SECRET not in got.stdout
    r = run(env, "buckets", "test", slug)
    assert (r.returncode, r.stdout.split(":")[0]) == (0, "ok"), r.stderr
    assert js(run(env, "buckets", "test", slug, "--json"))["ok"] is True
    # A key s3rver does not know: exit 1 with the provider's refusal, also with --json.
    bad_secret = "bad-" + uuid.uuid4().hex
    r = run(env, "buckets", "credentials", slug, "--access-key-id", "NOTAKEY", stdin=bad_secret + "\n")
    assert r.returncode == 0 and bad_secret not in r.stdout + r.stderr, r.stderr
    r = run(env, "buckets", "test", slug)
    assert r.returncode == 1 and r.stdout == "" and "credentials" in r.stderr, r.stderr
    assert len(r.stderr.splitlines()) == 1
    r = run(env, "buckets", "test", slug, "--json")
    assert r.returncode == 1 and json.loads(r.stdout)["ok"] is False
    # There is no way to put the secret on the command line.
    r = run(env, "buckets", "credentials", slug, "--secret-access-key", bad_secret)
    assert r.returncode == 2 and "unknown option" in r.stderr
    assert not [o for o in re.findall(r"--[\w-]+", run(env, "buckets", "credentials", "--help").stdout)
                if "secret" in o]
    for wrong in ("only-one-line", "a\nb\nc\n"):
        r = run(env, "buckets", "credentials", slug, stdin=wrong)
        assert r.returncode == 2 and "two lines" in r.stderr, r.stderr


def test_credentials_typed_at_a_terminal_are_not_echoed(user, s3):
    _e, _k, env = user
    slug = create(env, s3.endpoint)["slug"]
    typed = "typed-" + uuid.uuid4().hex
    rc, out = on_pty(env, ["buckets", "credentials", slug],
                     [("Access key id: ", KEY), ("Secret access key: ", typed)])
    assert rc == 0 and "Stored the credentials" in out, out
    assert KEY in out and typed not in out                # the id is echoed, the secret is not
    assert js(run(env, "buckets", "get", slug, "--json"))["has_credentials"] is True


def test_gcs_takes_a_service_account_file(user, gcs, gcs_key, tmp_path):
    _e, _k, env = user
    slug = create(env, gcs.endpoint, provider="gcs", bucket="gcs-data")["slug"]
    r = run(env, "buckets", "credentials", slug, stdin="x\ny\n")          # a key pair for gcs
    assert r.returncode == 2 and "--service-account-file" in r.stderr
    (tmp_path / "not.json").write_text("not json")
    r = run(env, "buckets", "credentials", slug, "--service-account-file", str(tmp_path / "not.json"))
    assert r.returncode == 2 and "not a JSON key file" in r.stderr
    keyfile = tmp_path / "key.json"
    keyfile.write_text(key_file(gcs_key, gcs.token_uri))
    r = run(env, "buckets", "credentials", slug, "--service-account-file", str(keyfile))
    assert r.returncode == 0, r.stderr
    assert "PRIVATE KEY" not in r.stdout + r.stderr
    r = run(env, "buckets", "test", slug)
    assert r.returncode == 0 and r.stdout.startswith("ok: "), r.stderr


def test_mounts_add_list_update_rm(user, s3):
    _e, _k, env = user
    slug, bkt = agent(env), create(env, s3.endpoint)["slug"]
    m = js(run(env, "mounts", "add", slug, "--bucket", bkt, "--path", "/data", "--read-only",
               "--prefix", "team/a", "--cache", "--cache-ttl", "30", "--json"))
    assert (m["bucket_slug"], m["mount_path"], m["source_prefix"]) == (bkt, "/data", "team/a")
    assert (m["read_only"], m["enabled"], m["cache_enabled"], m["cache_ttl_seconds"]) == (True, True, True, 30)
    assert js(run(env, "agents", "get", slug, "--json"))["needs_redeploy"] is True
    table = run(env, "mounts", "list", slug)
    head, row = table.stdout.splitlines()
    assert head.split()[:3] == ["id", "bucket", "path"] and row.split()[:4] == [m["id"], bkt, "/data", "yes"]
    assert "next deploy" in run(env, "mounts", "add", slug, "--bucket", bkt, "--path", "/other").stderr
    r = js(run(env, "mounts", "update", slug, m["id"], "--read-write", "--no-cache", "--disable",
               "--path", "/mnt/data", "--json"))
    assert (r["read_only"], r["cache_enabled"], r["enabled"], r["mount_path"]) == (False, False, False, "/mnt/data")
    assert r["source_prefix"] == "team/a" and r["cache_ttl_seconds"] == 30        # unchanged
    r = js(run(env, "mounts", "update", slug, m["id"], "--enable", "--prefix", "", "--json"))
    assert (r["enabled"], r["source_prefix"]) == (True, "")
    assert js(run(env, "mounts", "get", slug, m["id"], "--json")) == r
    for bad in (("--read-only", "--read-write"), ("--cache", "--no-cache"), ("--enable", "--disable"), ()):
        assert run(env, "mounts", "update", slug, m["id"], *bad).returncode == 2, bad
    assert run(env, "mounts", "add", slug, "--bucket", bkt).returncode == 2      # no --path
    assert run(env, "mounts", "rm", slug, m["id"]).returncode == 0
    assert [x["mount_path"] for x in js(run(env, "mounts", "list", slug, "--json"))] == ["/other"]
    assert one_error_line(run(env, "mounts", "rm", slug, m["id"]), 404)


def test_delete_of_a_bucket_in_use_names_the_agent_until_force(user, s3):
    _e, _k, env = user
    slug, bkt = agent(env), create(env, s3.endpoint)["slug"]
    js(run(env, "mounts", "add", slug, "--bucket", bkt, "--path", "/data", "--json"))
    line = one_error_line(run(env, "buckets", "delete", bkt), 409)
    assert f"'{slug}'" in line and f"agenthost buckets delete {bkt} --force" in line
    assert js(run(env, "buckets", "get", bkt, "--json"))["slug"] == bkt
    assert run(env, "buckets", "delete", bkt, "--force").returncode == 0
    assert js(run(env, "mounts", "list", slug, "--json")) == []


def test_422_shows_the_field_and_missing_options_are_usage(user, s3):
    _e, _k, env = user
    line = one_error_line(run(env, "buckets", "create", "--name", "x", "--provider", "s3",
                              "--bucket", "Not_A Bucket"), 422)
    assert "body.bucket_name:" in line
    line = one_error_line(run(env, "buckets", "create", "--name", "x", "--provider", "r2",
                              "--bucket", "agent-data"), 422)
    assert "body.endpoint_url:" in line
    slug, bkt = agent(env), create(env, s3.endpoint)["slug"]
    line = one_error_line(run(env, "mounts", "add", slug, "--bucket", bkt, "--path", "/proc/x"), 422)
    assert "body.mount_path:" in line
    assert "Bucket 'nope' not found" in one_error_line(
        run(env, "mounts", "add", slug, "--bucket", "nope", "--path", "/data"), 404)
    for opt in ("--name", "--provider", "--bucket"):
        args = {"--name": "x", "--provider": "s3", "--bucket": "agent-data"}
        args.pop(opt)
        r = run(env, "buckets", "create", *[w for kv in args.items() for w in kv])
        assert r.returncode == 2 and f"{opt} is required" in r.stderr
    assert js(run(env, "buckets", "list", "--json")) == [js(run(env, "buckets", "get", bkt, "--json"))]
    assert run(env, "mounts", "update", slug, "m", "--cache-ttl", "0").returncode == 2


def test_completion_offers_the_new_commands_and_options():
    def complete(*words):
        return subprocess.run([CLI, "__complete", *words], capture_output=True, text=True).stdout.split()
    assert set(complete("buckets")) == {"list", "get", "create", "update", "delete", "credentials", "test"}
    assert set(complete("mounts")) == {"list", "get", "add", "update", "rm"}
    assert {"--read-only", "--cache", "--disabled"} <= set(complete("mounts", "add", "a"))
