"""What another local user of a `scripts/run` host reaches of the stack
(scripts/lib.sh), tried as `nobody`: not the logs (agents' stderr, gateway
tokens, presigned URLs' signatures), not the private MariaDB's socket, and
the database has no anonymous account or `test` database that any account
could fill. nginx's workers (www-data, no more privileged than nobody here)
must still reach the FastCGI sockets: the stack answering at all shows that."""
import os
import subprocess

import pytest

from conftest import VAR, db_query, log_files

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
SOCK = os.path.join(VAR, "run", "mysql.sock")


def as_nobody(*argv):
    return subprocess.run(NOBODY + list(argv), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module", autouse=True)
def nobody_reaches_the_state_directory():
    """The premise: nginx's workers traverse $VAR to run/, so any local user
    can too; what is private must be so by its own mode."""
    p = as_nobody("test", "-x", os.path.join(VAR, "run"))
    assert p.returncode == 0, "nobody cannot even reach %s: the test proves nothing" % VAR


def test_logs_are_unreadable_to_other_users():
    logs = log_files()
    names = {os.path.basename(p) for p in logs}
    assert {"api.log", "runner.log", "mysql.log", "access.log", "error.log"} <= names, names
    readable = [p for p in logs if as_nobody("cat", p).returncode == 0]
    assert readable == []
    for path in logs:
        assert os.stat(path).st_mode & 0o7777 == 0o640, path
    for d in (os.path.join(VAR, "log"), os.path.join(VAR, "nginx", "logs")):
        assert as_nobody("ls", d).returncode != 0, d
        assert os.stat(d).st_mode & 0o7777 == 0o750, d


def test_mariadb_socket_refuses_other_users():
    connect = ("import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])")
    p = as_nobody("/usr/bin/python3", "-c", connect, SOCK)
    assert p.returncode != 0 and "PermissionError" in p.stderr, p.stderr
    # The attack itself: an anonymous login that fills a test database.
    p = as_nobody("mariadb", "--no-defaults", f"--socket={SOCK}",
                  "-e", "CREATE DATABASE IF NOT EXISTS test_nobody; "
                        "CREATE TABLE test.filler (x LONGBLOB)")
    assert p.returncode != 0, p.stdout
    assert db_query("SHOW DATABASES LIKE 'test%'") == []
    # Root (the API and the runner here) still connects through the same path.
    assert db_query("SELECT 1") == [["1"]]


def test_no_anonymous_account_or_test_database():
    assert db_query("SELECT COUNT(*) FROM mysql.global_priv WHERE User = ''") == [["0"]]
    assert db_query("SHOW DATABASES LIKE 'test'") == []
    # mariadb-install-db's grants to every account (PUBLIC) on test and test_*.
    assert db_query("SELECT COUNT(*) FROM mysql.db WHERE Db LIKE 'test%'") == [["0"]]
