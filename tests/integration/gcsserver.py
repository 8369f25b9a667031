"""A GCS stand-in on loopback for the bucket tests: an OAuth token endpoint that
verifies a service account's RS256 JWT (grant type jwt-bearer) against the
public half of a key this module makes, and the JSON API's object listing of
one bucket, which wants the token it handed out. Both on one port: the key
file's token_uri is <endpoint>/token and the bucket's endpoint_url is <endpoint>."""
import base64
import http.server
import json
import secrets
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from s3server import storage_port


def _b64d(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def new_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def key_file(key, token_uri, email="agent@proj.iam.gserviceaccount.com"):
    """The service-account key file (JSON text) Google would hand out."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return json.dumps({"type": "service_account", "project_id": "proj", "private_key_id": "k1",
                       "private_key": pem, "client_email": email, "client_id": "1",
                       "token_uri": token_uri})


class GcsServer:
    def __init__(self, bucket, key, objects=None):
        """objects: {name: bytes} the bucket holds (downloads go to each item's mediaLink)."""
        objects = {"hello.txt": b"hello from GCS"} if objects is None else objects
        self.bucket, self.public, self.objects = bucket, key.public_key(), objects
        self.tokens, self.requests = set(), []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, status, obj, raw=None):
                data = raw if raw is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
                outer.requests.append(("POST", self.path))
                if self.path != "/token" or form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
                    return self._send(400, {"error": "unsupported_grant_type"})
                why = outer.check_jwt(form.get("assertion", ""))
                if why:
                    return self._send(400, {"error": "invalid_grant", "error_description": why})
                tok = "ya29." + secrets.token_urlsafe(16)
                outer.tokens.add(tok)
                return self._send(200, {"access_token": tok, "expires_in": 3599, "token_type": "Bearer"})

            def do_GET(self):
                u = urllib.parse.urlsplit(self.path)
                outer.requests.append(("GET", u.path))
                auth = self.headers.get("Authorization", "")
                if not auth.startswith("Bearer ") or auth[7:] not in outer.tokens:
                    return self._send(401, {"error": {"code": 401, "message": "Invalid Credentials"}})
                if u.path.startswith("/download/"):
                    name = urllib.parse.unquote(u.path[len("/download/"):])
                    if name not in outer.objects:
                        return self._send(404, {"error": {"code": 404}})
                    return self._send(200, None, raw=outer.objects[name])
                # /storage/v1/b/<bucket>/o[/<object>], as Google's client libraries ask
                parts = u.path.split("/", 6)
                if len(parts) < 6 or parts[1:4] != ["storage", "v1", "b"] or parts[5] != "o":
                    return self._send(400, {"error": {"code": 400}})
                if parts[4] != outer.bucket:
                    return self._send(404, {"error": {"code": 404, "message": "The specified bucket does not exist."}})
                if len(parts) == 7:
                    name = urllib.parse.unquote(parts[6])
                    if name not in outer.objects:
                        return self._send(404, {"error": {"code": 404, "message": "No such object"}})
                    return self._send(200, outer.item(name))
                q = dict(urllib.parse.parse_qsl(u.query))
                pre, delim = q.get("prefix", ""), q.get("delimiter", "")
                names = [n for n in sorted(outer.objects) if n.startswith(pre)]
                subdirs = sorted({pre + n[len(pre):].split(delim, 1)[0] + delim for n in names
                                  if delim and delim in n[len(pre):]})
                items = [outer.item(n) for n in names if not (delim and delim in n[len(pre):])]
                return self._send(200, {"kind": "storage#objects", "items": items, "prefixes": subdirs})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", storage_port()), H)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.token_uri = self.endpoint + "/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def item(self, name):
        return {"kind": "storage#object", "name": name, "bucket": self.bucket,
                "size": str(len(self.objects[name])), "updated": "2026-11-25T00:00:00.000Z",
                "contentType": "text/plain",
                "mediaLink": f"{self.endpoint}/download/{urllib.parse.quote(name, safe='')}"}

    def check_jwt(self, jwt):
        """'' when the assertion is a valid RS256 JWT of the service account, else why not."""
        try:
            h, c, s = jwt.split(".")
            header, claims = json.loads(_b64d(h)), json.loads(_b64d(c))
            self.public.verify(_b64d(s), f"{h}.{c}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except Exception as e:  # noqa: BLE001 - any defect is a refusal
            return f"bad assertion: {type(e).__name__}"
        if header.get("alg") != "RS256" or claims.get("aud") != self.token_uri:
            return "wrong alg or aud"
        if not claims.get("iss") or "devstorage" not in claims.get("scope", ""):
            return "no iss or scope"
        if not claims.get("iat", 0) <= time.time() + 60 < claims.get("exp", 0) + 60:
            return "expired"
        return ""

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
