"""The TLS variant of the nginx site (nginx/agenthost-tls.conf) is a working config:
it passes `nginx -t`, and an nginx started from it terminates TLS and forwards
/api/v1/ to the running API workers (the answer is the API's own JSON). Its
flood guard is set low here, so the answers nginx makes itself (the guard's
429, its error pages) can be checked for their X-RateLimit-* headers."""
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request

import pytest

from conftest import ROOT, VAR


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def tls_nginx():
    d = tempfile.mkdtemp(prefix="ah-tls-")
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", key, "-out", cert],
                   check=True, capture_output=True)
    https, http = free_port(), free_port()
    snip = os.path.join(d, "snippets")
    os.mkdir(snip)
    subst = {"@LISTEN@": f"127.0.0.1:{https}", "@HTTP_LISTEN@": f"127.0.0.1:{http}",
             "@API_SOCKET@": os.path.join(VAR, "run", "api.sock"),
             "@INVOKE_SOCKET@": os.path.join(VAR, "run", "api-invoke.sock"),
             "@METRICS_SOCKET@": os.path.join(VAR, "run", "api-metrics.sock"),
             "@METRICS_ALLOW@": "allow 127.0.0.1;",
             "@SNIPPETS@": snip, "@CERT@": cert, "@KEY@": key,
             # A flood guard small enough for a test to pass it.
             "@FLOOD_RATE@": "3r/s", "@FLOOD_BURST@": "4", "@UPLOAD_CONN@": "10",
             "@FILES_DIR@": os.path.join(VAR, "files"), "@WWW@": os.path.join(ROOT, "nginx", "www")}

    def render(src, dst):
        text = open(src).read()
        for k, v in subst.items():
            text = text.replace(k, v)
        assert "@" not in text.replace("$", ""), f"unfilled placeholder in {src}"
        open(dst, "w").write(text)

    for f in os.listdir(os.path.join(ROOT, "nginx", "snippets")):
        render(os.path.join(ROOT, "nginx", "snippets", f), os.path.join(snip, f))
    for f in ("agenthost-http.conf", "agenthost-locations.conf"):
        render(os.path.join(ROOT, "nginx", f), os.path.join(snip, f))
    render(os.path.join(ROOT, "nginx", "agenthost-tls.conf"), os.path.join(d, "site.conf"))
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        # Workers run as www-data: the FastCGI sockets are group www-data, mode 0660.
        f.write(f"""user www-data;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body; fastcgi_temp_path {d}/fcgi;
    proxy_temp_path {d}/proxy; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
    include {d}/site.conf;
}}
""")
    subprocess.run(["nginx", "-t", "-q", "-c", conf, "-p", d], check=True)
    subprocess.run(["nginx", "-c", conf, "-p", d], check=True)
    try:
        for _ in range(50):
            if os.path.exists(os.path.join(d, "nginx.pid")):
                break
            time.sleep(0.1)
        yield https, http
    finally:
        pid = int(open(os.path.join(d, "nginx.pid")).read())
        os.kill(pid, 15)
        for _ in range(50):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        shutil.rmtree(d, ignore_errors=True)


def test_tls_site_serves_the_api(tls_nginx):
    https, http = tls_nginx
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{https}/api/v1/health", context=ctx, timeout=10) as r:
        assert r.status == 200
        assert b'"database"' in r.read()
        assert "max-age" in r.headers.get("Strict-Transport-Security", "")
        assert r.headers.get_all("X-Content-Type-Options") == ["nosniff"]


def test_plain_http_redirects_to_https(tls_nginx):
    https, http = tls_nginx

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(f"http://127.0.0.1:{http}/api/v1/health", timeout=10)
        raise AssertionError("expected a redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 301
        assert e.headers["Location"].startswith("https://")


def tls_get(port, path, data=None):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}", data=data)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def check_window(headers, remaining):
    """The flood guard's window: 3 a second, reset the next second."""
    assert headers["X-RateLimit-Limit"] == "3"
    assert headers["X-RateLimit-Remaining"] == remaining
    assert time.time() - 1 <= int(headers["X-RateLimit-Reset"]) <= time.time() + 2


def test_the_flood_guards_429_has_retry_after_and_its_window(tls_nginx):
    https, _ = tls_nginx
    answers = [tls_get(https, "/api/v1/health") for _ in range(12)]
    refused = [(h, b) for st, h, b in answers if st == 429]
    assert refused, [st for st, _, _ in answers]
    headers, body = refused[0]
    assert body == b'{"detail":"Rate limit exceeded. Try again in 1 seconds."}'
    assert headers["Retry-After"] == "1"
    assert headers.get_all("X-Content-Type-Options") == ["nosniff"]
    check_window(headers, "0")
    # The API's own answers keep the API's counts, not the guard's.
    ok = next(h for st, h, _ in answers if st == 200)
    assert ok["X-RateLimit-Limit"] != "3"


def test_nginx_error_pages_carry_the_guards_window(tls_nginx):
    https, _ = tls_nginx
    time.sleep(1.5)  # the previous test's burst is spent
    st, headers, body = tls_get(https, "/api/v1/health?x=" + "a" * 20000)
    assert st == 414 and body == b'{"detail":"Request URI too long"}'
    check_window(headers, "3")
    assert "Retry-After" not in headers
    assert headers.get_all("X-Content-Type-Options") == ["nosniff"]


def test_the_api_roots_redirect_keeps_hsts(tls_nginx):
    # Its location sets nosniff, and with that inherits no header of the server's.
    https, _ = tls_nginx
    time.sleep(1.5)  # the flood guard's burst is spent by the tests before
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", https, context=ctx, timeout=10)
    conn.request("GET", "/api/v1")
    r = conn.getresponse()
    assert r.status == 301
    assert r.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert r.headers.get_all("X-Content-Type-Options") == ["nosniff"]
    conn.close()


def test_tls_site_serves_the_dashboard_with_hsts(tls_nginx):
    https, _ = tls_nginx
    st, headers, body = tls_get(https, "/")
    assert st == 200 and b"<html" in body.lower()
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    # Its locations set headers of their own, so HSTS must be repeated there.
    assert headers["Strict-Transport-Security"] == "max-age=31536000"
    asset = body.decode().split('src="', 1)[1].split('"', 1)[0]
    st, headers, _ = tls_get(https, asset)
    assert st == 200 and headers["Strict-Transport-Security"] == "max-age=31536000"
    assert "immutable" in headers["Cache-Control"]


def test_plain_http_site_sends_no_hsts():
    from conftest import BASE_URL
    r = urllib.request.urlopen(BASE_URL.rsplit("/api/v1", 1)[0] + "/", timeout=10)
    assert r.status == 200 and "Content-Security-Policy" in r.headers
    assert "Strict-Transport-Security" not in r.headers
