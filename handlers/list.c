/* See list.h. */
#include "list.h"
#include "validate.h"
#include "core/util.h"

#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ah_list_reply(ah_req *r, const char *count_sql, const char *list_sql, const char *owner,
                  ah_row_json_fn to_json)
{
	long long limit, offset, total = 0;
	ah_rows rows, count;
	if (ah_page(r, &limit, &offset) != 0)
		return AH_EDONE;
	if (ah_db_query(r->db, r->arena, &count, count_sql, "s", owner) != 0 ||
	    ah_db_query(r->db, r->arena, &rows, list_sql, "sii", owner, limit, offset) != 0)
		return AH_EFAIL;
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < rows.n; i++)
		json_object_array_add(arr, to_json(r, &rows, i));
	ah_parse_ll(&total, ah_cell(&count, 0, 0));
	return ah_reply_list(r, arr, total);
}

/* ---- the cursor: base64url (no padding) of "<sort time>|<id>" ---- */

#define CURSOR_MAX 200
#define TIME_LEN 23 /* DATETIME(3) text: "YYYY-MM-DD HH:MM:SS.fff" */

static bool time_ok(const char *t, size_t n)
{
	static const char shape[] = "dddd-dd-dd dd:dd:dd.ddd";
	if (n != TIME_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (shape[i] == 'd' ? (t[i] < '0' || t[i] > '9') : t[i] != shape[i])
			return false;
	return true;
}

/* Ids are base62 with a prefix, or a client's session id: the session id's
 * alphabet ([A-Za-z0-9._:-], 1..128) covers both. */
static bool id_ok(const char *s, size_t n)
{
	char id[129];
	if (n < 1 || n >= sizeof id || memchr(s, '\0', n))
		return false;
	memcpy(id, s, n);
	id[n] = '\0';
	return ah_session_id_valid(id);
}

static char *cursor_make(ah_arena *a, const char *t, const char *id)
{
	char *raw = ah_sprintf(a, "%s|%s", t, id);
	size_t n = strlen(raw), cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	char *out = ah_alloc(a, cap);
	return sodium_bin2base64(out, cap, (const unsigned char *)raw, n,
	                         sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

/* 0 with the sort key, or -1 for anything this code did not make. */
static int cursor_parse(ah_arena *a, const char *c, char **t, char **id)
{
	unsigned char raw[CURSOR_MAX + 1];
	size_t n;
	if (strlen(c) > CURSOR_MAX * 4 / 3 + 4 ||
	    sodium_base642bin(raw, CURSOR_MAX, c, strlen(c), NULL, &n, NULL,
	                      sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0)
		return -1;
	raw[n] = '\0';
	const char *bar = memchr(raw, '|', n);
	if (!bar || !time_ok((const char *)raw, (size_t)(bar - (const char *)raw)) ||
	    !id_ok(bar + 1, n - (size_t)(bar - (const char *)raw) - 1))
		return -1;
	*t = ah_strdup(a, (const char *)raw);
	(*t)[TIME_LEN] = '\0';
	*id = ah_strdup(a, bar + 1);
	return 0;
}

/* ---- the Link header ---- */

/* A key spelt with escapes ("curs%6Fr") is one of these for ah_query_get too,
 * so such keys are never carried over: a Link with two cursors would repeat
 * a page. */
static bool is_paging(const char *seg, size_t len)
{
	const char *eq = memchr(seg, '=', len);
	size_t kl = eq ? (size_t)(eq - seg) : len;
	if (memchr(seg, '%', kl) || memchr(seg, '+', kl))
		return true;
	return (kl == 6 && (memcmp(seg, "cursor", 6) == 0 || memcmp(seg, "offset", 6) == 0)) ||
	       (kl == 5 && memcmp(seg, "limit", 5) == 0);
}

/* The request's own query minus its paging, each byte that has no business
 * inside <…> of a header percent-encoded. */
static char *query_without_paging(ah_req *r)
{
	size_t qn = strlen(r->query), o = 0;
	char *out = ah_alloc(r->arena, qn * 3 + 2);
	for (const char *q = r->query; q && *q;) {
		const char *amp = strchr(q, '&');
		size_t len = amp ? (size_t)(amp - q) : strlen(q);
		if (len && !is_paging(q, len)) {
			for (size_t i = 0; i < len; i++) {
				unsigned char ch = (unsigned char)q[i];
				if (ch > 0x20 && ch < 0x7f && !strchr("<>\"\\^`{|}", ch))
					out[o++] = (char)ch;
				else {
					out[o++] = '%';
					out[o++] = "0123456789ABCDEF"[ch >> 4];
					out[o++] = "0123456789ABCDEF"[ch & 15];
				}
			}
			out[o++] = '&';
		}
		q = amp ? amp + 1 : NULL;
	}
	out[o] = '\0';
	return out;
}

static void next_headers(ah_req *r, const char *cursor, long long limit)
{
	ah_header(r, "X-Next-Cursor", cursor);
	ah_header(r, "Link", ah_sprintf(r->arena, "</api/v1%s?%scursor=%s&limit=%lld>; rel=\"next\"",
	                                r->path, query_without_paging(r), cursor, limit));
}

/* ---- the page ---- */

/* ah_db_query with the strings s[0..ns) then the integers i[0..ni) (ns ≤ 8,
 * ni ≤ 2): the lists bind a varying number of filters. */
static int query_args(ah_req *r, ah_rows *rows, const char *sql, const char **s, size_t ns,
                      const long long *i, size_t ni)
{
	char fmt[16];
	memset(fmt, 's', ns);
	memset(fmt + ns, 'i', ni);
	fmt[ns + ni] = '\0';
	long long a = ni > 0 ? i[0] : 0, b = ni > 1 ? i[1] : 0;
	/* Arguments past the format are never read. */
	switch (ns) {
	case 1: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], a, b);
	case 2: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], a, b);
	case 3: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], a, b);
	case 4: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], s[3], a, b);
	case 5: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], s[3], s[4], a, b);
	case 6: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], s[3], s[4], s[5],
	                           a, b);
	case 7: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], s[3], s[4], s[5],
	                           s[6], a, b);
	case 8: return ah_db_query(r->db, r->arena, rows, sql, fmt, s[0], s[1], s[2], s[3], s[4], s[5],
	                           s[6], s[7], a, b);
	default: return AH_EFAIL;
	}
}

/* ---- counts that scan, kept while their owner's change counter stands ---- */

/* This worker's last counts of filtered lists, one per slot by the hash of
 * what was counted (the SQL text and its arguments). Workers are single
 * threaded; the keys live as long as the worker or until replaced. */
#define COUNTED_SLOTS 64
static struct counted {
	char *key;
	long long changes, total;
} counted[COUNTED_SLOTS];

/* The SQL text's address, then each argument with its length, so no
 * argument's bytes can pass for a boundary. */
static char *counted_key(ah_req *r, const char *sql, const char **args, size_t nargs)
{
	char *key = ah_sprintf(r->arena, "%p", (const void *)sql);
	for (size_t i = 0; i < nargs; i++)
		key = ah_sprintf(r->arena, "%s|%zu:%s", key, strlen(args[i]), args[i]);
	return key;
}

static uint64_t key_hash(const char *key)
{
	uint64_t h = 14695981039346656037ULL; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

static struct counted *counted_slot(const char *key)
{
	return &counted[key_hash(key) % COUNTED_SLOTS];
}

/* count_sql's answer, from this worker's last count of the same thing if the
 * owner's changes (changes_sql) are what they were then. The counter is read
 * before counting: a change during the count makes the next call count again. */
static int count_cached(ah_req *r, const ah_list *l, const char **args, size_t nargs, long long *total)
{
	ah_rows rows;
	if (ah_db_query(r->db, r->arena, &rows, l->changes_sql, "s", args[0]) != 0)
		return AH_EFAIL;
	long long changes = ah_cell_ll(ah_cell(&rows, 0, 0));
	char *key = counted_key(r, l->count_sql, args, nargs);
	struct counted *c = counted_slot(key);
	if (c->key && c->changes == changes && strcmp(c->key, key) == 0) {
		*total = c->total;
		return 0;
	}
	if (query_args(r, &rows, l->count_sql, args, nargs, NULL, 0) != 0)
		return AH_EFAIL;
	*total = ah_cell_ll(ah_cell(&rows, 0, 0));
	char *kept = strdup(key);
	if (kept) {
		free(c->key);
		*c = (struct counted){kept, changes, *total};
	}
	return 0;
}

static int count_of(ah_req *r, const ah_list *l, const char **args, size_t nargs, long long *total)
{
	ah_rows rows;
	if (!l->count_kind && l->changes_sql)
		return count_cached(r, l, args, nargs, total);
	int rc = l->count_kind
		? ah_db_query(r->db, r->arena, &rows, "SELECT n FROM list_counts WHERE kind = ? AND owner_id = ?",
		              "ss", l->count_kind, args[0])
		: query_args(r, &rows, l->count_sql, args, nargs, NULL, 0);
	/* No row yet: nothing was ever added to this list. */
	*total = rc == 0 ? ah_cell_ll(ah_cell(&rows, 0, 0)) : 0;
	return rc;
}

/* The cursor's sort key, or 422 entries for a bad one or one beside ?offset. */
static void check_cursor(ah_req *r, char **t, char **id)
{
	const char *c = ah_query_get(r, "cursor");
	*t = *id = NULL;
	if (!c)
		return;
	if (ah_query_get(r, "offset"))
		ah_verr(r, "query", "cursor", "Use either cursor or offset, not both", "value_error");
	else if (cursor_parse(r->arena, c, t, id) != 0)
		ah_verr(r, "query", "cursor", "Input should be a cursor from X-Next-Cursor or a Link header",
		        "value_error");
}

/* An offset past half of the list as a walk from its other end: rows
 * [offset, offset + limit] counted from the top are, from the bottom, the
 * limit + 1 rows that start at total - offset - limit - 1 (the one row more,
 * nearest the bottom, tells a next page). 0 with the paging of rev_sql, or -1
 * when the page is better read from the top. total is exact whether a counter
 * or a filtered COUNT(*) gave it; a row added between the count and the page
 * shifts an offset page by one, from either end, as offset paging always may. */
static int reverse_paging(const ah_list *l, long long total, long long limit, long long offset,
                          long long paging[2])
{
	if (!l->rev_sql || offset <= total / 2)
		return -1;
	long long first = total - offset - limit - 1, n = limit + 1;
	if (first < 0) {
		n += first;
		first = 0;
	}
	paging[0] = n > 0 ? n : 0;
	paging[1] = first;
	return 0;
}

/* The cursor before every row of a list: a time no row has (DATETIME(3)'s
 * bounds) and the empty id, which the after_sql's id term never needs. */
static void first_cursor(const ah_list *l, const char **t, const char **id)
{
	*t = l->ascending ? "1000-01-01 00:00:00.000" : "9999-12-31 23:59:59.999";
	*id = "";
}

/* A deep offset as a time bound and the offset below it (locate_sql), or -1
 * to page as usual: near either end (a walk from that end is shorter),
 * filtered, or past the end. */
static int locate(ah_req *r, const ah_list *l, const char *owner, size_t nfilters, long long total,
                  const char **bound, long long paging[2])
{
	ah_rows rows;
	long long before;
	if (!l->locate_sql || nfilters > 0 || paging[1] < AH_LIST_LOCATE_MIN ||
	    total - paging[1] < AH_LIST_LOCATE_MIN)
		return -1;
	if (ah_db_query(r->db, r->arena, &rows, l->locate_sql, "si", owner, paging[1]) != 0 ||
	    rows.n != 1 || ah_parse_ll(&before, ah_cell(&rows, 0, 1)) != 0 || before > paging[1])
		return -1;
	*bound = ah_cell(&rows, 0, 0);
	paging[1] -= before;
	return 0;
}

/* The page after counting (total): from the cursor (t, id) or the first
 * page's sentinel, located, from the far end, or from the top. args[0, n)
 * are the owner and filters, with room for three more. */
static int read_page(ah_req *r, const ah_list *l, const char **args, size_t n, const char *t,
                     const char *id, long long total, long long limit, long long offset,
                     ah_rows *rows)
{
	/* One row more than the page tells whether there is a next one. */
	long long paging[2] = {limit + 1, offset};
	const char *from = t, *from_id = id;
	if (!from && offset == 0)
		first_cursor(l, &from, &from_id);
	if (from) {
		args[n] = from, args[n + 1] = from, args[n + 2] = from_id;
		return query_args(r, rows, l->after_sql, args, n + 3, paging, 1);
	}
	if (locate(r, l, args[0], n - 1, total, &from, paging) == 0) {
		args[n] = from;
		return query_args(r, rows, l->below_sql, args, n + 1, paging, 2);
	}
	if (reverse_paging(l, total, limit, offset, paging) == 0) {
		rows->n = 0;
		return paging[0] ? query_args(r, rows, l->rev_sql, args, n, paging, 2) : 0;
	}
	return query_args(r, rows, l->page_sql, args, n, paging, 2);
}

/* ---- first pages kept while their list's change counter stands ---- */

/* This worker's last first pages of scope_counted lists, as answered: the
 * body and the next cursor. The key is after_sql's address, the owner and the
 * request's whole query (which the Link header repeats). A page is kept under
 * the counter read before it was: a change meanwhile makes the page newer
 * than its counter says, and the counter has moved on for every later
 * request, so a kept page is never older than the list. Bodies over
 * FIRST_MAX_BYTES are not kept (at most FIRST_SLOTS × that per worker). */
#define FIRST_SLOTS 32
#define FIRST_MAX_BYTES (256 * 1024)
static struct first {
	char *key, *body, *cursor; /* cursor NULL: no next page */
	size_t len;
	long long changes;
} firsts[FIRST_SLOTS];

static char *first_key(ah_req *r, const ah_list *l, const char *owner)
{
	return ah_sprintf(r->arena, "%p|%zu:%s|%s", (const void *)l->after_sql, strlen(owner), owner,
	                  r->query ? r->query : "");
}

static void reply_page(ah_req *r, long long total, const char *cursor, long long limit,
                       const char *body, size_t len)
{
	if (cursor)
		next_headers(r, cursor, limit);
	ah_reply_list_body(r, body, len, total);
}

/* Answers the first page from this worker's copy if the list has not changed
 * since; false when there is none to answer with. */
static bool first_from_kept(ah_req *r, const char *key, long long changes, long long total,
                            long long limit)
{
	struct first *f = &firsts[key_hash(key) % FIRST_SLOTS];
	if (!f->key || f->changes != changes || strcmp(f->key, key) != 0)
		return false;
	reply_page(r, total, f->cursor, limit, f->body, f->len);
	return true;
}

static void first_keep(const char *key, long long changes, const char *cursor, const char *body,
                       size_t len)
{
	struct first *f = &firsts[key_hash(key) % FIRST_SLOTS];
	if (len > FIRST_MAX_BYTES)
		return;
	char *k = strdup(key), *b = malloc(len + 1), *c = cursor ? strdup(cursor) : NULL;
	if (!k || !b || (cursor && !c)) {
		free(k), free(b), free(c);
		return;
	}
	memcpy(b, body, len + 1);
	free(f->key), free(f->body), free(f->cursor);
	*f = (struct first){k, b, c, len, changes};
}

int ah_list_keyset(ah_req *r, const ah_list *l, const char *owner, const char *const *filters,
                   size_t nfilters)
{
	long long limit, offset, total;
	char *t, *id, *cursor = NULL, *kept = NULL;
	const char *args[1 + AH_LIST_MAX_FILTERS + 3] = {owner};
	ah_rows rows;
	check_cursor(r, &t, &id);
	if (ah_page(r, &limit, &offset) != 0 || nfilters > AH_LIST_MAX_FILTERS)
		return AH_EDONE;
	for (size_t i = 0; i < nfilters; i++)
		args[1 + i] = filters[i];
	size_t n = 1 + nfilters;
	long long changes = 0;
	if (l->scope_counted && r->scope_extra && nfilters == 0) {
		total = ah_cell_ll(r->scope_extra[0]);
		changes = ah_cell_ll(r->scope_extra[1]);
		if (!t && offset == 0) {
			kept = first_key(r, l, owner);
			if (first_from_kept(r, kept, changes, total, limit))
				return AH_EDONE;
		}
	} else if (count_of(r, l, args, n, &total) != 0) {
		return AH_EFAIL;
	}
	if (read_page(r, l, args, n, t, id, total, limit, offset, &rows) != 0)
		return AH_EFAIL;
	if (rows.n > (size_t)limit) {
		rows.n = (size_t)limit;
		char **last = rows.v[rows.n - 1];
		cursor = cursor_make(r->arena, last[l->time_col], last[l->id_col]);
	}
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < rows.n; i++)
		json_object_array_add(arr, l->to_json(r, &rows, i));
	size_t len;
	const char *body = ah_json_body(arr, &len);
	if (kept && !r->partial)
		first_keep(kept, changes, cursor, body, len);
	reply_page(r, total, cursor, limit, body, len);
	json_object_put(arr);
	return AH_EDONE;
}
