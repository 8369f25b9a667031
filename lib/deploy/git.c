/* Fetching a git agent's code: the URL policy (git_url.c), then a libgit2 clone in a child
 * process.
 *
 * The child exists for the deadline: libgit2 1.5 has no connect timeout and no
 * shallow clone, and a callback-only deadline cannot interrupt a stalled connect.
 * A child can simply be killed (alarm(2) in the child, SIGKILL from the parent
 * when the runner shuts down). It also keeps libgit2's global state out of the
 * runner. The child reads no host git configuration (url.insteadOf could turn a
 * URL into a local path) and follows no redirects (one could lead to a private
 * host after the check).
 *
 * The URL policy is git_url.c's. Unless the target is an allowed private host,
 * the child joins a sandbox slot's network namespace before it connects: what
 * libgit2 resolves again (DNS rebinding) can then reach nothing but the
 * outside, as from a sandbox. */
#include "deploy/deploy.h"
#include "core/log.h"
#include "sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Exit codes of the clone child, mapped back to ah error codes and to fixed
 * messages: libgit2's own text can carry what a foreign server answered (an
 * HTTP status line, a banner), which is not the user's to read. */
enum {
	CHILD_OK = 0, CHILD_FAIL = 1, CHILD_INVALID = 10, CHILD_TOOBIG = 11,
	CHILD_TIMEOUT = 12, CHILD_AUTH = 13, CHILD_RESOLVE = 14, CHILD_REFUSED = 15,
	CHILD_CONNECT = 16, CHILD_CONNECT_TIMEOUT = 17, CHILD_NOTFOUND = 18,
	CHILD_TLS = 19, CHILD_NONET = 20, CHILD_CHECKOUT = 21,
};

/* ---- the clone child ----------------------------------------------------- */

struct clone_ctx {
	const struct ah_git_opts *opts;
	time_t deadline;
	int why; /* CHILD_TOOBIG / CHILD_TIMEOUT when a callback aborted */
};

static int on_transfer(const git_indexer_progress *st, void *payload)
{
	struct clone_ctx *c = payload;
	if ((long long)st->received_bytes > c->opts->max_bytes)
		c->why = CHILD_TOOBIG;
	else if (time(NULL) > c->deadline)
		c->why = CHILD_TIMEOUT;
	return c->why ? -1 : 0;
}

static int on_credentials(git_credential **out, const char *url, const char *user,
                          unsigned int allowed, void *payload)
{
	struct clone_ctx *c = payload;
	(void)url;
	if ((allowed & GIT_CREDENTIAL_SSH_KEY) && c->opts->ssh_key && *c->opts->ssh_key)
		return git_credential_ssh_key_new(out, user ? user : "git", NULL, c->opts->ssh_key, NULL);
	return GIT_PASSTHROUGH;
}

/* Sums the sizes of the blobs a checkout of tree would write (object headers
 * only, nothing inflated): a pack of a few KB can hold gigabytes of zeros, so
 * the transfer cap alone does not bound what lands on disk. */
struct size_walk {
	git_odb *odb;
	long long total, max;
	bool failed;
};

static int add_blob(const char *root, const git_tree_entry *e, void *payload)
{
	struct size_walk *w = payload;
	size_t len = 0;
	git_object_t type;
	(void)root;
	if (git_tree_entry_type(e) != GIT_OBJECT_BLOB)
		return 0;
	if (git_odb_read_header(&len, &type, w->odb, git_tree_entry_id(e)) != 0) {
		w->failed = true;
		return -1;
	}
	w->total += (long long)len;
	return w->total > w->max ? -1 : 0;
}

static int tree_size_check(git_repository *repo, git_object *commit, long long max)
{
	git_tree *tree = NULL;
	struct size_walk w = {.max = max};
	int rc = git_repository_odb(&w.odb, repo);
	if (rc == 0)
		rc = git_commit_tree(&tree, (git_commit *)commit);
	if (rc == 0)
		git_tree_walk(tree, GIT_TREEWALK_PRE, add_blob, &w);
	git_tree_free(tree);
	git_odb_free(w.odb);
	if (rc != 0 || w.failed)
		return CHILD_FAIL;
	return w.total > max ? CHILD_TOOBIG : CHILD_OK;
}

/* Checks out branch (remote branch first, then tag; the remote's default
 * branch when none is named) as a detached HEAD, if its files fit the cap. */
static int checkout_ref(git_repository *repo, const char *branch, long long max_bytes)
{
	char name[512];
	git_object *obj = NULL;
	const char *forms[] = {"refs/remotes/origin/%s", "refs/tags/%s"};
	int rc = GIT_ENOTFOUND;
	if (!branch || !*branch) {
		rc = git_revparse_single(&obj, repo, "HEAD");
		if (rc == GIT_EUNBORNBRANCH || rc == GIT_ENOTFOUND)
			return CHILD_OK; /* an empty repository: nothing to check out */
		if (rc != 0)
			return CHILD_FAIL;
	}
	for (size_t i = 0; i < 2 && rc != 0; i++) {
		snprintf(name, sizeof(name), forms[i], branch);
		rc = git_revparse_single(&obj, repo, name);
	}
	if (rc != 0)
		return CHILD_INVALID;
	git_object *commit = NULL;
	git_checkout_options co = GIT_CHECKOUT_OPTIONS_INIT;
	co.checkout_strategy = GIT_CHECKOUT_FORCE;
	int out = CHILD_FAIL;
	if (git_object_peel(&commit, obj, GIT_OBJECT_COMMIT) == 0)
		out = tree_size_check(repo, commit, max_bytes);
	if (out == CHILD_OK && (git_checkout_tree(repo, commit, &co) != 0 ||
	                        git_repository_set_head_detached(repo, git_object_id(commit)) != 0))
		out = CHILD_FAIL;
	git_object_free(commit);
	git_object_free(obj);
	return out;
}

/* What went wrong, from libgit2's error (1.5's wording), as an exit code. */
static int failure_kind(int rc)
{
	const git_error *e = git_error_last();
	const char *m = e && e->message ? e->message : "";
	if (rc == GIT_EAUTH || strstr(m, "status code: 401"))
		return CHILD_AUTH;
	if (rc == GIT_ECERTIFICATE || (e && e->klass == GIT_ERROR_SSL))
		return CHILD_TLS;
	if (strstr(m, "failed to resolve address"))
		return CHILD_RESOLVE;
	if (strstr(m, "failed to connect to"))
		return strstr(m, "refused") ? CHILD_REFUSED :
		       strstr(m, "timed out") ? CHILD_CONNECT_TIMEOUT : CHILD_CONNECT;
	/* HTTP 403/404, or git daemon's "access denied or repository not
	 * exported" (a remote error): the server found nothing it would give. */
	if (strstr(m, "status code: 403") || strstr(m, "status code: 404") ||
	    strstr(m, "remote error") || rc == GIT_ENOTFOUND)
		return CHILD_NOTFOUND;
	return CHILD_FAIL;
}

static int child_clone(const char *url, const char *branch, const char *dest,
                       const struct ah_git_opts *opts)
{
	struct clone_ctx ctx = {.opts = opts, .deadline = time(NULL) + opts->timeout_seconds};
	git_libgit2_init();
	for (int lvl = GIT_CONFIG_LEVEL_PROGRAMDATA; lvl <= GIT_CONFIG_LEVEL_GLOBAL; lvl++)
		git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, lvl, "");
	git_clone_options co = GIT_CLONE_OPTIONS_INIT;
	co.fetch_opts.callbacks.transfer_progress = on_transfer;
	co.fetch_opts.callbacks.credentials = on_credentials;
	co.fetch_opts.callbacks.payload = &ctx;
	co.fetch_opts.follow_redirects = GIT_REMOTE_REDIRECT_NONE;
	/* Checked out below, after the size check (and a tag is not a branch to git_clone). */
	co.checkout_opts.checkout_strategy = GIT_CHECKOUT_NONE;
	git_repository *repo = NULL;
	int rc = git_clone(&repo, url, dest, &co);
	const git_error *e = git_error_last();
	if (rc != 0) {
		/* For the runner's log only: never the user's status_message. */
		fprintf(stderr, "%s", e && e->message ? e->message : "unknown error");
		return ctx.why ? ctx.why : failure_kind(rc);
	}
	int out = checkout_ref(repo, branch, opts->max_bytes);
	if (out == CHILD_FAIL) { /* fetched fine: the failure is this machine's */
		e = git_error_last();
		fprintf(stderr, "%s", e && e->message ? e->message : "checkout failed");
		out = CHILD_CHECKOUT;
	}
	git_repository_free(repo);
	return out;
}

/* The child's network: the borrowed namespace, and the sandbox's resolvers
 * (glibc reads /etc/resolv.conf, the host's; in a mount namespace of the
 * child's own it is replaced by the file the parent wrote). */
static int child_enter(int netns, const char *resolv)
{
	if (setns(netns, CLONE_NEWNET) < 0 || unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0) {
		fprintf(stderr, "cannot enter the clone's network: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ---- the parent ---------------------------------------------------------- */

/* Reads the child's message until EOF, killing it on cancel. */
static void collect(int fd, pid_t pid, char *msg, size_t cap, const struct ah_git_opts *opts)
{
	size_t len = 0;
	time_t hard = time(NULL) + opts->timeout_seconds + 5;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, 200);
		if ((opts->cancel && *opts->cancel) || time(NULL) > hard) {
			kill(pid, SIGKILL);
			break;
		}
		if (r <= 0)
			continue;
		ssize_t n = read(fd, msg + len, cap - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap - 1)
			break;
	}
	msg[len] = '\0';
}

static int child_result(int status, const char *url, const char *branch,
                        const struct ah_git_opts *opts, ah_err *err)
{
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	char host[256] = "?";
	int port = 0;
	ah_git_url_host(host, sizeof(host), &port, url);
	switch (code) {
	case CHILD_OK:
		return 0;
	case CHILD_INVALID:
		return ah_err_set(err, AH_EINVALID, "Branch or tag \"%.200s\" not found in the "
		                  "repository", branch);
	case CHILD_TOOBIG: /* fetched, or checked out */
		return ah_err_set(err, AH_ETOOBIG, "Repository is too large: more than %lld MB",
		                  opts->max_bytes >> 20);
	case CHILD_TIMEOUT:
		return ah_err_set(err, AH_ETIMEOUT, "Repository clone timed out after %d s",
		                  opts->timeout_seconds);
	case CHILD_AUTH:
		return ah_err_set(err, AH_EDENIED, "Repository clone failed: authentication required "
		                  "(public repositories only, or ssh:// with the operator's key)");
	case CHILD_RESOLVE:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: could not resolve host "
		                  "\"%.200s\"", host);
	case CHILD_REFUSED:
	case CHILD_CONNECT:
	case CHILD_CONNECT_TIMEOUT:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: could not connect to "
		                  "%.200s port %d%s", host, port, code == CHILD_REFUSED ?
		                  " (connection refused)" : code == CHILD_CONNECT_TIMEOUT ?
		                  " (timed out)" : "");
	case CHILD_NOTFOUND:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: repository not found or "
		                  "access denied");
	case CHILD_TLS:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: the server's TLS "
		                  "certificate was not accepted");
	case CHILD_NONET:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: could not set up the "
		                  "clone's network on this machine");
	case CHILD_CHECKOUT:
		return ah_err_set(err, AH_EFAIL, "Repository clone failed: could not check out the "
		                  "files on this machine");
	}
	if (opts->cancel && *opts->cancel)
		return ah_err_set(err, AH_EFAIL, "Repository clone cancelled (runner shutting down)");
	/* The child's alarm, or the parent's kill at the hard deadline. */
	if (WIFSIGNALED(status) && (WTERMSIG(status) == SIGALRM || WTERMSIG(status) == SIGKILL))
		return ah_err_set(err, AH_ETIMEOUT, "Repository clone timed out after %d s",
		                  opts->timeout_seconds);
	return ah_err_set(err, AH_EFAIL, "Repository clone failed: the server did not answer as "
	                  "a git server, or the connection broke off");
}

/* HEAD's commit in hex into out (41 bytes), read before .git goes: the deploy
 * record says which commit of the branch was built. Best effort. */
static void head_commit(const char *dest, char *out)
{
	git_repository *repo = NULL;
	git_oid oid;
	out[0] = '\0';
	git_libgit2_init();
	if (git_repository_open_ext(&repo, dest, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) == 0 &&
	    git_reference_name_to_id(&oid, repo, "HEAD") == 0)
		git_oid_tostr(out, 41, &oid);
	git_repository_free(repo);
	git_libgit2_shutdown();
}

/* The image needs no history; links out of the tree are refused as in tarballs. */
static int tidy_checkout(const char *dest, const struct ah_git_opts *opts, ah_err *err)
{
	char p[4096];
	if (opts->commit_out)
		head_commit(dest, opts->commit_out);
	snprintf(p, sizeof(p), "%s/.git", dest);
	if (ah_deploy_rmtree(p) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot remove %s", p);
	int r = ah_deploy_find_escaping_link(p, sizeof(p), dest);
	if (r == 1)
		return ah_err_set(err, AH_EINVALID, "Invalid repository: symlink \"%.200s\" points "
		                  "outside the project", p);
	return r == 0 ? 0 : ah_err_set(err, AH_EFAIL, "cannot walk %s", dest);
}

/* https://user:token@host/...: libgit2's message could repeat the URL. */
static bool has_password(const char *url)
{
	const char *p = strstr(url, "://");
	if (!p)
		return false;
	p += 3;
	size_t auth = strcspn(p, "/?#");
	const char *at = memchr(p, '@', auth);
	return at && memchr(p, ':', (size_t)(at - p));
}

/* Forks the clone child (in netns unless it is -1) and waits for it. */
static int run_child(const char *url, const char *branch, const char *dest,
                     const struct ah_git_opts *opts, int netns, const char *resolv,
                     ah_err *err)
{
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0)
		return ah_err_set(err, AH_EFAIL, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return ah_err_set(err, AH_EFAIL, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* The child: a stalled connect dies with the alarm, whatever libgit2 does. */
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_UNBLOCK, &all, NULL); /* the runner blocks signals for sigwait */
		signal(SIGALRM, SIG_DFL);
		alarm((unsigned)opts->timeout_seconds + 2);
		dup2(fds[1], STDERR_FILENO);
		if (netns >= 0 && child_enter(netns, resolv) < 0)
			_exit(CHILD_NONET);
		_exit(child_clone(url, branch, dest, opts));
	}
	close(fds[1]);
	char msg[512];
	collect(fds[0], pid, msg, sizeof(msg), opts);
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	int rc = child_result(status, url, branch, opts, err);
	if (rc != 0 && msg[0] && !has_password(url))
		ah_log_info("%s: libgit2 said: %.300s", opts->log_tag ? opts->log_tag : "git clone",
		            msg);
	return rc;
}

/* resolv.conf for the isolated child: the sandboxes' resolvers. */
static int write_resolv(const char *path, ah_err *err)
{
	const char *text = ah_sandbox_net_resolv();
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	size_t len = strlen(text);
	bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
	if (fd >= 0)
		close(fd);
	return ok ? 0 : ah_err_set(err, AH_EFAIL, "cannot write %s: %s", path, strerror(errno));
}

int ah_git_clone(const char *url, const char *branch, const char *dest,
                 const struct ah_git_opts *opts, enum ah_git_net net, ah_err *err)
{
	ah_sandbox_net *sn = NULL;
	char resolv[4096] = "";
	int rc = 0;
	if (net == AH_GIT_NET_ISOLATED) {
		ah_err sberr = {0};
		snprintf(resolv, sizeof(resolv), "%s.resolv.conf", dest);
		rc = ah_sandbox_net_borrow(&sn, &sberr);
		if (rc != 0)
			rc = ah_err_set(err, AH_EFAIL, "Repository clone failed: could not set up the "
			                "clone's network on this machine (%s)", sberr.msg);
		if (rc == 0)
			rc = write_resolv(resolv, err);
	}
	if (rc == 0)
		rc = run_child(url, branch, dest, opts, sn ? ah_sandbox_net_fd(sn) : -1, resolv, err);
	if (resolv[0])
		unlink(resolv);
	ah_sandbox_net_return(sn);
	if (rc == 0)
		rc = tidy_checkout(dest, opts, err);
	return rc;
}

int ah_git_fetch(const char *url, const char *branch, const char *dest,
                 const struct ah_git_opts *opts, ah_err *err)
{
	bool host_net = false;
	int rc = ah_git_url_check(url, opts, &host_net, err);
	if (rc == 0)
		rc = ah_git_clone(url, branch, dest, opts, host_net ? AH_GIT_NET_HOST :
		                  AH_GIT_NET_ISOLATED, err);
	return rc;
}
