"""A configuration the key table refuses stops every program at start, with a
message naming the key: a misspelt key in the file, a number that is not one or
is out of bounds, a bad value in an AGENTHOST_<KEY> variable. Nothing is
started: each program exits before it opens a socket or the database."""
import os
import subprocess

import pytest

from conftest import BUILD, ROOT

PROGRAMS = {
    "api": lambda conf: [os.path.join(BUILD, "handlers", "agenthost-api"), conf],
    "runner": lambda conf: [os.path.join(BUILD, "lib", "runner", "agenthost-runner"), "--config", conf],
    "admin": lambda conf: [os.path.join(BUILD, "lib", "admin", "agenthost-admin"), "migrate"],
    "check": lambda conf: [os.path.join(BUILD, "lib", "admin", "agenthost-admin"), "config", "check", conf,
                           "--example", EXAMPLE],
}
# The example configuration as built (installed as /usr/share/agenthost/agenthost.conf.example).
EXAMPLE = os.path.join(BUILD, "docs", "agenthost.conf.example")


def run(program, tmp_path, text, env_extra=None):
    conf = tmp_path / "agenthost.conf"
    conf.write_text(text)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENTHOST_") or k in ("AGENTHOST_BUILD", "AGENTHOST_ROOT")}
    env["AGENTHOST_CONFIG"] = str(conf)
    env.update(env_extra or {})
    p = subprocess.run(PROGRAMS[program](str(conf)), env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_misspelt_key_stops_start(program, tmp_path):
    rc, out = run(program, tmp_path, "db_name = agenthost\nrate_limt_crud = 500\n")
    assert rc != 0, out
    assert "unknown configuration key rate_limt_crud" in out, out
    assert "did you mean rate_limit_crud" in out, out


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_bad_number_stops_start(program, tmp_path):
    rc, out = run(program, tmp_path, "invoke_workers = 16x\n")
    assert rc != 0, out
    assert "invoke_workers = 16x" in out and "[1, 256]" in out, out
    assert "agenthost.conf:1)" in out, out   # where to fix it


def test_config_check_names_the_key_and_its_line(tmp_path):
    """What the units run before a start (ExecStartPre): the unknown key with
    its line and the nearest known key; a bad value with its line."""
    rc, out = run("check", tmp_path, "# agenthost\ndb_name = agenthost\n\nsandbox_memroy_mb = 512\n")
    assert rc == 1, out
    assert "agenthost.conf:4: unknown configuration key sandbox_memroy_mb" in out, out
    assert "did you mean sandbox_memory_mb?" in out, out
    rc, out = run("check", tmp_path, "db_name = agenthost\nsandbox_cpus = lots\n")
    assert rc == 1 and "sandbox_cpus = lots" in out and "agenthost.conf:2)" in out, out


def test_config_check_says_which_new_keys_take_their_defaults(tmp_path):
    """An older file (an upgrade keeps the operator's) lacks keys the example
    now has: they take their defaults, and the check says so; keys the file
    names, even commented out, are not reported."""
    example = open(EXAMPLE).read()
    assert "# sandbox_memory_mb = 2048" in example and "# db_port = 3306" in example
    rc, out = run("check", tmp_path, "db_name = agenthost\n# db_port = 3307\n")
    assert rc == 0, out
    assert "sandbox_memory_mb is not in this file (new since it was written?): " \
           "it takes its default, 2048" in out, out
    assert "db_port" not in out and "db_name" not in out
    assert out.rstrip().endswith("configuration OK (the keys above take their defaults)"), out
    rc, out = run("check", tmp_path, example)   # a fresh install's file
    assert rc == 0 and "not in this file" not in out and "configuration OK\n" in out, out


def test_out_of_bounds_environment_value_stops_start(tmp_path):
    rc, out = run("admin", tmp_path, "", {"AGENTHOST_SANDBOX_CPUS": "0"})
    assert rc != 0, out
    assert "sandbox_cpus = 0" in out and "AGENTHOST_SANDBOX_CPUS" in out, out


def test_bad_bool_stops_start(tmp_path):
    rc, out = run("runner", tmp_path, "model_gateway = enabled\n")
    assert rc != 0, out
    assert "model_gateway = enabled" in out, out



# Issue 26: whoever serves keys at jwt_jwks_url logs in as anyone, and any
# local user may listen on loopback or on this host's ports above 1023.
LOCAL_JWKS = "jwt_jwks_url = http://127.0.0.1:18399/jwks.json\n"


def test_local_jwks_url_stops_the_api(tmp_path):
    """Refused before anything else is read: no socket, key or database."""
    rc, out = run("api", tmp_path, LOCAL_JWKS)
    assert rc != 0, out
    assert "jwt_jwks_url" in out and "loopback" in out, out
    assert "jwt_jwks_allow_local = true" in out, out


def test_local_jwks_url_from_the_environment_stops_the_api(tmp_path):
    rc, out = run("api", tmp_path, "",
                  {"AGENTHOST_JWT_JWKS_URL": "http://localhost:8080/.well-known/jwks.json"})
    assert rc != 0, out
    assert "jwt_jwks_url: localhost port 8080 is a loopback address" in out, out


def test_jwks_allow_local_lets_the_api_past_the_check(tmp_path):
    """With the allowance the API goes on (and stops later, at the master key
    this configuration lacks)."""
    rc, out = run("api", tmp_path, LOCAL_JWKS + "jwt_jwks_allow_local = true\n"
                  f"master_key_file = {tmp_path}/no-such.key\n")
    assert rc != 0, out
    assert "jwt_jwks_url" not in out and "no-such.key" in out, out


def test_scripts_run_says_why_the_api_refused_to_start(tmp_path):
    """scripts/lib.sh's start_api (scripts/run) stops with the API's own
    message, not after a time-out waiting for its socket."""
    (tmp_path / "log").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "agenthost.conf").write_text(LOCAL_JWKS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTHOST_")}
    script = 'ROOT="$1" VAR="$2" BUILD="$3"; . "$ROOT/scripts/lib.sh"; start_api'
    p = subprocess.run(["bash", "-c", script, "start_api", ROOT, str(tmp_path), BUILD], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stderr
    assert "the API stopped at start" in p.stderr and "jwt_jwks_url" in p.stderr, p.stderr

@pytest.mark.parametrize("key,value", [
    ("model_gateway_endpoints", "POST /v1/messages/batches"),     # no usage|free
    ("model_gateway_endpoints", "PUT /v1/messages usage"),
    ("model_gateway_response_headers", "set cookie"),
])
def test_bad_gateway_policy_stops_runner_start(tmp_path, key, value):
    """A gateway policy that cannot be read stops the runner before it makes
    anything, naming the setting (rather than failing agents' calls later)."""
    rc, out = run("runner", tmp_path, f"model_gateway = on\n{key} = {value}\n")
    assert rc != 0, out
    assert f"{key}: \"{value}\"" in out, out
    assert [p.name for p in tmp_path.iterdir()] == ["agenthost.conf"], "nothing was made"
