/* Fetching a git agent's code: URL policy, then a libgit2 clone in a child
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
 * Known gap: the host is resolved here and again by libgit2, so DNS rebinding can
 * still reach a private address; cloning inside the sandbox's network namespace
 * would close it. */
#include "deploy/deploy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Exit codes of the clone child, mapped back to ah error codes. */
enum { CHILD_OK = 0, CHILD_FAIL = 1, CHILD_INVALID = 10, CHILD_TOOBIG = 11,
       CHILD_TIMEOUT = 12, CHILD_AUTH = 13 };

/* ---- URL policy ---------------------------------------------------------- */

static bool v4_private(uint32_t a)
{
	static const struct { uint32_t net; int bits; } nets[] = {
		{0x00000000, 8}, {0x0A000000, 8}, {0x64400000, 10}, {0x7F000000, 8},
		{0xA9FE0000, 16}, {0xAC100000, 12}, {0xC0000000, 24}, {0xC0000200, 24},
		{0xC0A80000, 16}, {0xC6120000, 15}, {0xC6336400, 24}, {0xCB007100, 24},
		{0xE0000000, 4}, {0xF0000000, 4},
	};
	for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
		if ((a >> (32 - nets[i].bits)) == (nets[i].net >> (32 - nets[i].bits)))
			return true;
	return false;
}

static bool v6_private(const unsigned char *b)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char zero[15] = {0};
	if (memcmp(b, mapped, 12) == 0 || memcmp(b, zero, 12) == 0)
		return v4_private((uint32_t)b[12] << 24 | b[13] << 16 | b[14] << 8 | b[15]);
	if (memcmp(b, zero, 15) == 0)
		return true;                              /* :: and ::1 */
	return (b[0] & 0xfe) == 0xfc ||               /* fc00::/7 unique local */
	       (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) || /* fe80::/10 link-local */
	       b[0] == 0xff ||                        /* multicast */
	       (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||
	       (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b); /* NAT64 */
}

/* Host part of a URL into host (size n). Handles userinfo and [v6]. */
static int url_host(char *host, size_t n, const char *url, bool *scp)
{
	const char *p = strstr(url, "://");
	*scp = p == NULL;
	p = p ? p + 3 : url;
	const char *end = p + strcspn(p, "/?#");
	const char *at = memchr(p, '@', (size_t)(end - p));
	if (*scp)
		at = memchr(p, '@', strcspn(p, ":"));
	if (at)
		p = at + 1;
	const char *h_end;
	if (*p == '[') {
		p++;
		h_end = strchr(p, ']');
	} else
		h_end = p + strcspn(p, ":/");
	if (!h_end || h_end == p || (size_t)(h_end - p) >= n)
		return AH_EINVALID;
	memcpy(host, p, (size_t)(h_end - p));
	host[h_end - p] = '\0';
	return 0;
}

static int scheme_check(const char *url, ah_err *err)
{
	static const char *const ok[] = {"https://", "http://", "git://", "ssh://",
	                                 "ssh+git://", "git+ssh://"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (strncmp(url, ok[i], strlen(ok[i])) == 0)
			return 0;
	const char *colon = strchr(url, ':');
	const char *slash = strchr(url, '/');
	/* scp-like user@host:path; anything else (file://, a path) is local. */
	if (!strstr(url, "://") && colon && colon != url && (!slash || colon < slash))
		return 0;
	return ah_err_set(err, AH_EDENIED, "Repository URL \"%.200s\" is not allowed: use an "
	                  "https://, ssh:// or git:// URL", url);
}

static int host_check(const char *host, ah_err *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	int g = getaddrinfo(host, NULL, &hints, &res);
	if (g != 0)
		return ah_err_set(err, AH_EFAIL, "Repository host \"%.200s\" could not be resolved (%s)",
		                  host, gai_strerror(g));
	int rc = 0;
	for (struct addrinfo *ai = res; ai && rc == 0; ai = ai->ai_next) {
		bool priv = false;
		if (ai->ai_family == AF_INET)
			priv = v4_private(ntohl(((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr));
		else if (ai->ai_family == AF_INET6)
			priv = v6_private(((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr.s6_addr);
		if (priv)
			rc = ah_err_set(err, AH_EDENIED, "Repository host \"%.200s\" is a private, loopback "
			                "or link-local address, which is not allowed", host);
	}
	freeaddrinfo(res);
	return rc;
}

int ah_git_url_check(const char *url, bool allow_private, ah_err *err)
{
	char host[256];
	bool scp;
	if (!url || !*url)
		return ah_err_set(err, AH_EINVALID, "The agent has no git_repo_url");
	int rc = scheme_check(url, err);
	if (rc != 0)
		return rc;
	if (url_host(host, sizeof(host), url, &scp) != 0)
		return ah_err_set(err, AH_EINVALID, "Repository URL \"%.200s\" has no host", url);
	return allow_private ? 0 : host_check(host, err);
}

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
	if (rc != 0) {
		const git_error *e = git_error_last();
		fprintf(stderr, "%s", e && e->message ? e->message : "unknown error");
		return ctx.why ? ctx.why : rc == GIT_EAUTH ? CHILD_AUTH : CHILD_FAIL;
	}
	int out = checkout_ref(repo, branch, opts->max_bytes);
	if (out == CHILD_FAIL) {
		const git_error *e = git_error_last();
		fprintf(stderr, "%s", e && e->message ? e->message : "checkout failed");
	}
	git_repository_free(repo);
	return out;
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

static int child_result(int status, const char *msg, const char *branch,
                        const struct ah_git_opts *opts, ah_err *err)
{
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	if (code == CHILD_OK)
		return 0;
	if (code == CHILD_INVALID)
		return ah_err_set(err, AH_EINVALID, "Branch or tag \"%.200s\" not found in the repository",
		                  branch);
	if (code == CHILD_TOOBIG) /* fetched, or checked out */
		return ah_err_set(err, AH_ETOOBIG, "Repository is too large: more than %lld MB",
		                  opts->max_bytes >> 20);
	if (code == CHILD_TIMEOUT || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM))
		return ah_err_set(err, AH_ETIMEOUT, "Repository clone timed out after %d s",
		                  opts->timeout_seconds);
	if (code == CHILD_AUTH)
		return ah_err_set(err, AH_EDENIED, "Repository clone failed: authentication required "
		                  "(%.300s)", msg);
	if (opts->cancel && *opts->cancel)
		return ah_err_set(err, AH_EFAIL, "Repository clone cancelled (runner shutting down)");
	return ah_err_set(err, AH_EFAIL, "Repository clone failed: %.400s", msg[0] ? msg : "unknown error");
}

/* The image needs no history; links out of the tree are refused as in tarballs. */
static int tidy_checkout(const char *dest, ah_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/.git", dest);
	if (ah_deploy_rmtree(p) != 0)
		return ah_err_set(err, AH_EFAIL, "cannot remove %s", p);
	int r = ah_deploy_find_escaping_link(p, sizeof(p), dest);
	if (r == 1)
		return ah_err_set(err, AH_EINVALID, "Invalid repository: symlink \"%.200s\" points "
		                  "outside the project", p);
	return r == 0 ? 0 : ah_err_set(err, AH_EFAIL, "cannot walk %s", dest);
}

int ah_git_fetch(const char *url, const char *branch, const char *dest,
                 const struct ah_git_opts *opts, ah_err *err)
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
		_exit(child_clone(url, branch, dest, opts));
	}
	close(fds[1]);
	char msg[512];
	collect(fds[0], pid, msg, sizeof(msg), opts);
	close(fds[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	/* The message is libgit2's: keep it on one line for status_message. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	int rc = child_result(status, msg, branch, opts, err);
	if (rc == 0)
		rc = tidy_checkout(dest, err);
	return rc;
}
