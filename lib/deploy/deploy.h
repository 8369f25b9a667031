/* The deploy pipeline, without the database: fetch an agent's code (a git clone
 * or an uploaded tarball), check its manifest, install its npm dependencies in a
 * sandbox, and leave a read-only image directory. The runner's job loop drives it
 * (lib/runner/jobs.c) and owns everything about queues and agent rows.
 *
 * Return codes say who is at fault, because the job loop retries only what a retry
 * can fix:
 *   AH_EINVALID, AH_ETOOBIG, AH_EDENIED, AH_ETIMEOUT: the project or its source is
 *       at fault (bad tarball, manifest, npm failure, forbidden URL, huge or slow
 *       repository). err->msg is written for the user and becomes the agent's
 *       status_message. Permanent: never retried.
 *   AH_EFAIL: this machine or the network is at fault (disk, sandbox, DNS, a
 *       connection refused). err->msg is for the user too; retried.
 *   AH_EBUSY: the host has no room for the build sandbox now (its memory or
 *       disk budget): retried later without counting as an attempt. */
#ifndef AH_DEPLOY_DEPLOY_H
#define AH_DEPLOY_DEPLOY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/err.h"
#include "core/project.h"

/* ---- paths (paths.c) ---------------------------------------------------- */

/* A path taken from a tarball entry or a manifest: relative, no `..` component,
 * not empty, no NUL. "./a/b" and "a//b" are fine. 0 or AH_EINVALID. */
int ah_deploy_path_check(const char *path);
/* A symlink at `link_path` (relative to the tree root) pointing at `target`
 * stays inside the tree when resolved lexically. 0 or AH_EINVALID. */
int ah_deploy_link_check(const char *link_path, const char *target);

/* Walks a tree and resolves every symlink in it with openat2(RESOLVE_BENEATH):
 * 1 and the first link (relative path into out) that leads outside the tree, 0
 * when none does, -1 on an I/O error. */
int ah_deploy_find_escaping_link(char *out, size_t n, const char *dir);
/* Creates dir and its parents (mode 0700: what lies under data_dir is the
 * runner's alone). 0 or AH_EFAIL. */
int ah_deploy_mkdirs(const char *dir, ah_err *err);
/* The apparent size of a tree's regular files (holes count), into out. 0 or
 * AH_EFAIL. */
int ah_deploy_tree_bytes(long long *out, const char *dir, ah_err *err);
/* Removes a tree without following symlinks; a missing tree is success. */
int ah_deploy_rmtree(const char *dir);
/* Removes write permission from every file and directory of a tree (the image
 * must never change under the sandboxes that use it as their lower layer). */
int ah_deploy_make_readonly(const char *dir, ah_err *err);

/* ---- manifest (manifest.c) ---------------------------------------------- */

#define AH_MANIFEST_MAX_BYTES (64 * 1024)

struct ah_manifest {
	char file[AH_MANIFEST_NAME_CAP];   /* one of ah_manifest_names */
	char name[256];
	char slug[64];          /* "" when absent */
	char version[128];
	char entrypoint[1024];
};

/* Semantic Versioning 2.0.0: MAJOR.MINOR.PATCH[-prerelease][+build]. */
bool ah_semver_valid(const char *s);
/* Validates manifest text (no file system access). `file` names it in messages. */
int ah_manifest_parse(struct ah_manifest *out, const char *file, const char *json,
                      size_t len, ah_err *err);
/* Finds agent.json (else castari.json) in project_dir, parses it, and checks that
 * the entrypoint is a regular file inside the project reached through no symlink. */
int ah_manifest_load(struct ah_manifest *out, const char *project_dir, ah_err *err);

/* ---- tarball (tarball.c) ------------------------------------------------ */

struct ah_tar_limits {
	long long max_compressed;   /* bytes of the .tar.gz */
	long long max_extracted;    /* sum of regular file sizes (apparent: holes count) */
	long long max_entries;
	bool uncompressed;          /* a plain tar (a build's output), not gzip'd */
	const char *noun;           /* for "… is too large": NULL "Code archive" */
	const char *refused;        /* before an entry's fault: NULL "Invalid tarball" */
	bool zstd_too;              /* also zstd (an image the runner packed: pack.c) */
};
#define AH_TAR_LIMITS_DEFAULT { 50LL << 20, 500LL << 20, 100000, false, NULL, NULL }

/* Extracts a gzip'd tar into dest (which must exist and be empty). Refuses
 * absolute paths, `..`, links leaving the tree, devices, fifos, sockets. On
 * failure dest may hold a partial tree; the caller removes it. */
int ah_tarball_extract(const char *tarball, const char *dest,
                       const struct ah_tar_limits *lim, ah_err *err);
/* Packs the tree under dir (files, directories, symlinks as links; owner
 * root) into the zstd-compressed tar dest, which ah_tarball_extract (with
 * zstd_too) turns back into it. */
int ah_tarball_pack(const char *dir, const char *dest, ah_err *err);
/* The same archive, with dir/node_modules taken from deps_part (a zstd frame
 * of its tar entries, kept beside the image) when it exists, else packed into
 * it first. NULL deps_part: ah_tarball_pack. */
int ah_image_pack(const char *dir, const char *dest, const char *deps_part, ah_err *err);
/* The SHA-256 (hex) and size of an archive ah_image_pack made with deps_part
 * (may be NULL), reading only what follows the part when its hash is kept. */
int ah_image_pack_sha256(const char *archive, const char *deps_part, char sha[65],
                         long long *size, ah_err *err);
/* The project root inside an extracted tree: dest itself, or its only entry
 * when that is a directory and dest holds no manifest (`tar czf x project/`).
 * Writes into out (size n). */
int ah_tarball_project_root(char *out, size_t n, const char *dest, ah_err *err);

/* ---- git (git.c) -------------------------------------------------------- */

struct ah_git_opts {
	long long max_bytes;        /* received pack bytes, and checked-out file bytes */
	int timeout_seconds;
	/* git_allow_hosts: "host[:port[-port]]" entries, comma or space separated
	 * ("[v6]:port" for IPv6), whose loopback or private addresses may be
	 * cloned, from the host's own network. NULL or "": none. */
	const char *allow_hosts;
	bool allow_private;         /* development only: any loopback or private host */
	const char *ssh_key;        /* private key file for ssh:// URLs, or NULL */
	volatile const int *cancel; /* non-zero: abort as soon as possible */
	const char *log_tag;        /* prefix of the log line with libgit2's own error */
	char *commit_out;           /* optional, 41 bytes: the commit checked out, in hex */
};

struct sockaddr;
enum ah_git_addr_kind { AH_GIT_ADDR_PUBLIC, AH_GIT_ADDR_PRIVATE, AH_GIT_ADDR_FORBIDDEN };
/* FORBIDDEN: link-local and cloud metadata (169.254/16, 100.100.100.200,
 * fe80::/10, fd00:ec2::254, and their v4-mapped forms), refused whatever the
 * configuration. PRIVATE: loopback, private, reserved, multicast. */
enum ah_git_addr_kind ah_git_addr_kind(const struct sockaddr *sa);
/* host:port is on the git_allow_hosts list (host compared as written). */
bool ah_git_host_allowed(const char *allow_hosts, const char *host, int port);
/* Host and port (the scheme's default when none is written) of a URL. */
int ah_git_url_host(char *host, size_t n, int *port, const char *url);

/* Scheme and host checks: https, http, ssh, git, scp-like `user@host:path`;
 * never file:// or a local path; every address the host resolves to is
 * checked (see ah_git_addr_kind and git_allow_hosts). *host_net: the URL's
 * host is an allowed private one, to be cloned from the host's network;
 * everything else is cloned from a namespace that reaches only the outside.
 * Refusals are AH_EDENIED with "Repository URL not allowed: <reason>". */
int ah_git_url_check(const char *url, const struct ah_git_opts *opts, bool *host_net,
                     ah_err *err);

enum ah_git_net { AH_GIT_NET_ISOLATED, AH_GIT_NET_HOST };
/* Clones url at branch (branch or tag; NULL or "": the remote's default) into
 * dest (must not exist), then removes dest/.git. Runs in a child process so the
 * deadline holds even while connecting; with AH_GIT_NET_ISOLATED the child
 * joins a sandbox slot's network namespace first (sandboxes must be
 * initialised). No URL check: see ah_git_fetch. A failure's err->msg is one of
 * a few fixed sentences and never holds text the server sent. */
int ah_git_clone(const char *url, const char *branch, const char *dest,
                 const struct ah_git_opts *opts, enum ah_git_net net, ah_err *err);
/* ah_git_url_check, then ah_git_clone from the network it chose. */
int ah_git_fetch(const char *url, const char *branch, const char *dest,
                 const struct ah_git_opts *opts, ah_err *err);

/* ---- the image (build.c) ----------------------------------------------- */

typedef void (*ah_deploy_output_fn)(void *ctx, const char *text, size_t len);
/* A line (printf format) to the deploy's own log, when it has one. */
void ah_deploy_say(ah_deploy_output_fn fn, void *ctx, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct ah_build_opts {
	int timeout_seconds;
	long long disk_bytes;       /* the build sandbox's own disk (npm's cache, /tmp and
	                             * what it installs); 0: the sandbox default */
	long long image_max_bytes;  /* the finished image (apparent sizes, holes count) */
	const char *log_tag;        /* "agent=<slug> job=<id>" for log lines */
	volatile const int *cancel;
	/* Images whose node_modules a build with the same dependencies may take
	 * (reuse.c): the agent's previous one first, then its owner's other
	 * agents' (never another user's); NULL-terminated, or NULL. */
	const char *const *reuse_from;
	const char *npm_cache;      /* the host-wide npm download cache (npm_cache.c), or NULL */
	/* Optional: the deploy's own log for the user (GET …/deploys/{id}/logs):
	 * each step's line and npm's stdout and stderr as they come. */
	ah_deploy_output_fn output;
	void *output_ctx;
};

/* Makes image_dir (must not exist; its parent must) from the project in
 * project_dir. With a package.json: `npm ci --omit=dev` (lock file present) or
 * `npm install --omit=dev` in a build sandbox whose /app is the project over
 * the sandbox's own capped disk, so nothing npm or an install script writes
 * reaches the host's file system; then /app is read back as a tar stream into
 * scratch_file and extracted with the upload's checks: owned by root, no
 * setuid bits, no devices or fifos, no symlink leading out of the image.
 * Without a package.json the project itself becomes the image. Either way an
 * image over image_max_bytes is refused (AH_ETOOBIG). npm's failure is
 * AH_EINVALID "Dependency installation failed: <tail of npm's output>". On
 * failure image_dir does not exist. */
int ah_build_image(const char *project_dir, const char *image_dir, const char *scratch_file,
                   const struct ah_build_opts *opts, ah_err *err);

/* ---- an unchanged dependency tree, reused (reuse.c) --------------------- */

/* The fingerprint of what decides node_modules (lockfile, else package.json;
 * node; the machine) as 64 hex characters. -1 when it cannot be made. */
int ah_deps_fingerprint(const char *project_dir, char out[65]);
/* The first of images (NULL-terminated, may be NULL) built from the same
 * fingerprint whose whole node_modules is now hard-linked into project_dir
 * (npm need not run); NULL when none is. */
const char *ah_deps_reuse(const char *project_dir, const char *const *images,
                          const char *fingerprint, const char *log_tag);
/* Records the fingerprint and node_modules' entry count beside a built
 * image, as <image_dir>.deps; not for a project with install scripts of its
 * own (its tree is not what the lockfile alone makes). */
void ah_deps_note(const char *image_dir, const char *fingerprint);
/* <image_dir>.deps.tzst: its node_modules packed (ah_image_pack). */
void ah_deps_part_path(char *out, size_t n, const char *image_dir);
/* Removes what lies beside an image for its dependencies (.deps, .deps.tzst). */
void ah_deps_forget(const char *image_dir);

/* ---- the host-wide npm download cache (npm_cache.c) ------------------ */

/* npm's cache inside a build, under /app (excluded from the image). */
#define AH_NPM_CACHE_NAME ".agenthost-npm-cache"
/* Hard-links the cache's tarballs into project_dir/AH_NPM_CACHE_NAME (the
 * project's own entry of that name is removed first). -1 when that
 * directory cannot be made (npm then uses one of its own). */
int ah_npm_cache_offer(const char *cache_dir, const char *project_dir, const char *log_tag);
/* Moves the tarballs under scratch_dir/content-v2/sha512 whose SHA-512 is
 * their name into the cache; others are left (the caller removes them). */
struct ah_npm_harvest {
	long long added, known, refused; /* tarballs: new, already cached, wrong name */
};
void ah_npm_cache_harvest(const char *cache_dir, const char *scratch_dir, const char *log_tag,
                          struct ah_npm_harvest *out);

/* ---- identical files shared between images (dedupe.c) ------------------ */

/* Links image_dir's files (read-only by now) with the host-wide store's:
 * a file the store has becomes a link to it, a new one is added to it. */
void ah_image_dedupe(const char *image_dir, const char *store_dir, const char *log_tag);
/* Removes store entries no image links any more. */
void ah_image_store_sweep(const char *store_dir);
/* The store of an image path <data_dir>/images/<agent>/<job>: <data_dir>/store. */
int ah_image_store_of(const char *image, char *out, size_t n);

/* ---- the pipeline (pipeline.c) ------------------------------------------ */

struct ah_deploy_req {
	const char *log_tag;        /* "agent=<slug> job=<id>" */
	bool from_git;              /* else the uploaded tarball */
	const char *git_url, *git_branch;
	const char *tarball;
	const char *work_dir;       /* scratch for this attempt; the caller removes it */
	const char *image_dir;      /* where the finished image goes; must not exist */
	const char *store_dir;      /* shared files of all images (dedupe.c); NULL: none */
	struct ah_git_opts git;
	struct ah_tar_limits tar;
	struct ah_build_opts build;
};

/* Fetch, manifest, then the image (ah_build_image), made read-only. On
 * failure image_dir does not exist. */
int ah_deploy_build_image(struct ah_manifest *out, const struct ah_deploy_req *req,
                          ah_err *err);

/* A helper program (cp, tar) run to its end with the runner's environment:
 * 0 when it exited 0, else -1. (reuse.c) */
int ah_deploy_run_prog(const char *const argv[]);

#endif
