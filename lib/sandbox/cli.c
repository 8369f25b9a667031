/* agenthost-sandbox: run one command in a sandbox from the command line, for
 * tests and the benchmark. Prints one JSON object per run on stdout.
 *
 *   agenthost-sandbox [options] -- /usr/bin/node agent.js
 *     --image DIR                /app: overlay of DIR
 *     --build                    a deploy's build sandbox (torn down at once)
 *     --stdout-file FILE         stdout into FILE (capped by --max-output)
 *     --stdin TEXT | --stdin-file FILE
 *     --env NAME=VALUE           repeatable; PATH and HOME are always set
 *     --timeout MS  --max-output BYTES  --cwd DIR
 *     --memory-mb N --disk-mb N --pids N --nofile N --cpus N
 *     --repeat N                 N times create + exec + destroy (pool in use)
 *     --session                  with --repeat: one sandbox, N execs
 *     --between-ms MS            session: pause between its runs (0)
 *     --run-env NAME             NAME=<run number, from 1> in each run's environment
 *     --bench N                  N rounds of bare vs sandboxed, prints medians
 *     --pause-ms MS              bench: pause after each run (default 100)
 *     --quiet                    no per-run JSON
 *   agenthost-sandbox --seccomp-bench N
 *     what the seccomp filter costs a program: its load (each exec) and a
 *     system call without and with it, medians over N children
 * Exit status: 0 when every run happened (whatever the program's status). */
#include "sandbox/sandbox.h"
#include "sandbox/internal.h"

#include "core/config.h"
#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/seccomp.h>

typedef struct opts {
	ah_sandbox_spec spec;
	ah_sandbox_exec_spec x;
	const char *env[256];
	int nenv, repeat, bench, pause_us, between_us;
	const char *run_env;
	bool session, quiet;
	char *stdin_buf;
} opts;

static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void print_result(const char *id, const ah_sandbox_result *r)
{
	printf("{\"sandbox_id\":\"%s\",\"exit_code\":%d,\"signal\":%d,\"timed_out\":%s,"
	       "\"oom_killed\":%s,\"output_truncated\":%s,\"duration_ms\":%lld,"
	       "\"premade\":%s,\"stdout\":",
	       id, r->exit_code, r->signal, r->timed_out ? "true" : "false",
	       r->oom_killed ? "true" : "false", r->output_truncated ? "true" : "false",
	       r->duration_ms, r->premade ? "true" : "false");
	json_str(stdout, r->out ? r->out : "", r->out_len);
	printf(",\"stderr_tail\":");
	json_str(stdout, r->err_tail ? r->err_tail : "", r->err_tail ? strlen(r->err_tail) : 0);
	printf("}\n");
	fflush(stdout);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 65536, n = 0;
	char *b = malloc(cap);
	size_t k;
	while (b && (k = fread(b + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap) {
			char *nb = realloc(b, cap *= 2);
			if (!nb) {
				free(b);
				b = NULL;
			}
			b = nb;
		}
	}
	fclose(f);
	*len = n;
	return b;
}

static long long num(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || *end || end == s) {
		fprintf(stderr, "agenthost-sandbox: not a number: %s\n", s);
		exit(2);
	}
	return v;
}

static int parse(opts *o, int argc, char **argv)
{
	int i = 1;
	o->env[o->nenv++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	o->env[o->nenv++] = "HOME=/tmp";
	o->repeat = 1;
	o->pause_us = 100000;
	o->x.timeout_ms = 30000;
	o->x.log_tag = "cli";
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--session")) { o->session = true; continue; }
		if (!strcmp(a, "--quiet")) { o->quiet = true; continue; }
		if (!strcmp(a, "--build")) { o->spec.build = true; continue; }
		if (!v) return -1;
		i++;
		if (!strcmp(a, "--image")) o->spec.image_dir = v;
		else if (!strcmp(a, "--stdout-file")) {
			o->x.stdout_fd = open(v, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
			if (o->x.stdout_fd < 0) { perror(v); exit(2); }
			o->x.stdout_to_fd = true;
		}
		else if (!strcmp(a, "--stdin")) { o->x.stdin_data = v; o->x.stdin_len = strlen(v); }
		else if (!strcmp(a, "--stdin-file")) {
			o->stdin_buf = read_file(v, &o->x.stdin_len);
			if (!o->stdin_buf) { perror(v); exit(2); }
			o->x.stdin_data = o->stdin_buf;
		}
		else if (!strcmp(a, "--env") && o->nenv < 254) o->env[o->nenv++] = v;
		else if (!strcmp(a, "--timeout")) o->x.timeout_ms = (int)num(v);
		else if (!strcmp(a, "--max-output")) o->x.max_output = (size_t)num(v);
		else if (!strcmp(a, "--cwd")) o->x.cwd = v;
		else if (!strcmp(a, "--memory-mb")) o->spec.memory_bytes = num(v) << 20;
		else if (!strcmp(a, "--disk-mb")) o->spec.disk_bytes = num(v) << 20;
		else if (!strcmp(a, "--pids")) o->spec.pids_max = (int)num(v);
		else if (!strcmp(a, "--nofile")) o->spec.nofile = (int)num(v);
		else if (!strcmp(a, "--cpus")) o->spec.cpus = (int)num(v);
		else if (!strcmp(a, "--repeat")) o->repeat = (int)num(v);
		else if (!strcmp(a, "--bench")) o->bench = (int)num(v);
		else if (!strcmp(a, "--pause-ms")) o->pause_us = (int)num(v) * 1000;
		else if (!strcmp(a, "--between-ms")) o->between_us = (int)num(v) * 1000;
		else if (!strcmp(a, "--run-env")) o->run_env = v;
		else return -1;
	}
	if (i + 1 >= argc)
		return -1;
	o->env[o->nenv] = NULL;
	o->x.argv = (const char *const *)(argv + i + 1);
	o->x.envp = o->env;
	return 0;
}

/* Phase times of the last run_once, in microseconds (for --bench). */
static long long phase_us[3];

/* One sandboxed run (the n-th, from 1): create, exec, destroy. */
static int run_once(const opts *o, ah_sandbox *keep, int n)
{
	long long t0 = ah_mono_us();
	ah_err err = { 0 };
	ah_sandbox *sb = keep;
	ah_sandbox_result r;
	if (!sb && ah_sandbox_create(&sb, &o->spec, &err) != 0) {
		fprintf(stderr, "agenthost-sandbox: create: %s\n", err.msg);
		return -1;
	}
	long long t1 = ah_mono_us();
	ah_sandbox_exec_spec x = o->x;
	x.last = !keep; /* a session's sandbox takes more */
	const char *env[sizeof o->env / sizeof o->env[0] + 1];
	char run_var[128];
	if (o->run_env) {
		memcpy(env, o->env, sizeof o->env);
		snprintf(run_var, sizeof run_var, "%s=%d", o->run_env, n);
		env[o->nenv] = run_var;
		env[o->nenv + 1] = NULL;
		x.envp = env;
	}
	int rc = ah_sandbox_exec(sb, &x, &r, &err);
	long long t2 = ah_mono_us();
	if (rc == 0) {
		if (!o->quiet)
			print_result(ah_sandbox_id(sb), &r);
		ah_sandbox_result_free(&r);
	} else {
		fprintf(stderr, "agenthost-sandbox: exec: %s\n", err.msg);
	}
	if (!keep)
		ah_sandbox_destroy(sb);
	phase_us[0] = t1 - t0;
	phase_us[1] = t2 - t1;
	phase_us[2] = ah_mono_us() - t2;
	return rc;
}

/* The same program without a sandbox, stdin and stdout through pipes as in
 * the sandbox, for the benchmark's baseline. */
static int bare_once(const opts *o)
{
	int in[2], out[2];
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (o->spec.image_dir)
		posix_spawn_file_actions_addchdir_np(&fa, o->spec.image_dir);
	pid_t pid;
	int rc = posix_spawn(&pid, o->x.argv[0], &fa, NULL, (char *const *)o->x.argv,
	                     (char *const *)o->x.envp);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	if (rc == 0 && o->x.stdin_len &&
	    write(in[1], o->x.stdin_data, o->x.stdin_len) < 0)
		rc = -1;
	close(in[1]);
	char b[65536];
	while (read(out[0], b, sizeof b) > 0)
		;
	close(out[0]);
	if (rc == 0)
		waitpid(pid, NULL, 0);
	return rc;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static double median_ms(long long *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_ll);
	return (n % 2 ? (double)v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0) / 1000.0;
}

/* Interleaved rounds so that both sides see the same machine state; the pool
 * refills between rounds as it would between requests. */
static int bench(opts *o)
{
	long long *bare = calloc((size_t)o->bench, sizeof *bare);
	long long *sand = calloc((size_t)o->bench, sizeof *sand);
	long long *ph[3];
	for (int k = 0; k < 3; k++)
		ph[k] = calloc((size_t)o->bench, sizeof **ph);
	int rc = 0;
	o->quiet = true;
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < o->bench && rc == 0; i++) {
		long long t = ah_mono_us();
		rc = bare_once(o);
		bare[i] = ah_mono_us() - t;
		usleep(o->pause_us);
		t = ah_mono_us();
		rc = rc ? rc : run_once(o, NULL, 1);
		sand[i] = ah_mono_us() - t;
		for (int k = 0; k < 3; k++)
			ph[k][i] = phase_us[k];
		usleep(o->pause_us);
	}
	if (rc == 0) {
		double b = median_ms(bare, o->bench), s = median_ms(sand, o->bench);
		printf("{\"runs\":%d,\"bare_median_ms\":%.2f,\"sandbox_median_ms\":%.2f,"
		       "\"overhead_ms\":%.2f,\"ratio\":%.3f,\"create_median_ms\":%.2f,"
		       "\"exec_median_ms\":%.2f,\"destroy_median_ms\":%.2f}\n", o->bench, b, s,
		       s - b, s / b, median_ms(ph[0], o->bench), median_ms(ph[1], o->bench),
		       median_ms(ph[2], o->bench));
	}
	for (int k = 0; k < 3; k++)
		free(ph[k]);
	free(bare);
	free(sand);
	return rc;
}

/* ---- --seccomp-bench ---- */

typedef struct sc_sample {
	long long load_ns, bare_ns, filter_ns;
} sc_sample;

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

enum { SC_CALLS = 20000 };

/* A call the filter allows and the kernel does next to nothing for. */
static long long per_call_ns(void)
{
	long long t = now_ns();
	for (int i = 0; i < SC_CALLS; i++)
		syscall(SYS_getppid);
	return (now_ns() - t) / SC_CALLS;
}

/* One child: calls without the filter, the load as agent_main makes it
 * (no_new_privs, then the filter), calls with it. */
__attribute__((noreturn)) static void seccomp_child(const struct sock_fprog *p, int fd)
{
	sc_sample s;
	per_call_ns(); /* warm */
	s.bare_ns = per_call_ns();
	long long t = now_ns();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p) < 0)
		_exit(1);
	s.load_ns = now_ns() - t;
	s.filter_ns = per_call_ns();
	_exit(write(fd, &s, sizeof s) == sizeof s ? 0 : 1);
}

static int seccomp_bench(int n)
{
	struct sock_fprog p;
	ah_err err = { 0 };
	if (n <= 0 || sb_seccomp_build(&p, &err) != 0)
		return fprintf(stderr, "agenthost-sandbox: %s\n", n > 0 ? err.msg : "N > 0"), 1;
	long long *v[3];
	int got = 0;
	for (int k = 0; k < 3; k++)
		v[k] = calloc((size_t)n, sizeof **v);
	for (int i = 0; i < n; i++) {
		int pf[2];
		sc_sample s;
		if (pipe(pf) < 0)
			break;
		pid_t pid = fork();
		if (pid == 0)
			seccomp_child(&p, pf[1]);
		close(pf[1]);
		if (pid > 0 && read(pf[0], &s, sizeof s) == sizeof s) {
			v[0][got] = s.load_ns, v[1][got] = s.bare_ns, v[2][got] = s.filter_ns;
			got++;
		}
		close(pf[0]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	if (got == n)
		printf("{\"runs\":%d,\"filter_instructions\":%u,\"load_median_us\":%.1f,"
		       "\"syscall_median_ns_bare\":%.0f,\"syscall_median_ns_filter\":%.0f}\n", n,
		       p.len, median_ms(v[0], n), median_ms(v[1], n) * 1000, median_ms(v[2], n) * 1000);
	for (int k = 0; k < 3; k++)
		free(v[k]);
	free(p.filter);
	return got == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--seccomp-bench"))
		return seccomp_bench((int)num(argv[2]));
	opts o = { 0 };
	ah_log_set_program("agenthost-sandbox");
	if (parse(&o, argc, argv) < 0) {
		fprintf(stderr, "usage: agenthost-sandbox [--image DIR|--work DIR] [options] -- CMD ARGS\n");
		return 2;
	}
	ah_config *cfg = NULL;
	ah_err err = { 0 };
	if (ah_config_load(&cfg, NULL, &err) != 0 || ah_sandbox_init(&ah_settings_of(cfg)->sandbox, &err) != 0) {
		fprintf(stderr, "agenthost-sandbox: %s\n", err.msg);
		ah_config_free(cfg);
		return 1;
	}
	int rc = 0;
	if (o.bench > 0) {
		rc = bench(&o);
	} else if (o.session) {
		ah_sandbox *sb = NULL;
		rc = ah_sandbox_create(&sb, &o.spec, &err);
		if (rc)
			fprintf(stderr, "agenthost-sandbox: create: %s\n", err.msg);
		for (int i = 0; i < o.repeat && rc == 0; i++) {
			if (i > 0 && o.between_us > 0)
				usleep((useconds_t)o.between_us);
			rc = run_once(&o, sb, i + 1);
		}
		ah_sandbox_destroy(sb);
	} else {
		for (int i = 0; i < o.repeat && rc == 0; i++)
			rc = run_once(&o, NULL, i + 1);
	}
	ah_sandbox_shutdown();
	ah_config_free(cfg);
	free(o.stdin_buf);
	return rc ? 1 : 0;
}
