"""The OpenAPI document (docs/openapi.yaml, served as JSON at /openapi.json) against
the running service: it is served without credentials, it names exactly the routes
the router knows, and live responses have the documented shapes and headers.

The router's routes come from two independent sources: the route tables in
handlers/*.c that handlers/routes.c lists (parsed from the C source), and probing
the live router (a documented route must not get the router's own 404
{"detail": "Not Found"} or a 405; a documented path's 405 `Allow` header must list
exactly the documented methods).

Schemas are checked with the small JSON Schema validator below (the subset the
document uses), so the tests need nothing beyond requests and PyYAML."""
import os
import re
import uuid

import pytest
import yaml

from conftest import ROOT

DOC_PATH = os.path.join(ROOT, "docs", "openapi.yaml")
HANDLERS = os.path.join(ROOT, "handlers")
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
ROUTER_404 = {"detail": "Not Found"}
ROUTER_405 = {"detail": "Method Not Allowed"}


# ---- the document ----

@pytest.fixture(scope="module")
def doc():
    with open(DOC_PATH, encoding="utf-8") as f:
        return yaml.safe_load(f)


def operations(doc):
    """(METHOD, path, operation) for every documented operation."""
    for path, item in doc["paths"].items():
        for m in METHODS:
            if m in item:
                yield m.upper(), path, item[m]


def norm(path):
    """A path template with its parameter names erased: /agents/{} ."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def resolve(doc, node):
    """Follows a local $ref (and chains of them)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"non-local $ref {ref}"
        node = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert part in node, f"unresolvable $ref {ref}"
            node = node[part]
        seen += 1
        assert seen < 20, f"$ref loop at {ref}"
    return node


def documented_response(doc, method, path, status):
    op = doc["paths"][path][method.lower()]
    responses = op["responses"]
    assert str(status) in responses, \
        f"{method} {path} answered {status}, which the document does not list ({sorted(responses)})"
    return resolve(doc, responses[str(status)])


# ---- a small JSON Schema validator (the subset the document uses) ----

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _type_ok(value, t):
    if t == "null":
        return value is None
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "string":
        return isinstance(value, str)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    raise AssertionError(f"unknown type {t!r} in the document")


def validate(doc, schema, value, where="$"):
    """Returns a list of error strings (empty when value matches schema)."""
    schema = resolve(doc, schema)
    if schema is True or schema == {}:
        return []
    if schema is False:
        return [f"{where}: no value is allowed here"]
    errs = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return [f"{where}: {value!r:.80} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        errs.append(f"{where}: {value!r:.80} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{where}: {value!r:.80} is not one of {schema['enum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(f"{where}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append(f"{where}: {value!r:.80} does not match {schema['pattern']}")
        fmt = schema.get("format")
        if fmt == "date-time" and not DATE_TIME.match(value):
            errs.append(f"{where}: {value!r} is not a date-time")
        if fmt == "date" and not DATE.match(value):
            errs.append(f"{where}: {value!r} is not a date")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{where}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{where}: {value} > {schema['maximum']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errs.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(f"{where}: more than {schema['maxItems']} items")
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            if sub is not None:
                errs += validate(doc, sub, item, f"{where}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errs.append(f"{where}: required property {name!r} missing")
        for name, v in value.items():
            if name in props:
                errs += validate(doc, props[name], v, f"{where}.{name}")
            elif "additionalProperties" in schema:
                extra = schema["additionalProperties"]
                if extra is False:
                    errs.append(f"{where}: property {name!r} is not documented")
                elif isinstance(extra, dict):
                    errs += validate(doc, extra, v, f"{where}.{name}")
    for sub in schema.get("allOf", []):
        errs += validate(doc, sub, value, where)
    if "anyOf" in schema and not any(not validate(doc, s, value, where) for s in schema["anyOf"]):
        errs.append(f"{where}: matches none of anyOf")
    if "oneOf" in schema:
        n = sum(1 for s in schema["oneOf"] if not validate(doc, s, value, where))
        if n != 1:
            errs.append(f"{where}: matches {n} of oneOf, not exactly 1")
    if "if" in schema:
        branch = "then" if not validate(doc, schema["if"], value, where) else "else"
        if branch in schema:
            errs += validate(doc, schema[branch], value, where)
    return errs


def check_response(doc, method, path, resp):
    """The live response's status is documented for the operation, its JSON body
    matches the documented schema, and every documented header is present."""
    r = documented_response(doc, method, path, resp.status_code)
    problems = []
    for h in r.get("headers", {}):
        if h == "Retry-After" and resp.status_code != 429:
            continue
        if h in ("Link", "X-Next-Cursor"):
            continue  # only when there is a next page (test_history.py checks them)
        if h not in resp.headers:
            problems.append(f"documented header {h} missing")
    content = r.get("content")
    if not content:
        assert not resp.content, f"{method} {path} {resp.status_code}: undocumented body {resp.text:.200}"
    else:
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip()
        assert ctype in content, f"{method} {path} {resp.status_code}: content type {ctype!r} not in {list(content)}"
        schema = content[ctype].get("schema", {})
        problems += validate(doc, schema, resp.json())
    assert not problems, f"{method} {path} {resp.status_code}: " + "; ".join(problems) + f"\nbody: {resp.text:.500}"


# ---- the router's routes, from the C source ----

ROW = re.compile(r'\{\s*"([A-Z]+)"\s*,\s*"(/[^"]*)"\s*,\s*(\w+)\s*,\s*([^,{}]+?)\s*,\s*([^{}]+?)\s*\}')
TABLE = re.compile(r"const\s+ah_route\s+(\w+)\s*\[\s*\]\s*=\s*\{(.*?)\n\s*\}\s*;", re.S)


def c_routes():
    """{(METHOD, normalised path): flags} of every table that handlers/routes.c lists."""
    with open(os.path.join(HANDLERS, "routes.c"), encoding="utf-8") as f:
        src = f.read()
    listed = set(re.findall(r"\b(ah_\w+_routes)\b", src.split("ah_route_tables[]", 1)[1]))
    routes, found = {}, set()
    for name in sorted(os.listdir(HANDLERS)):
        if not name.endswith(".c"):
            continue
        with open(os.path.join(HANDLERS, name), encoding="utf-8") as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        for table, body in TABLE.findall(text):
            if table not in listed:
                continue
            found.add(table)
            for method, pattern, _fn, flags, _limit in ROW.findall(body):
                routes[(method, norm(pattern))] = flags
    assert found == listed, f"route tables listed in routes.c but not found: {sorted(listed - found)}"
    return routes


def doc_routes(doc):
    return {(m, norm(p)) for m, p, _ in operations(doc)}


# ---- probing ----

FAKE = {"slug": "no-such-agent-" + uuid.uuid4().hex[:8], "key": "NO_SUCH_SECRET"}


def concrete(path):
    """The path template with made-up values that name nothing."""
    def sub(m):
        name = m.group(1)
        if name == "id":  # an API key's id or a session's
            return ("key_" + "Z" * 22) if path.startswith("/api-keys") else "no-such-session"
        return FAKE.get(name, "no-such-" + name)
    return re.sub(r"\{([^}]*)\}", sub, path)


def probe(client, method, path):
    """One harmless request: made-up path values; bodies that never validate."""
    kw = {}
    if method in ("POST", "PATCH", "PUT"):
        kw = {"data": b'{"undocumented_property": 1}', "headers": {"Content-Type": "application/json"}}
    return client.request(method, concrete(path), **kw)


def is_router_miss(resp):
    try:
        body = resp.json()
    except ValueError:
        body = None
    return (resp.status_code == 404 and body == ROUTER_404) or resp.status_code == 405


# ---- tests ----

def test_document_is_served_without_credentials(anon, doc):
    r = anon.get("/openapi.json")
    assert r.status_code == 200, r.text[:300]
    assert r.headers["Content-Type"].startswith("application/json")
    served = r.json()
    assert re.match(r"^3\.1\.\d+$", served["openapi"]), served["openapi"]
    assert served["servers"][0]["url"] == "/api/v1"
    assert served == doc, ("the served document differs from docs/openapi.yaml: rebuild "
                           "(ninja regenerates openapi.json) and restart the workers")
    check_response(doc, "GET", "/openapi.json", r)


def test_document_is_well_formed(doc):
    """Every $ref resolves; every operation has an id, tags and an error response;
    public operations say so; lists carry X-Total-Count."""
    def walk(node):
        if isinstance(node, dict):
            if "$ref" in node:
                resolve(doc, node)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids)), "duplicate operationId"
    assert "bearerAuth" in doc["components"]["securitySchemes"]
    for method, path, op in operations(doc):
        assert op.get("tags"), f"{method} {path} has no tags"
        public = op.get("security") == []
        if not public:
            assert "401" in op["responses"], f"{method} {path}: no 401 documented"
            assert "429" in op["responses"], f"{method} {path}: no 429 documented"
        ok = resolve(doc, op["responses"].get("200", {}))
        schema = resolve(doc, ok.get("content", {}).get("application/json", {}).get("schema", {}))
        if schema.get("type") == "array":
            assert "X-Total-Count" in ok.get("headers", {}), f"{method} {path}: list without X-Total-Count"


def test_documented_routes_match_the_route_tables(doc):
    in_c = c_routes()
    c_set, d_set = set(in_c), doc_routes(doc)
    only_c = sorted(c_set - d_set)
    only_doc = sorted(d_set - c_set)
    if only_c or only_doc:
        print("routed but not documented:", only_c)
        print("documented but not routed:", only_doc)
    assert not only_c and not only_doc, \
        f"routed but not documented: {only_c}; documented but not routed: {only_doc}"
    # Public routes (AH_R_PUBLIC) are exactly the operations with `security: []`.
    public_c = {k for k, flags in in_c.items() if "AH_R_PUBLIC" in flags}
    public_doc = {(m, norm(p)) for m, p, op in operations(doc) if op.get("security") == []}
    assert public_c == public_doc, f"public in code {sorted(public_c)} vs in the document {sorted(public_doc)}"


def test_every_documented_route_is_routed(client, doc):
    missing, undocumented_status = [], []
    for method, path, _ in operations(doc):
        r = probe(client, method, path)
        if is_router_miss(r):
            missing.append((method, path, r.status_code))
            continue
        if str(r.status_code) not in doc["paths"][path][method.lower()]["responses"]:
            undocumented_status.append((method, path, r.status_code, r.text[:120]))
    if missing:
        print("documented but the router does not know:", missing)
    assert not missing, f"documented but the router does not know: {missing}"
    assert not undocumented_status, f"probes answered undocumented statuses: {undocumented_status}"


def test_routed_methods_of_documented_paths_are_documented(client, doc):
    """The 405 for an unused method lists (in Allow) every method the router has for
    the path: it must be exactly the documented set."""
    diffs = []
    for path, item in doc["paths"].items():
        documented = {m.upper() for m in METHODS if m in item}
        # OPTIONS: no route uses it (nginx itself refuses TRACE before the router sees it).
        assert "OPTIONS" not in documented
        r = client.request("OPTIONS", concrete(path))
        if r.status_code != 405:
            diffs.append((path, f"expected 405 for an unused method, got {r.status_code}"))
            continue
        assert r.json() == ROUTER_405
        routed = {m.strip() for m in r.headers.get("Allow", "").split(",") if m.strip()}
        if routed != documented:
            diffs.append((path, f"router {sorted(routed)} vs document {sorted(documented)}"))
    if diffs:
        print("method differences:", diffs)
    assert not diffs, diffs


def test_every_table_route_is_routed(client, doc):
    """Also probe the C tables directly, so a table that is parsed but not merged
    by the router (or the reverse) cannot hide."""
    missing = []
    for method, path in sorted(c_routes()):
        r = probe(client, method, path.replace("{}", "{x}"))
        if is_router_miss(r):
            missing.append((method, path))
    assert not missing, f"in the route tables but not routed: {missing}"


def test_validator_rejects_what_it_should(doc):
    """The validator is not vacuous: known-bad records fail."""
    good = {"id": "usr_" + "a" * 22, "email": "a@b.example", "plan": "free", "quota_bytes": 1,
            "created_at": "2026-11-21T23:59:59.123Z", "max_cost_usd_per_day": None,
            "max_cost_usd_per_month": 2.5}
    user = {"$ref": "#/components/schemas/User"}
    assert validate(doc, user, good) == []
    assert validate(doc, user, dict(good, extra=1))
    assert validate(doc, user, dict(good, plan="gold"))
    assert validate(doc, user, {k: v for k, v in good.items() if k != "email"})
    assert validate(doc, user, dict(good, quota_bytes="1"))
    assert validate(doc, user, dict(good, created_at="yesterday"))
    ve = {"$ref": "#/components/schemas/ValidationError"}
    assert validate(doc, ve, {"detail": [{"loc": ["body", "name"], "msg": "m", "type": "missing"}]}) == []
    assert validate(doc, ve, {"detail": [{"loc": ["header"], "msg": "m", "type": "t"}]})
    assert validate(doc, ve, {"detail": "text"})
    create = {"$ref": "#/components/schemas/AgentCreate"}
    assert validate(doc, create, {"name": "a", "source_type": "local"}) == []
    assert validate(doc, create, {"name": "a"}), "a git agent needs git_repo_url"


def test_live_responses_match_the_document(client, anon, doc):
    # The user.
    check_response(doc, "GET", "/users/me", client.get("/users/me"))
    check_response(doc, "GET", "/health", anon.get("/health"))

    # Agents: create, read, list, update.
    r = client.post("/agents", json={"name": "OpenAPI check", "git_repo_url": "https://example.com/r.git",
                                     "description": None, "timeout_seconds": 30})
    assert r.status_code == 201, r.text
    check_response(doc, "POST", "/agents", r)
    slug = r.json()["slug"]
    r = client.post("/agents", json={"name": "local one", "source_type": "local"})
    check_response(doc, "POST", "/agents", r)
    local = r.json()["slug"]
    check_response(doc, "GET", "/agents/{slug}", client.get(f"/agents/{slug}"))
    r = client.get("/agents", params={"limit": 1})
    check_response(doc, "GET", "/agents", r)
    assert len(r.json()) == 1 and r.headers["X-Total-Count"] == "2"
    check_response(doc, "PATCH", "/agents/{slug}", client.patch(f"/agents/{slug}", json={"git_branch": "main"}))

    # Errors: 401, 404, 409, 422 (body and query), 400, 415.
    r = anon.get("/agents")
    assert r.status_code == 401 and r.headers.get("WWW-Authenticate") == "Bearer"
    check_response(doc, "GET", "/agents", r)
    check_response(doc, "GET", "/agents/{slug}", client.get("/agents/no-such-agent"))
    check_response(doc, "POST", "/agents", client.post("/agents", json={"name": "x", "slug": slug,
                                                                        "git_repo_url": "https://e.example/r"}))
    check_response(doc, "POST", "/agents", client.post("/agents", json={"bogus": 1}))
    check_response(doc, "GET", "/agents", client.get("/agents", params={"limit": 0}))
    check_response(doc, "POST", "/agents/{slug}/invoke", client.post(f"/agents/{slug}/invoke", json={"prompt": "hi"}))
    check_response(doc, "DELETE", "/agents/{slug}/sandbox", client.delete(f"/agents/{slug}/sandbox"))
    check_response(doc, "POST", "/agents/{slug}/deploy", client.post(f"/agents/{local}/deploy"))
    check_response(doc, "PUT", "/agents/{slug}/code",
                   client.put(f"/agents/{local}/code", data=b"plain", headers={"Content-Type": "text/plain"}))
    check_response(doc, "PUT", "/agents/{slug}/code",
                   client.put(f"/agents/{local}/code", data=b"not gzip", headers={"Content-Type": "application/gzip"}))
    check_response(doc, "PUT", "/agents/{slug}/code",
                   client.put(f"/agents/{local}/code", data=b"\x1f\x8b" + b"\0" * 32,
                              headers={"Content-Type": "application/gzip"}))

    # Secrets.
    check_response(doc, "POST", "/agents/{slug}/secrets",
                   client.post(f"/agents/{slug}/secrets", json={"key": "TOKEN", "value": "s3cret"}))
    check_response(doc, "GET", "/agents/{slug}/secrets", client.get(f"/agents/{slug}/secrets"))
    check_response(doc, "DELETE", "/agents/{slug}/secrets/{key}", client.delete(f"/agents/{slug}/secrets/TOKEN"))

    # Sessions, history, usage.
    check_response(doc, "GET", "/agents/{slug}/sessions", client.get(f"/agents/{slug}/sessions"))
    check_response(doc, "GET", "/agents/{slug}/invocations", client.get(f"/agents/{slug}/invocations"))
    check_response(doc, "GET", "/usage", client.get("/usage", params={"days": 7}))
    r = client.get("/usage/daily", params={"days": 3})
    check_response(doc, "GET", "/usage/daily", r)
    assert len(r.json()["items"]) == 3
    check_response(doc, "GET", "/usage", client.get("/usage", params={"days": 366}))

    # API keys.
    r = client.post("/api-keys", json={"name": "openapi"})
    check_response(doc, "POST", "/api-keys", r)
    key_id = r.json()["api_key"]["id"]
    check_response(doc, "GET", "/api-keys", client.get("/api-keys"))
    check_response(doc, "DELETE", "/api-keys/{id}", client.delete(f"/api-keys/{key_id}"))

    # Delete.
    check_response(doc, "DELETE", "/agents/{slug}", client.delete(f"/agents/{slug}"))
    check_response(doc, "DELETE", "/agents/{slug}", client.delete(f"/agents/{slug}"))
