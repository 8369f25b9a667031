/* Webhooks (issue 28): a finished invocation's record POSTed to a URL the call
 * or its agent names. The API side lives here (URL rules, the user's signing
 * secret, the enqueue into the durable table webhook_deliveries of schema/025);
 * the sending is agenthost-webhooks' (daemon.c), never an API worker's or a
 * runner's.
 *
 * Signature (Stripe's scheme): header
 *   Agenthost-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>
 * over "<t>.<body>" under the user's secret (the whole "whsec_…" text is the
 * key), so a receiver checks it with any standard HMAC and refuses old
 * timestamps against replays. Agenthost-Delivery carries the delivery's id,
 * the same on every retry: a receiver's idempotency key. */
#ifndef AH_WEBHOOKS_WEBHOOKS_H
#define AH_WEBHOOKS_WEBHOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/config.h"
#include "core/err.h"
#include "core/netaddr.h"
#include "db/db.h"

#define AH_WEBHOOK_URL_MAX 2048
#define AH_WEBHOOK_SIG_HEX 65 /* 64 hex digits and the NUL */

/* Which private addresses deliveries may reach (webhook_allow_hosts). */
ah_addr_policy ah_webhook_policy(const ah_webhook_settings *set);

/* A URL deliveries may be sent to: https (http too with webhook_allow_http),
 * a host and optional port, no credentials, no fragment, at most
 * AH_WEBHOOK_URL_MAX bytes; a literal address must be public or opened by
 * the policy (a name is checked on each connection's address at delivery,
 * which defeats DNS rebinding). AH_EINVALID with a sentence in err. */
int ah_webhook_url_check(const char *url, const ah_webhook_settings *set, ah_err *err);

/* HMAC-SHA256 of "<t>.<body>" under secret, as lower-case hex. */
void ah_webhook_sign(char hex[AH_WEBHOOK_SIG_HEX], const char *secret, int64_t t,
                     const char *body, size_t len);

/* A fresh secret for the user, sealed into webhook_secrets (replacing the
 * one before); *out is the clear text, to be shown once. */
int ah_webhook_secret_rotate(ah_db *db, ah_arena *a, const char *user_id, const char **out,
                             ah_err *err);

/* The user's secret in clear; AH_ENOTFOUND when none was ever made. */
int ah_webhook_secret_get(ah_db *db, ah_arena *a, const char *user_id, const char **out,
                          ah_err *err);

/* Whether the user has a secret (0: yes; AH_ENOTFOUND; AH_EFAIL). */
int ah_webhook_secret_exists(ah_db *db, ah_arena *a, const char *user_id);

/* Queues the delivery of a finished invocation's record (payload, its JSON
 * text) to url: one row of webhook_deliveries, due now. The one entry point
 * for every path that finishes an invocation (the plain call, and later the
 * asynchronous one). *id_out (may be NULL) gets the delivery's id. */
int ah_webhook_enqueue(ah_db *db, ah_arena *a, const char *user_id, const char *agent_id,
                       const char *invocation_id, const char *url, const char *payload,
                       size_t len, const char **id_out, ah_err *err);

#endif
