"""Migrations an upgrade runs can run again (issue 33, disk full during an
upgrade's migration). MariaDB commits each DDL statement on its own, so a
migration that stops half way (a full disk, say) leaves its first statements
applied and is not recorded; `dpkg --configure -a` then runs the whole file
again. Each statement of the migrations since the released 0.1.0 must
therefore be a no-op when already applied (IF NOT EXISTS), and what it added
must not stop the old version (columns with defaults, new tables)."""
import os
import subprocess

import pytest

from conftest import BUILD, ROOT, VAR

ADMIN = os.path.join(BUILD, "lib", "admin", "agenthost-admin")
SOCK = os.path.join(VAR, "run", "mysql.sock")
# The last migration of the released version (0.1.0, 2add7af): an upgrade
# from it runs every later one.
RELEASED = "023_invocation_logs.sql"


def sql(db, text):
    out = subprocess.run(["mariadb", "--no-defaults", f"--socket={SOCK}", "-uroot", db, "--batch",
                          "--skip-column-names", "-e", text], capture_output=True, text=True, check=True)
    return out.stdout


def migrate(tmp_path, db):
    conf = tmp_path / "agenthost.conf"
    conf.write_text(f"db_socket = {SOCK}\ndb_user = root\ndb_password =\ndb_name = {db}\n"
                    f"schema_dir = {os.path.join(ROOT, 'schema')}\nmaster_key_file = {tmp_path / 'master.key'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTHOST_")}
    env["AGENTHOST_CONFIG"] = str(conf)
    p = subprocess.run([ADMIN, "migrate"], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def schema(db):
    tables = sql(db, "SHOW TABLES").split()
    return {t: sql(db, f"SHOW CREATE TABLE `{t}`") for t in tables if t != "schema_lock"}


@pytest.fixture
def scratch():
    db = f"agenthost_migrate_{os.getpid()}"
    sql("mysql", f"DROP DATABASE IF EXISTS `{db}`; CREATE DATABASE `{db}`")
    yield db
    sql("mysql", f"DROP DATABASE IF EXISTS `{db}`")


def test_migrations_since_the_release_run_again_as_if_half_applied(tmp_path, scratch):
    rc, out = migrate(tmp_path, scratch)
    assert rc == 0, out
    before = schema(scratch)
    # As after a migration that stopped at its last statement: everything it
    # did is there, nothing says it ran.
    sql(scratch, f"DELETE FROM schema_migrations WHERE version > '{RELEASED}'")
    rc, out = migrate(tmp_path, scratch)
    assert rc == 0, f"a migration since {RELEASED} fails when run again:\n{out}"
    later = sorted(f for f in os.listdir(os.path.join(ROOT, "schema"))
                   if f.endswith(".sql") and f > RELEASED)
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("applied ")] == later, out
    assert schema(scratch) == before
