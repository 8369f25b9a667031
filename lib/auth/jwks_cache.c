/* The configured JWKS URL's key set, fetched off the request path.
 *
 * The API master maps one shared copy of the JWKS document before it forks
 * (ah_jwks_share_init) and runs a refresher process beside the workers
 * (ah_jwks_refresher_run): it fetches the document at start, again once it is
 * `jwt_jwks_cache_seconds` old, and when a worker met a token whose kid no key
 * has (a provider rotating its keys), at most once a `jwt_jwks_refetch_seconds`
 * (a minute) for that reason.
 * A worker only copies a newer document out of shared memory and parses it, so
 * no request ever waits on the identity provider: a token signed by a key
 * published a moment ago is refused until the refresher has it (a second
 * later), which is the price of never stalling a worker on the network.
 *
 * Without the shared copy (the admin tool, tests of this module) a worker
 * fetches for itself, at most every 10 s. */
#include "auth/jwt.h"
#include "core/log.h"
#include "core/util.h"
#include "core/settings.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_JWKS_BYTES (256 * 1024)
#define REFETCH_MIN_MS 10000   /* between failed or forced fetches, whatever asks */
#define POLL_MS 200            /* how soon the refresher notices a request */

struct sink {
	char *buf;
	size_t len;
};

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	size_t n = size * nmemb;
	if (n > MAX_JWKS_BYTES - s->len)
		return 0; /* too big: curl aborts the transfer */
	char *b = realloc(s->buf, s->len + n + 1);
	if (!b)
		return 0;
	memcpy(b + s->len, p, n);
	s->len += n;
	b[s->len] = '\0';
	s->buf = b;
	return n;
}

/* jwks_url.c's rule on the address curl really connects to, whatever the
 * name resolved to at start. */
static curl_socket_t open_checked(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
	const char **refused = ud;
	(void)purpose;
	if ((*refused = ah_jwks_addr_refused(&a->addr)) != NULL)
		return CURL_SOCKET_BAD;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* GET url; only a 200 answer within the time and size limits counts. */
static int fetch(struct sink *out, const char *url, bool allow_local)
{
	CURL *c = curl_easy_init();
	long status = 0;
	const char *refused = NULL;
	if (!c)
		return AH_EFAIL;
	if (!allow_local) {
		curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_checked);
		curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &refused);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "agenthost-jwks/1");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (refused) {
		ah_log_warn("JWKS fetch from %s refused: it reached %s (jwt_jwks_allow_local is off)",
		            url, refused);
		return AH_EFAIL;
	}
	if (rc != CURLE_OK || status != 200 || !out->buf) {
		ah_log_warn("JWKS fetch from %s failed: %s (HTTP %ld)", url,
		            rc != CURLE_OK ? curl_easy_strerror(rc) : "bad answer", status);
		return AH_EFAIL;
	}
	return 0;
}

/* Fetches and parses; *doc (malloc'd) and *keys only when both worked. */
static int fetch_keys(const ah_config *cfg, const char *url, struct sink *doc, ah_jwks **keys)
{
	ah_err err = {0};
	*doc = (struct sink){0};
	*keys = NULL;
	if (fetch(doc, url, ah_settings_of(cfg)->jwt.jwks_allow_local) == 0 && ah_jwks_parse(keys, doc->buf, doc->len, &err) != 0)
		ah_log_warn("JWKS from %s: %s", url, err.msg);
	if (*keys)
		return 0;
	free(doc->buf);
	doc->buf = NULL;
	return AH_EFAIL;
}

/* ---- the host's shared copy ---- */

struct shared {
	pthread_mutex_t mu;
	uint64_t gen;          /* bumped with each new document */
	int64_t wanted_ms;     /* a worker met an unknown kid then (0: nothing asked) */
	size_t len;
	char doc[MAX_JWKS_BYTES];
};

static struct shared *shm;

static bool lock(void)
{
	int rc = pthread_mutex_lock(&shm->mu);
	if (rc == EOWNERDEAD) /* a process died copying: the next fetch rewrites it */
		pthread_mutex_consistent(&shm->mu);
	return rc == 0 || rc == EOWNERDEAD;
}

int ah_jwks_share_init(void)
{
	struct shared *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE,
	                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		return AH_EFAIL;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int rc = pthread_mutex_init(&s->mu, &a);
	pthread_mutexattr_destroy(&a);
	if (rc != 0) {
		munmap(s, sizeof(*s));
		return AH_EFAIL;
	}
	shm = s;
	return 0;
}

static void publish(const struct sink *doc)
{
	if (!lock())
		return;
	memcpy(shm->doc, doc->buf, doc->len);
	shm->len = doc->len;
	shm->gen++;
	pthread_mutex_unlock(&shm->mu);
}

/* Takes the pending unknown-kid request if one may be served now. */
static bool kid_asked(int64_t now, int64_t last_kid, int64_t kid_refetch_ms)
{
	bool go = false;
	if (lock()) {
		go = shm->wanted_ms && now - last_kid >= kid_refetch_ms;
		if (go)
			shm->wanted_ms = 0;
		pthread_mutex_unlock(&shm->mu);
	}
	return go;
}

int ah_jwks_refresher_run(const ah_config *cfg)
{
	const char *url = ah_set_opt(ah_settings_of(cfg)->jwt.jwks_url);
	int64_t ttl = ah_settings_of(cfg)->jwt.jwks_cache_seconds * 1000;
	/* between fetches that an unknown kid asked for */
	int64_t kid_refetch = ah_settings_of(cfg)->jwt.jwks_refetch_seconds * 1000;
	int64_t fetched = 0, tried = 0, last_kid = -kid_refetch;
	if (!shm || !url || !*url)
		return 0;
	for (;;) {
		int64_t now = ah_now_ms();
		bool stale = !fetched || now - fetched >= ttl;
		bool may = !tried || now - tried >= REFETCH_MIN_MS;
		bool kid = kid_asked(now, last_kid, kid_refetch);
		if (kid)
			last_kid = now;
		if ((stale && may) || kid) {
			struct sink doc;
			ah_jwks *k;
			tried = now;
			if (fetch_keys(cfg, url, &doc, &k) == 0) {
				publish(&doc);
				fetched = now;
				ah_log_info("JWKS from %s: %zu keys%s", url, ah_jwks_count(k),
				            kid ? " (asked for by an unknown kid)" : "");
				ah_jwks_free(k);
				free(doc.buf);
			}
		}
		usleep(POLL_MS * 1000);
	}
}

/* ---- each worker's parsed keys ---- */

static struct {
	ah_jwks *keys;
	uint64_t gen;        /* of the shared document they were parsed from */
	int64_t tried_ms;    /* without a shared copy: last own fetch */
} cache;

static void take(ah_jwks *k)
{
	if (!k)
		return;
	ah_jwks_free(cache.keys);
	cache.keys = k;
}

/* Parses the shared document when it is newer than the worker's keys. */
static void sync_shared(bool refresh)
{
	if (!lock())
		return;
	if (refresh && !shm->wanted_ms)
		shm->wanted_ms = ah_now_ms();
	char *copy = NULL;
	size_t len = shm->len;
	uint64_t gen = shm->gen;
	if (gen != cache.gen && (copy = malloc(len + 1))) {
		memcpy(copy, shm->doc, len);
		copy[len] = '\0';
	}
	pthread_mutex_unlock(&shm->mu);
	if (!copy)
		return;
	ah_jwks *k = NULL;
	ah_err err = {0};
	if (ah_jwks_parse(&k, copy, len, &err) == 0)
		take(k);
	cache.gen = gen;
	free(copy);
}

void ah_jwks_cached(const ah_jwks **out, const ah_config *cfg, bool refresh)
{
	const char *url = ah_set_opt(ah_settings_of(cfg)->jwt.jwks_url);
	int64_t ttl = ah_settings_of(cfg)->jwt.jwks_cache_seconds * 1000;
	int64_t now = ah_now_ms();
	if (url && *url && shm) {
		sync_shared(refresh);
	} else if (url && *url && (refresh || !cache.keys || now - cache.tried_ms >= ttl) &&
	           (!cache.tried_ms || now - cache.tried_ms >= REFETCH_MIN_MS)) {
		/* At most one fetch per REFETCH_MIN_MS, whatever the reason: a flood of
		 * made-up kids must not become a flood of requests to the provider. */
		struct sink doc;
		ah_jwks *k;
		cache.tried_ms = now;
		if (fetch_keys(cfg, url, &doc, &k) == 0) {
			take(k);
			free(doc.buf);
		}
	}
	*out = cache.keys;
}
