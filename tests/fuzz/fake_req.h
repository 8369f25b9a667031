/* A request whose response goes to memory, for the harnesses that drive
 * lib/http the way a worker does (as tests/unit/test_body.c). Header-only:
 * each harness is one program. */
#ifndef AH_FUZZ_FAKE_REQ_H
#define AH_FUZZ_FAKE_REQ_H

#include "http/http.h"

#include <fcgiapp.h>
#include <string.h>

#define FAKE_OUT_CAP (1 << 20)

struct fake_req {
	ah_req r;
	FCGX_Request fcgi;
	FCGX_Stream out;
	char *env[4];
	unsigned char outbuf[FAKE_OUT_CAP];
};

static void fake_full(FCGX_Stream *s, int doClose)
{
	(void)doClose;
	s->isClosed = 1;
}

/* The request's body is a copy in its arena (NUL-terminated, as the
 * dispatcher leaves it); query as given. */
static void fake_req_init(struct fake_req *f, const char *query, const char *body, size_t len)
{
	memset(&f->r, 0, sizeof f->r);
	memset(&f->fcgi, 0, sizeof f->fcgi);
	memset(&f->out, 0, sizeof f->out);
	memset(f->env, 0, sizeof f->env);
	f->out.rdNext = f->out.wrNext = f->out.stopUnget = f->outbuf;
	f->out.stop = f->outbuf + sizeof f->outbuf;
	f->out.emptyBuffProc = fake_full;
	f->fcgi.out = &f->out;
	f->fcgi.envp = f->env;
	f->r.arena = ah_arena_new();
	f->r.fcgi = &f->fcgi;
	f->r.method = "POST";
	f->r.path = "/fuzz";
	f->r.request_id = "req-fuzz";
	f->r.query = query;
	f->r.content_length = (long long)len;
	f->r.body = ah_alloc(f->r.arena, len + 1);
	memcpy(f->r.body, body, len);
	f->r.body[len] = '\0';
	f->r.body_len = len;
}

static void fake_req_done(struct fake_req *f)
{
	ah_arena_destroy(f->r.arena);
}

#endif
