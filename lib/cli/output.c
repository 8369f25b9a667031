/* What the user reads: tables and records from the API's JSON, --json output,
 * colour (a terminal and NO_COLOR unset), the live status line and the one-line
 * error. Text from the API is shown with control characters replaced, so that
 * a name or a status message cannot move the cursor or retitle the terminal. */
#include "cli/cli.h"

#include <stdarg.h>
#include <string.h>

void ah_cli_print_json(struct ah_cli *c, json_object *o)
{
	(void)c;
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
}

const char *ah_cli_paint(struct ah_cli *c, FILE *f, const char *sgr, const char *text)
{
	bool on = f == stdout ? c->color_out : c->color_err;
	return on ? ah_sprintf(c->a, "\033[%sm%s\033[0m", sgr, text) : text;
}

/* s with C0/DEL/C1 controls as '?'; a tab becomes a space. */
static const char *clean(struct ah_cli *c, const char *s)
{
	char *out = ah_strdup(c->a, s);
	for (unsigned char *p = (unsigned char *)out; *p; p++) {
		if (*p == '\t' || *p == '\n' || *p == '\r')
			*p = ' ';
		else if (*p < 0x20 || *p == 0x7f)
			*p = '?';
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] < 0xa0)
			p[0] = p[1] = '?';
	}
	return out;
}

/* "2026-11-21T23:59:59.123Z" as "2026-11-21 23:59:59". */
static const char *short_time(struct ah_cli *c, const char *s)
{
	if (strlen(s) < 19 || s[10] != 'T')
		return s;
	char *t = ah_strndup(c->a, s, 19);
	t[10] = ' ';
	return t;
}

/* An agent's network: "open", or "allow: a, b" ("allow: nothing" when empty). */
static const char *network_text(struct ah_cli *c, json_object *v)
{
	json_object *mode = NULL, *allow = NULL;
	json_object_object_get_ex(v, "mode", &mode);
	json_object_object_get_ex(v, "allow", &allow);
	const char *m = mode ? json_object_get_string(mode) : "open";
	if (strcmp(m, "allow") != 0)
		return clean(c, m);
	size_t n = allow && json_object_is_type(allow, json_type_array) ? json_object_array_length(allow) : 0;
	const char *s = n ? "allow:" : "allow: nothing";
	for (size_t i = 0; i < n; i++)
		s = ah_sprintf(c->a, "%s%s %s", s, i ? "," : "",
		               json_object_get_string(json_object_array_get_idx(allow, i)));
	return clean(c, s);
}

const char *ah_cli_text(struct ah_cli *c, json_object *o, const char *key, enum ah_cli_kind kind)
{
	json_object *v;
	if (!json_object_object_get_ex(o, key, &v) || !v)
		return "-";
	if (kind == AH_COL_BOOL)
		return json_object_get_boolean(v) ? "yes" : "no";
	if (kind == AH_COL_NETWORK)
		return network_text(c, v);
	const char *s = clean(c, json_object_get_string(v));
	return kind == AH_COL_TIME ? short_time(c, s) : s;
}

/* Display width: code points, not bytes (good enough for names and ids). */
static int width(const char *s)
{
	int w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static const char *status_colour(const char *s)
{
	if (!strcmp(s, "active") || !strcmp(s, "completed"))
		return "32";
	if (!strcmp(s, "error") || !strcmp(s, "failed"))
		return "31";
	if (!strcmp(s, "deploying"))
		return "33";
	return "2";
}

static void cell(struct ah_cli *c, const char *s, enum ah_cli_kind kind, int pad, bool last)
{
	const char *shown = s;
	if (kind == AH_COL_STATUS)
		shown = ah_cli_paint(c, stdout, status_colour(s), s);
	if (last)
		printf("%s\n", shown);
	else if (kind == AH_COL_NUM)
		printf("%*s%s  ", pad - width(s), "", shown);
	else
		printf("%s%*s  ", shown, pad - width(s), "");
}

void ah_cli_table(struct ah_cli *c, json_object *list, const struct ah_cli_col *cols)
{
	size_t n = json_object_array_length(list), ncol = 0;
	while (cols[ncol].title)
		ncol++;
	int *w = ah_alloc(c->a, sizeof(int) * ncol);
	const char **text = ah_alloc(c->a, sizeof(char *) * ncol * (n + 1));
	for (size_t k = 0; k < ncol; k++)
		w[k] = width(cols[k].title);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < ncol; k++) {
			const char *s = ah_cli_text(c, json_object_array_get_idx(list, i), cols[k].key, cols[k].kind);
			text[i * ncol + k] = s;
			w[k] = width(s) > w[k] ? width(s) : w[k];
		}
	if (!n) {
		ah_cli_note(c, "none");
		return;
	}
	for (size_t k = 0; k < ncol; k++) {
		const char *t = ah_cli_paint(c, stdout, "1", cols[k].title);
		printf("%s%*s%s", t, k + 1 < ncol ? w[k] - width(cols[k].title) : 0, "", k + 1 < ncol ? "  " : "\n");
	}
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < ncol; k++)
			cell(c, text[i * ncol + k], cols[k].kind, w[k], k + 1 == ncol);
}

void ah_cli_record(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols)
{
	int w = 0;
	for (const struct ah_cli_col *k = cols; k->title; k++)
		w = width(k->title) > w ? width(k->title) : w;
	for (const struct ah_cli_col *k = cols; k->title; k++) {
		const char *s = ah_cli_text(c, o, k->key, k->kind);
		if (k->kind == AH_COL_STATUS)
			s = ah_cli_paint(c, stdout, status_colour(s), s);
		printf("%s:%*s %s\n", k->title, w - width(k->title), "", s);
	}
}

void ah_cli_show(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols)
{
	if (c->json)
		ah_cli_print_json(c, o);
	else if (json_object_is_type(o, json_type_array))
		ah_cli_table(c, o, cols);
	else
		ah_cli_record(c, o, cols);
}

void ah_cli_note(struct ah_cli *c, const char *fmt, ...)
{
	va_list ap;
	(void)c;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void ah_cli_status_line(struct ah_cli *c, const char *fmt, ...)
{
	va_list ap;
	if (!c->tty_err)
		return;
	va_start(ap, fmt);
	fputs("\r\033[K", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

void ah_cli_status_end(struct ah_cli *c)
{
	if (c->tty_err)
		fputs("\r\033[K", stderr);
}

int ah_cli_fail(struct ah_cli *c, const ah_err *err)
{
	fprintf(stderr, "%s %s\n", ah_cli_paint(c, stderr, "31", "error:"), clean(c, err->msg));
	switch (err->code) {
	case AH_CLI_EUSAGE:
		return AH_CLI_EXIT_USAGE;
	case AH_CLI_ENET:
		return AH_CLI_EXIT_NET;
	default:
		return AH_CLI_EXIT_API;
	}
}
