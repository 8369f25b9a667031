/* A streaming multipart/form-data parser (RFC 7578 over RFC 2046): bytes come
 * from a pull function in blocks of at most 64 KiB and each part's body goes to
 * the sink as it arrives, so an upload never sits in a worker's memory. The
 * only state is one buffer, which always keeps the last |delimiter| - 1 bytes
 * back so a delimiter split across two reads is still found. */
#include "http/http.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define BLOCK (64 * 1024)
#define HEADER_LINE_MAX 16384
#define HEADERS_MAX 32768

struct mp {
	ah_mp_read_fn rd;
	void *src;
	size_t pos, len;
	bool eof;
	char delim[80]; /* "\r\n--" boundary */
	size_t dlen;
	char *why;
	size_t whycap;
	char buf[BLOCK + HEADER_LINE_MAX + 256]; /* last: the reset stops before it */
};

static int bad(struct mp *m, const char *msg)
{
	snprintf(m->why, m->whycap, "%s", msg);
	return AH_EINVALID;
}

/* Moves the unread bytes to the front and reads more; 0, or AH_EFAIL on a read error. */
static int fill(struct mp *m)
{
	if (m->eof)
		return 0;
	memmove(m->buf, m->buf + m->pos, m->len - m->pos);
	m->len -= m->pos;
	m->pos = 0;
	size_t room = sizeof(m->buf) - m->len;
	ssize_t n = m->rd(m->src, m->buf + m->len, room < BLOCK ? room : BLOCK);
	if (n < 0)
		return AH_EFAIL;
	if (n == 0)
		m->eof = true;
	m->len += (size_t)n;
	return 0;
}

/* Reads one CRLF-terminated line into out (NUL-terminated, CRLF dropped). */
static int read_line(struct mp *m, char *out, size_t cap)
{
	for (;;) {
		char *nl = memmem(m->buf + m->pos, m->len - m->pos, "\r\n", 2);
		if (nl) {
			size_t n = (size_t)(nl - (m->buf + m->pos));
			if (n >= cap)
				return bad(m, "Malformed multipart body: a part header is too long");
			memcpy(out, m->buf + m->pos, n);
			out[n] = '\0';
			m->pos += n + 2;
			return 0;
		}
		if (m->len - m->pos >= HEADER_LINE_MAX)
			return bad(m, "Malformed multipart body: a part header is too long");
		if (m->eof)
			return bad(m, "Malformed multipart body: the body ended inside a part header");
		if (fill(m) != 0)
			return AH_EFAIL;
	}
}

/* Value of parameter `name` in a header's "; a=b; c="d"" list, unquoted. */
static bool header_param(const char *h, const char *name, char *out, size_t cap, bool *truncated)
{
	size_t nl = strlen(name);
	for (const char *p = strchr(h, ';'); p; p = strchr(p, ';')) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, name, nl) != 0 || p[nl] != '=')
			continue;
		p += nl + 1;
		size_t o = 0;
		*truncated = false;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				if (o + 1 < cap)
					out[o++] = *p;
				else
					*truncated = true;
			}
		} else {
			for (; *p && *p != ';' && *p != ' ' && *p != '\t'; p++) {
				if (o + 1 < cap)
					out[o++] = *p;
				else
					*truncated = true;
			}
		}
		out[o] = '\0';
		return true;
	}
	return false;
}

static int hexv(int c)
{
	return isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

/* RFC 5987 ext-value "UTF-8''%e2%82%ac.txt" → bytes; false if not UTF-8 or malformed. */
static bool ext_value(const char *v, char *out, size_t cap, size_t *outlen)
{
	if (strncasecmp(v, "UTF-8'", 6) != 0)
		return false;
	const char *q = strchr(v + 6, '\'');
	if (!q)
		return false;
	size_t o = 0;
	for (q++; *q; q++) {
		int c = (unsigned char)*q;
		if (c == '%') {
			if (hexv(q[1]) < 0 || hexv(q[2]) < 0)
				return false;
			c = hexv(q[1]) * 16 + hexv(q[2]);
			q += 2;
		}
		if (o + 1 >= cap)
			return false;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	*outlen = o;
	return true;
}

static void disposition(ah_mp_part *p, const char *v)
{
	bool trunc = false;
	char ext[AH_MP_FILENAME_MAX * 3 + 16];
	header_param(v, "name", p->name, sizeof(p->name), &trunc);
	if (header_param(v, "filename*", ext, sizeof(ext), &trunc)) {
		size_t n = 0;
		p->has_filename = true;
		p->filename_len = 0;
		if (!trunc && ext_value(ext, p->filename, sizeof(p->filename), &n))
			p->filename_len = n;
		else
			p->filename_bad = true;
		return;
	}
	if (header_param(v, "filename", p->filename, sizeof(p->filename), &trunc)) {
		p->has_filename = true;
		p->filename_len = strlen(p->filename);
		p->filename_bad = trunc;
	}
}

/* The headers of one part, up to the empty line. */
static int read_headers(struct mp *m, ah_mp_part *p)
{
	char line[HEADER_LINE_MAX];
	size_t total = 0;
	memset(p, 0, sizeof(*p));
	for (;;) {
		int rc = read_line(m, line, sizeof(line));
		if (rc)
			return rc;
		if (!*line)
			return 0;
		total += strlen(line);
		if (total > HEADERS_MAX)
			return bad(m, "Malformed multipart body: the part headers are too long");
		char *colon = strchr(line, ':');
		if (!colon)
			return bad(m, "Malformed multipart body: a part header has no colon");
		*colon = '\0';
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (strcasecmp(line, "Content-Disposition") == 0) {
			if (strncasecmp(v, "form-data", 9) != 0)
				return bad(m, "Malformed multipart body: a part is not form-data");
			disposition(p, v);
		} else if (strcasecmp(line, "Content-Type") == 0) {
			snprintf(p->content_type, sizeof(p->content_type), "%s", v);
			p->content_type_long = strlen(v) >= sizeof(p->content_type);
		}
	}
}

/* Hands the part's body to the sink up to the next delimiter, keeping
 * dlen - 1 bytes back while the delimiter may still be arriving. */
static int read_body(struct mp *m, const ah_mp_sink *s, void *ud)
{
	for (;;) {
		char *d = memmem(m->buf + m->pos, m->len - m->pos, m->delim, m->dlen);
		size_t avail = d ? (size_t)(d - (m->buf + m->pos))
		                 : (m->len - m->pos > m->dlen - 1 ? m->len - m->pos - (m->dlen - 1) : 0);
		if (avail) {
			int rc = s->data(ud, m->buf + m->pos, avail);
			if (rc)
				return rc;
			m->pos += avail;
		}
		if (d) {
			m->pos += m->dlen;
			return 0;
		}
		if (m->eof)
			return bad(m, "Malformed multipart body: the body ended before the closing boundary");
		if (fill(m) != 0)
			return AH_EFAIL;
	}
}

/* After a delimiter: "--" ends the body, else optional padding and CRLF. */
static int after_delimiter(struct mp *m, bool *last)
{
	while (m->len - m->pos < 2 && !m->eof)
		if (fill(m) != 0)
			return AH_EFAIL;
	if (m->len - m->pos >= 2 && memcmp(m->buf + m->pos, "--", 2) == 0) {
		*last = true;
		return 0;
	}
	char line[256];
	int rc = read_line(m, line, sizeof(line));
	if (rc)
		return rc;
	if (line[strspn(line, " \t")] != '\0')
		return bad(m, "Malformed multipart body: junk after a boundary");
	*last = false;
	return 0;
}

int ah_multipart_parse(ah_mp_read_fn rd, void *src, const char *boundary, const ah_mp_sink *s,
                       void *ud, char *why, size_t whycap)
{
	static __thread struct mp m; /* 80 KiB: too large for a worker's stack frame */
	memset(&m, 0, offsetof(struct mp, buf));
	m.rd = rd, m.src = src, m.why = why, m.whycap = whycap;
	size_t bl = strlen(boundary);
	if (bl < 1 || bl > 70)
		return bad(&m, "Malformed multipart body: the boundary must have 1 to 70 characters");
	m.dlen = (size_t)snprintf(m.delim, sizeof(m.delim), "\r\n--%s", boundary);
	/* A virtual CRLF in front lets the first delimiter be found like the others. */
	memcpy(m.buf, "\r\n", 2);
	m.len = 2;
	int rc = 0;
	bool last = false;
	/* The preamble, discarded. */
	for (;;) {
		char *d = memmem(m.buf + m.pos, m.len - m.pos, m.delim, m.dlen);
		if (d) {
			m.pos = (size_t)(d - m.buf) + m.dlen;
			break;
		}
		if (m.eof)
			return bad(&m, "Malformed multipart body: no boundary found");
		if (m.len - m.pos > m.dlen)
			m.pos = m.len - m.dlen;
		if (fill(&m) != 0)
			return AH_EFAIL;
	}
	while (rc == 0 && (rc = after_delimiter(&m, &last)) == 0 && !last) {
		ah_mp_part p;
		if ((rc = read_headers(&m, &p)) != 0 || (rc = s->begin(ud, &p)) != 0 ||
		    (rc = read_body(&m, s, ud)) != 0)
			break;
		rc = s->end(ud);
	}
	return rc;
}

const char *ah_multipart_boundary(ah_arena *a, const char *content_type)
{
	if (!content_type || strncasecmp(content_type, "multipart/form-data", 19) != 0 ||
	    (content_type[19] != ';' && content_type[19] != ' '))
		return NULL;
	char b[128];
	bool trunc = false;
	if (!header_param(content_type + 19, "boundary", b, sizeof(b), &trunc) || trunc || !*b ||
	    strlen(b) > 70)
		return NULL;
	return ah_strdup(a, b);
}
