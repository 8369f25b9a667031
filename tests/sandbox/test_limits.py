"""Resource limits and what happens at them: memory, processes, open files,
disk, CPU, time and output."""
import json


def test_memory_over_cap_is_oom_killed_and_reported(sandbox):
    r = sandbox.run("""
const bufs = [];
for (let i = 0; i < 48; i++) { bufs.push(Buffer.alloc(64 << 20, 1)); }   // 3 GB, touched
console.log('survived');
""", timeout=120)
    assert r["oom_killed"] is True, r
    assert r["signal"] == 9 and r["exit_code"] == -1
    assert "survived" not in r["stdout"]


def test_memory_under_cap_is_fine(sandbox):
    r = sandbox.run("""
const bufs = [];
for (let i = 0; i < 8; i++) bufs.push(Buffer.alloc(64 << 20, 1));   // 512 MB
console.log('ok');
""")
    assert r["exit_code"] == 0 and r["stdout"] == "ok\n" and not r["oom_killed"]


def test_fork_bomb_is_contained(sandbox):
    r = sandbox.run(cmd=["/app/probe", "forkbomb"], args=["--pids", "64", "--timeout", "5000"])
    first = r["stdout"].split("\n")[0]
    forked = int(first.split()[0].split("=")[1])
    assert forked < 64 and "EAGAIN" in first, first
    # And the sandbox tidies up: the run ends (children killed with the pid ns).
    assert r["timed_out"] is False


def test_open_files_cap(sandbox):
    r = sandbox.run(cmd=["/app/probe", "nofile"], args=["--nofile", "100"])
    opened = int(r["stdout"].split()[0].split("=")[1])
    assert opened <= 100 and "EMFILE" in r["stdout"]


def test_disk_cap_gives_enospc(sandbox):
    r = sandbox.run("""
const fs = require('fs');
const chunk = Buffer.alloc(1 << 20, 7);
const res = {};
for (const dir of ['/app', '/tmp']) {
  let n = 0;
  try { const fd = fs.openSync(dir + '/big', 'w');
        for (; n < 200; n++) fs.writeSync(fd, chunk); fs.fsyncSync(fd); fs.closeSync(fd); res[dir] = 'ok ' + n; }
  catch (e) { res[dir] = e.code + ' ' + n; }
  try { fs.unlinkSync(dir + '/big'); } catch (e) {}
}
console.log(JSON.stringify(res));
""", args=["--disk-mb", "64"])
    res = json.loads(r["stdout"])
    for d in ("/app", "/tmp"):
        code, n = res[d].split()
        assert code in ("ENOSPC", "EFBIG"), res
        assert int(n) <= 64


def test_cpu_quota(sandbox):
    r = sandbox.run("""
const { Worker } = require('worker_threads');
const spin = 'const e = Date.now() + 1500; while (Date.now() < e) {}';
const t0 = Date.now(), c0 = process.cpuUsage();
let left = 3;
for (let i = 0; i < 3; i++) new Worker(spin, { eval: true }).on('exit', () => {
  if (--left) return;
  const c = process.cpuUsage(c0), wall = Date.now() - t0;
  console.log(((c.user + c.system) / 1000 / wall).toFixed(2));
});
""", args=["--cpus", "1"])
    assert float(r["stdout"]) <= 1.3, r["stdout"]


def test_timeout_kills_a_program_that_ignores_sigterm(sandbox):
    r = sandbox.run("""
process.on('SIGTERM', () => {}); process.on('SIGINT', () => {});
require('child_process').spawn('/usr/bin/node', ['-e', 'setInterval(() => {}, 1000)'], {detached: true});
setInterval(() => {}, 1000);
""", args=["--timeout", "1000"])
    assert r["timed_out"] is True and r["signal"] == 9
    assert r["duration_ms"] < 4000


def test_stdout_cap_kills_and_truncates(sandbox):
    r = sandbox.run("""
const line = 'x'.repeat(1023) + '\\n';
function more() { while (process.stdout.write(line)) {} process.stdout.once('drain', more); }
more();
""", args=["--max-output", "100000", "--timeout", "20000"])
    assert r["output_truncated"] is True and r["timed_out"] is False
    assert len(r["stdout"]) == 100000
    assert r["signal"] == 9


def test_program_exiting_before_reading_stdin(sandbox):
    big = "p" * (5 << 20)
    path = sandbox.write("prompt.txt", big)
    sandbox.write("agent.js", "process.exit(3);")
    p = sandbox.cli(["--image", sandbox.image, "--stdin-file", path, "--repeat", "3"],
                    ["/usr/bin/node", "agent.js"], timeout=60)
    assert p.returncode == 0, p.stderr
    runs = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert [x["exit_code"] for x in runs] == [3, 3, 3]


def test_processes_do_not_outlive_their_run(sandbox):
    sandbox.write("agent.js", """
const fs = require('fs');
const mine = fs.readdirSync('/proc').filter(x => /^\\d+$/.test(x)).length;
require('child_process').spawn('/usr/bin/sleep', ['100'], {detached: true, stdio: 'ignore'}).unref();
console.log(mine);
""")
    p = sandbox.cli(["--image", sandbox.image, "--session", "--repeat", "2"],
                    ["/usr/bin/node", "agent.js"])
    runs = [json.loads(l) for l in p.stdout.decode().splitlines()]
    # The second run sees only itself: the first run's sleep was killed.
    assert [x["stdout"].strip() for x in runs] == ["1", "1"], runs
