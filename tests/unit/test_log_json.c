/* Unit test of log_format = json (lib/core/log.c): every line is one JSON
 * object a parser reads back exactly: the message with quotes, backslashes,
 * a newline and a control character, the request id (null when there is
 * none), and a message that is not UTF-8 still a valid line. */
#include "core/log.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

/* The lines logged while fn ran, from a file stderr pointed to. */
static char *capture(void (*fn)(void))
{
	static char buf[16384];
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	dup2(fileno(f), STDERR_FILENO);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void log_some(void)
{
	ah_log_set_json(true);
	ah_log_set_request_id("0123abcd");
	ah_log_info("say \"hi\" \\ back\nnext \x01 é");
	ah_log_set_request_id(NULL);
	ah_log_warn("bytes \xff\xfe end");
	ah_log_set_json(false);
	ah_log_info("plain again");
}

int main(void)
{
	ah_log_set_program("test-log");
	char *out = capture(log_some);
	char *l1 = out, *l2 = strchr(l1, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
	l2[-1] = l3[-1] = '\0';
	json_object *a = json_tokener_parse(l1), *b = json_tokener_parse(l2), *v;
	ok(a && json_object_object_get_ex(a, "msg", &v) &&
	   strcmp(json_object_get_string(v), "say \"hi\" \\ back\nnext \x01 é") == 0,
	   "the message reads back exactly (a newline is escaped: it cannot end the line)");
	ok(a && json_object_object_get_ex(a, "request_id", &v) &&
	   strcmp(json_object_get_string(v), "0123abcd") == 0, "the request id");
	ok(a && json_object_object_get_ex(a, "level", &v) && strcmp(json_object_get_string(v), "INFO") == 0 &&
	   json_object_object_get_ex(a, "program", &v) && strcmp(json_object_get_string(v), "test-log") == 0 &&
	   json_object_object_get_ex(a, "pid", &v) && json_object_get_int(v) == (int)getpid() &&
	   json_object_object_get_ex(a, "time", &v) && strlen(json_object_get_string(v)) == 24,
	   "level, program, pid and time");
	ok(b && json_object_object_get_ex(b, "request_id", &v) && v == NULL, "no request: request_id null");
	ok(b && json_object_object_get_ex(b, "msg", &v) &&
	   strcmp(json_object_get_string(v), "bytes \xc3\xbf\xc3\xbe end") == 0,
	   "bytes that are not UTF-8: a valid line, each byte as \\u00XX");
	ok(strstr(l3, " INFO test-log[") && strstr(l3, "plain again") && l3[0] != '{', "text lines again after");
	json_object_put(a);
	json_object_put(b);
	return tap_done();
}
