"""What a program inside a sandbox can see and do: filesystem, identity,
namespaces, privileges, system calls."""
import json
import os
import uuid

READ = """
const fs = require('fs');
const out = {};
for (const p of %s) {
  try { out[p] = fs.readFileSync(p, 'utf8').slice(0, 200); }
  catch (e) { out[p] = 'ERR:' + e.code; }
}
console.log(JSON.stringify(out));
"""


def js_result(r):
    assert r["exit_code"] == 0, r
    return json.loads(r["stdout"])


def test_runs_node_with_stdin_as_unprivileged_user(sandbox):
    r = sandbox.run("""
let d=''; process.stdin.on('data', c => d += c);
process.stdin.on('end', () => { console.log(JSON.stringify({d, uid: process.getuid(),
  gid: process.getgid(), env: process.env, cwd: process.cwd()})); console.error('to the log'); });
""", stdin="hello prompt", env=None, args=["--env", "SECRET_KEY=s3cr3t"])
    out = js_result(r)
    assert out["d"] == "hello prompt"
    assert out["uid"] == 1000 and out["gid"] == 1000
    assert out["cwd"] == "/app"
    # The environment is exactly what the runner passed: nothing of the host's.
    assert out["env"] == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                          "SECRET_KEY": "s3cr3t"}
    assert "to the log" in r["stderr_tail"]


def test_host_files_are_invisible(sandbox, tmp_path):
    secret = f"/root/agenthost-test-{uuid.uuid4().hex}"
    with open(secret, "w") as f:
        f.write("host secret")
    try:
        paths = [secret, "/etc/shadow", "/etc/machine-id", "/work/main/meson.build",
                 sandbox.root + "/agenthost.conf", "/sys/kernel/hostname", "/home"]
        out = js_result(sandbox.run(READ % json.dumps(paths)))
    finally:
        os.unlink(secret)
    for p in paths:
        assert out[p].startswith("ERR:"), (p, out[p])


def test_curated_etc_and_readonly_system(sandbox):
    r = sandbox.run("""
const fs = require('fs');
const ls = d => { try { return fs.readdirSync(d).sort(); } catch (e) { return 'ERR:' + e.code; } };
const tryw = p => { try { fs.writeFileSync(p, 'x'); return 'ok'; } catch (e) { return e.code; } };
console.log(JSON.stringify({root: ls('/'), sbx: ls('/.sbx'), etc: ls('/etc'), dev: ls('/dev'),
  passwd: fs.readFileSync('/etc/passwd', 'utf8'), usr: tryw('/usr/bin/evil'),
  etcw: tryw('/etc/passwd'), rootw: tryw('/evil'), tmp: tryw('/tmp/ok'), app: tryw('/app/new'),
  hostname: require('os').hostname()}));
""")
    out = js_result(r)
    # /files: managed files (attachments, session outputs) on the sandbox's own disk
    assert set(out["root"]) <= {"app", "bin", "dev", "etc", "lib", "lib32", "lib64", "libx32",
                                "proc", "sbin", "tmp", "usr", ".sbx", "files"}, out["root"]
    assert out["sbx"] == "ERR:EACCES"  # the disk's old mount point: empty, root's
    assert "shadow" not in out["etc"] and "passwd" in out["etc"]
    assert set(out["dev"]) <= {"null", "zero", "full", "random", "urandom", "fd", "stdin",
                               "stdout", "stderr", "shm"}, out["dev"]
    assert "agent:x:1000:1000" in out["passwd"] and "root:x:0:0:root:/root:" in out["passwd"]
    assert out["usr"] == "EROFS" and out["etcw"] == "EROFS" and out["rootw"] == "EROFS"
    assert out["tmp"] == "ok" and out["app"] == "ok"
    assert out["hostname"] == "sandbox"


def test_host_usr_is_read_only_nosuid_nodev(sandbox):
    """The host's /usr (node and npm are the host's) on every mount of its tree:
    never writable, setuid bits and device nodes ignored."""
    r = sandbox.run(cmd=["/bin/cat", "/proc/self/mountinfo"])
    assert r["exit_code"] == 0, r
    mounts = {}
    for line in r["stdout"].splitlines():
        f = line.split()
        mounts[f[4]] = set(f[5].split(","))
    usr = {m: o for m, o in mounts.items() if m == "/usr" or m.startswith("/usr/")}
    assert "/usr" in usr, mounts
    for m, opts in usr.items():
        assert {"ro", "nosuid", "nodev"} <= opts, (m, opts)


def test_app_writes_stay_in_the_sandbox(sandbox):
    sandbox.write("data.txt", "original")
    js = """
const fs = require('fs');
const before = fs.existsSync('/app/mine.txt');
fs.writeFileSync('/app/data.txt', 'changed'); fs.writeFileSync('/app/mine.txt', 'x');
console.log(JSON.stringify({before}));
"""
    # Session: one sandbox, two runs: writes persist within it.
    sandbox.write("agent.js", js)
    p = sandbox.cli(["--image", sandbox.image, "--session", "--repeat", "2"],
                    ["/usr/bin/node", "agent.js"])
    runs = [json.loads(l) for l in p.stdout.decode().splitlines() if l.startswith("{")]
    assert [json.loads(r["stdout"])["before"] for r in runs] == [False, True]
    # A new sandbox starts from the image again, and the image never changed.
    assert js_result(sandbox.run(js))["before"] is False
    assert open(os.path.join(sandbox.image, "data.txt")).read() == "original"
    assert not os.path.exists(os.path.join(sandbox.image, "mine.txt"))


def test_own_namespaces_and_unprivileged_host_uid(sandbox):
    out = js_result(sandbox.run("""
const fs = require('fs');
const ns = {};
for (const n of ['user','pid','mnt','net','ipc','uts','cgroup']) ns[n] = fs.readlinkSync('/proc/self/ns/' + n);
const pids = fs.readdirSync('/proc').filter(x => /^\\d+$/.test(x));
console.log(JSON.stringify({ns, uid_map: fs.readFileSync('/proc/self/uid_map','utf8'),
  status: fs.readFileSync('/proc/self/status','utf8'), pids,
  cgroup: fs.readFileSync('/proc/self/cgroup','utf8')}));
"""))
    for n, link in out["ns"].items():
        assert link != os.readlink(f"/proc/self/ns/{n}"), n
    inside, outside, count = out["uid_map"].split()
    assert inside == "0" and int(outside) >= 65536  # root inside is not root outside
    status = dict(l.split(":\t", 1) for l in out["status"].splitlines() if ":\t" in l)
    assert status["CapEff"].strip() == "0000000000000000"
    assert status["CapBnd"].strip() == "0000000000000000"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"
    # hidepid: the keeper (pid 1) and the host's processes are invisible.
    assert "1" not in out["pids"] and len(out["pids"]) <= 3, out["pids"]
    # The cgroup namespace hides the host's hierarchy.
    assert "agenthost" not in out["cgroup"]


def test_seccomp_denies_escape_syscalls(sandbox):
    r = sandbox.run(cmd=["/app/probe", "syscalls"])
    res = dict(l.split("=", 1) for l in r["stdout"].split())
    for name, val in res.items():
        if name == "fork":
            assert val == "ok"
        elif name == "clone_newuser":
            assert val in ("EPERM",), (name, val)
        else:
            assert val in ("EPERM", "ENOSYS"), (name, val)


def test_seccomp_is_an_allow_list(sandbox):
    """Calls nobody listed are refused (get_mempolicy, modify_ldt and vmsplice
    went through the deny list before it); some are narrowed by argument; calls
    whose absence callers handle answer ENOSYS, so libc and libuv fall back."""
    r = sandbox.run(cmd=["/app/probe", "allowlist"])
    res = dict(l.split("=", 1) for l in r["stdout"].split())
    assert res == {
        "get_mempolicy": "EPERM", "modify_ldt": "EPERM", "vmsplice": "EPERM",
        "socket_alg": "EPERM", "socket_netlink_audit": "EPERM",
        "socket_inet": "ok", "socket_inet6": "ok", "socket_unix": "ok",
        "socket_netlink_route": "ok",
        "tiocsti": "EPERM", "tiocsti_high_bits": "EPERM",
        "personality_query": "ok", "personality_no_aslr": "EPERM",
        "clone3": "ENOSYS", "io_uring_setup": "ENOSYS", "unknown_nr": "ENOSYS",
    }


def test_node_works_under_the_allow_list(sandbox):
    """What node programs do: threads, child processes, files and watches,
    sockets on the sandbox's own loopback, interfaces, crypto, zlib."""
    out = js_result(sandbox.run("""
const fs = require('fs'), cp = require('child_process'), http = require('http');
const os = require('os'), crypto = require('crypto'), zlib = require('zlib');
const { Worker } = require('worker_threads');
const out = {};
out.sh = cp.execFileSync('/bin/sh', ['-c', 'echo $((6 * 7))']).toString().trim();
fs.mkdirSync('/tmp/d');
fs.writeFileSync('/tmp/d/a', 'x');
fs.renameSync('/tmp/d/a', '/tmp/d/b');
fs.symlinkSync('/tmp/d/b', '/tmp/d/l');
out.file = fs.readFileSync('/tmp/d/l', 'utf8');
out.ifaces = Object.keys(os.networkInterfaces()).sort();
out.gzip = zlib.gunzipSync(zlib.gzipSync('zz')).toString();
out.random = crypto.randomBytes(8).length;
const worker = () => new Promise(ok => new Worker(
  'require("worker_threads").parentPort.postMessage(6 * 7)', { eval: true }).on('message', ok));
const watched = () => new Promise(ok => {
  const w = fs.watch('/tmp/d', (ev, name) => { if (name === 'c') { w.close(); ok(name); } });
  fs.writeFileSync('/tmp/d/c', 'y');
});
const spawned = () => new Promise(ok => {
  let s = ''; const c = cp.spawn('/bin/sh', ['-c', 'echo spawned']);
  c.stdout.on('data', d => s += d); c.on('close', () => ok(s.trim()));
});
const served = () => new Promise((ok, fail) => {
  const srv = http.createServer((q, s) => s.end('served')).listen(0, '127.0.0.1', () => {
    http.get({ host: '127.0.0.1', port: srv.address().port }, r => {
      let b = ''; r.on('data', d => b += d); r.on('end', () => { srv.close(); ok(b); });
    }).on('error', fail);
  });
});
(async () => {
  out.worker = await worker();
  out.watch = await watched();
  out.spawn = await spawned();
  out.http = await served();
  console.log(JSON.stringify(out));
})();
"""))
    assert out == {"sh": "42", "file": "x", "ifaces": out["ifaces"], "gzip": "zz", "random": 8,
                   "worker": 42, "watch": "c", "spawn": "spawned", "http": "served"}
    assert "lo" in out["ifaces"]
