/* agenthost, the command-line client of the REST API: the types every command
 * file shares. A command is one row of a table (cmd_table.c lists the tables of
 * the command files, as handlers/routes.c lists the route tables): the words
 * that name it, its arguments and options as data, and one function. Options
 * and --help are parsed and printed from the row, so a command file holds only
 * what the command does; each option fills a typed member of the command's
 * options struct (AH_OPT_* below), which the function reads as a->opts.
 *
 * The client is a short-lived process: everything is allocated from one arena
 * that lives until exit, json-c objects included (their release is a cleanup
 * hook of the arena). */
#ifndef AH_CLI_CLI_H
#define AH_CLI_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <json-c/json.h>

#include "core/arena.h"
#include "core/err.h"

/* Exit statuses, documented in agenthost.1. */
enum {
	AH_CLI_EXIT_OK = 0,
	AH_CLI_EXIT_API = 1,    /* the API refused or failed, or a deploy/invocation failed */
	AH_CLI_EXIT_USAGE = 2,  /* bad command line, missing configuration */
	AH_CLI_EXIT_NET = 3,    /* the API could not be reached */
};

/* The client's own error codes on top of core/err.h's: they pick the exit
 * status (every other code exits with AH_CLI_EXIT_API). */
enum {
	AH_CLI_EUSAGE = -100,
	AH_CLI_ENET = -101,
};

#define AH_CLI_MAX_OPTS 16

/* An option's kind says the type of the variable it fills (git's
 * parse-options, with the variables as members of one struct per command, so
 * that the tables stay data): a flag sets a bool, a string option a
 * const char * (NULL: not given, "" for --name=), a number option a
 * struct ah_cli_int after checking its range. */
enum ah_cli_opt_kind { AH_CLI_OPT_BOOL = 1, AH_CLI_OPT_STRING, AH_CLI_OPT_INT };

struct ah_cli_int {
	bool set;           /* given on the command line */
	long long n;        /* its value, in [lo, hi] of its row */
};

struct ah_cli_opt {
	const char *name;   /* long name without "--" */
	char shortname;     /* 0: none */
	const char *arg;    /* the value's name in --help; NULL: a flag */
	const char *help;
	enum ah_cli_opt_kind kind;
	size_t off;         /* the member it fills in the command's options struct */
	long long lo, hi;   /* AH_CLI_OPT_INT: the accepted range */
};

/* offsetof(type, member), refused at compile time unless the member has type
 * ctype: a row cannot fill a member of another type. */
#define AH_CLI_OFF(type, member, ctype) \
	(offsetof(type, member) + 0 * sizeof(char[_Generic(((type *)0)->member, ctype: 1, default: -1)]))
/* The rows: long name, short letter (0: none), [the value's name in --help,
 * range,] the command's options struct and the member it fills, the help. */
#define AH_OPT_BOOL(name, sh, type, member, help) \
	{name, sh, NULL, help, AH_CLI_OPT_BOOL, AH_CLI_OFF(type, member, bool), 0, 0}
#define AH_OPT_STRING(name, sh, arg, type, member, help) \
	{name, sh, arg, help, AH_CLI_OPT_STRING, AH_CLI_OFF(type, member, const char *), 0, 0}
#define AH_OPT_INT(name, sh, arg, lo, hi, type, member, help) \
	{name, sh, arg, help, AH_CLI_OPT_INT, AH_CLI_OFF(type, member, struct ah_cli_int), lo, hi}

struct ah_cli;
struct ah_cli_args;

struct ah_cli_cmd {
	const char *words;     /* "agents list": what the user types, space-separated */
	const char *args;      /* positional arguments for --help, e.g. "SLUG [PROMPT]" */
	const char *summary;   /* one line */
	int min_pos, max_pos;  /* how many positional arguments; max -1: any */
	bool no_auth;          /* runs without a stored API key (login, init) */
	int (*run)(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err);
	struct ah_cli_opt opts[AH_CLI_MAX_OPTS];
	size_t opts_size;      /* sizeof the struct opts' rows fill (0: no options) */
};

/* The command line of one command after parsing. */
struct ah_cli_args {
	const struct ah_cli_cmd *cmd;
	int npos;
	char **pos;
	const void *opts;      /* the command's options struct, filled from its rows */
};

struct ah_cli {
	ah_arena *a;
	bool json;                 /* --json: machine-readable output */
	bool tty_in, tty_out, tty_err;
	bool color_out, color_err; /* a terminal and NO_COLOR unset */
	const char *url;           /* API base URL, ends in /api/v1 (no trailing slash) */
	const char *key;           /* API key, NULL when none */
	const char *url_flag;      /* --url, which wins over environment and file */
	const char *config_path;   /* $XDG_CONFIG_HOME/agenthost/config */
	int max_wait;              /* longest 429 wait honoured, seconds */
	void *curl;                /* one easy handle, reused (keeps the connection) */
	bool warned_plain_http;    /* the key-in-clear warning was given (once a run) */
};

/* Every command table, in the order --help lists them (cmd_table.c), ending
 * with NULL; each table ends with a row whose words is NULL. */
extern const struct ah_cli_cmd *const ah_cli_tables[];

/* args.c: the command line. */
/* Finds the command that argv's leading words name (the longest match);
 * *used gets how many words it took. NULL when none does. */
const struct ah_cli_cmd *ah_cli_find(char **argv, int argc, int *used);
/* Parses a command's options and positionals (global options included). */
int ah_cli_parse(struct ah_cli *c, const struct ah_cli_cmd *cmd, int argc, char **argv,
                 struct ah_cli_args *out, ah_err *err);
/* Handles a global option at argv[*i] (advancing *i past its value); false if
 * argv[*i] is not one. */
bool ah_cli_global_opt(struct ah_cli *c, int argc, char **argv, int *i, int *rc, ah_err *err);
/* The option of cmd nearest to the unknown name (a typo's suggestion), NULL
 * when none is near. */
const struct ah_cli_opt *ah_cli_opt_nearest(const struct ah_cli_cmd *cmd, const char *name, size_t len);
void ah_cli_help(FILE *f, const struct ah_cli_cmd *cmd);
void ah_cli_help_all(FILE *f, const char *prefix);
void ah_cli_complete(int argc, char **argv);

/* config.c: where the URL and the key come from. */
int ah_cli_config_load(struct ah_cli *c, ah_err *err);
int ah_cli_config_save(struct ah_cli *c, const char *url, const char *key, ah_err *err);
int ah_cli_config_remove(struct ah_cli *c, bool *removed, ah_err *err);

/* prompt.c: reading from the user. */
/* One line typed at the terminal (echoed), default def when empty (NULL: none). */
int ah_cli_ask(struct ah_cli *c, const char *question, const char *def, char **out, ah_err *err);
/* A secret: typed without echo on a terminal, else all of stdin (one trailing
 * newline dropped); at most cap bytes. */
int ah_cli_read_secret(struct ah_cli *c, const char *question, size_t cap, char **out, ah_err *err);
/* All of f (at most cap bytes) into the arena, NUL-terminated. */
int ah_cli_read_all(struct ah_cli *c, FILE *f, size_t cap, char **out, size_t *len, ah_err *err);
/* True when the user answers yes at the terminal. */
bool ah_cli_confirm(struct ah_cli *c, const char *question);

/* http.c: calls to the API. */
struct ah_cli_req {
	const char *method;
	const char *path;           /* under the base URL, e.g. "/agents"; segments escaped */
	json_object *json;          /* request body, or NULL */
	FILE *upload;               /* or a body streamed from this file ... */
	long long upload_size;
	const char *content_type;   /* ... with this type */
	void *mime;                 /* or a multipart body (a curl_mime of c->curl) */
	const char *url;            /* an absolute URL instead of path (upload_url, a
	                             * download's redirect): sent without the key, and its
	                             * answer need not be JSON */
	FILE *download;             /* a 2xx answer's body goes here, not into body */
	long timeout;               /* seconds, 0: the default for CRUD calls */
	bool progress;              /* a progress bar for the upload on a terminal */
	const char *waiting;        /* or "running x": a line with the time waited, on a terminal */
	/* A 2xx text/event-stream answer's bytes go here as they come, not into
	 * body (a streamed invocation): 0 to stop. */
	size_t (*events)(void *ctx, const char *data, size_t len);
	void *events_ctx;
};

struct ah_cli_resp {
	long status;
	json_object *body;          /* parsed JSON, NULL when there was none */
	long long total;            /* X-Total-Count, -1 when absent */
	long long written;          /* bytes written to download */
};

/* Sends the request, waiting out 429s (up to max_wait, saying so); 0 for a 2xx
 * answer. An API error returns AH_EFAIL with the API's detail as the message
 * and out filled in; a network failure AH_CLI_ENET. */
int ah_cli_call(struct ah_cli *c, const struct ah_cli_req *rq, struct ah_cli_resp *out, ah_err *err);
int ah_cli_get(struct ah_cli *c, const char *path, struct ah_cli_resp *out, ah_err *err);
/* Warns on stderr, once a run, when url is plain http:// to a host other than
 * loopback (127.0.0.0/8, ::1, localhost): a key sent there crosses a network
 * in clear. Called before a request that carries the key, and by login as
 * soon as such a URL is typed (before the key is asked for). */
void ah_cli_warn_plain_http(struct ah_cli *c, const char *url);
int ah_cli_send(struct ah_cli *c, const char *method, const char *path, json_object *body,
                struct ah_cli_resp *out, ah_err *err);
/* s escaped as one path segment, from the arena. */
const char *ah_cli_seg(struct ah_cli *c, const char *s);
/* A new json object released with the arena; ah_cli_own hands it any object. */
json_object *ah_cli_obj(struct ah_cli *c);
json_object *ah_cli_own(struct ah_cli *c, json_object *o);

/* output.c: what the user reads. */
enum ah_cli_kind { AH_COL_TEXT, AH_COL_TIME, AH_COL_NUM, AH_COL_STATUS, AH_COL_BOOL, AH_COL_NETWORK };
struct ah_cli_col {
	const char *title;
	const char *key;
	enum ah_cli_kind kind;
};
/* A JSON value as --json prints it (pretty, to stdout). */
void ah_cli_print_json(struct ah_cli *c, json_object *o);
/* A list as a table with a header row; an empty list prints "none" on stderr. */
void ah_cli_table(struct ah_cli *c, json_object *list, const struct ah_cli_col *cols);
/* One record as "title: value" lines. */
void ah_cli_record(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols);
/* A list or record: JSON with --json, else the table or record. */
void ah_cli_show(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols);
/* Member key of o as display text ("-" when null or absent), control
 * characters replaced so that the API's text cannot drive the terminal. */
const char *ah_cli_text(struct ah_cli *c, json_object *o, const char *key, enum ah_cli_kind kind);
/* A note for the user on stderr (not with --json unless it is a warning). */
void ah_cli_note(struct ah_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* text in an SGR colour ("1" bold, "31" red, "32" green, ...) when that stream has colour. */
const char *ah_cli_paint(struct ah_cli *c, FILE *f, const char *sgr, const char *text);
/* The error line and the exit status for a failed command. */
int ah_cli_fail(struct ah_cli *c, const ah_err *err);
/* The same status line rewritten in place on stderr (a terminal only). */
void ah_cli_status_line(struct ah_cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ah_cli_status_end(struct ah_cli *c);
/* Usage error for the running command: AH_CLI_EUSAGE with the message. */
int ah_cli_usage(ah_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* agents.c: shared with the other command files. */
extern const struct ah_cli_col ah_cli_agent_cols[];
/* --limit and --offset, a member of the options struct of every list. */
struct ah_cli_paging { struct ah_cli_int limit, offset; };
/* The options struct of a list whose only options are those. */
struct ah_cli_list_opts { struct ah_cli_paging page; };
#define AH_CLI_LIST_OPTS {AH_CLI_PAGING_OPTS(struct ah_cli_list_opts, page)}, sizeof(struct ah_cli_list_opts)
/* "limit=N&offset=M" from a command's --limit and --offset. */
const char *ah_cli_paging(struct ah_cli *c, const struct ah_cli_paging *p);
/* GET path (a list) shown as a table or JSON. */
int ah_cli_list(struct ah_cli *c, const char *path, const struct ah_cli_col *cols, ah_err *err);

/* Budgets (usage.c): --max-day and --max-month (USD, or "none" to clear)
 * into body as max_cost_usd_per_day and _per_month; the options' rows. */
struct ah_cli_budget { const char *max_day, *max_month; };
void ah_cli_budget_fields(const struct ah_cli_budget *b, json_object *body);
/* The rows of --max-day and --max-month for options struct type's member. */
#define AH_CLI_BUDGET_OPTS(type, member) \
	AH_OPT_STRING("max-day", 0, "USD", type, member.max_day, "daily spend limit (none: no limit)"), \
	AH_OPT_STRING("max-month", 0, "USD", type, member.max_month, "monthly spend limit (none: no limit)")
#define AH_CLI_BUDGET_COLS \
	{"max usd/day", "max_cost_usd_per_day", AH_COL_NUM}, \
	{"max usd/month", "max_cost_usd_per_month", AH_COL_NUM}
/* The rows of --limit and --offset for options struct type's member. */
#define AH_CLI_PAGING_OPTS(type, member) \
	AH_OPT_INT("limit", 0, "N", 1, 100, type, member.limit, "at most N (1-100, default 20)"), \
	AH_OPT_INT("offset", 0, "N", 0, 1LL << 40, type, member.offset, "skip the first N")

/* files.c, file_transfer.c: managed files. */
extern const struct ah_cli_col ah_cli_file_cols[];
/* A file record or list (cols NULL: the record's), tags as "a,b" in tables. */
void ah_cli_show_file(struct ah_cli *c, json_object *o, const struct ah_cli_col *cols);
/* "a,b" as a JSON list of tags (a new object, for json_object_object_add). */
json_object *ah_cli_tag_list(struct ah_cli *c, const char *csv);
/* The options of the files commands (a member without a row in a command's
 * table stays unset). */
struct ah_cli_files_opts {
	struct ah_cli_paging page;
	const char *scope, *tags, *search, *description, *agent, *content_type, *output, *name;
	bool force, yes;
};
int ah_cli_files_upload(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err);
int ah_cli_files_download(struct ah_cli *c, const struct ah_cli_args *a, ah_err *err);

/* manifest.c: the project's agent.json. */
struct ah_cli_manifest {
	const char *path;           /* the file read */
	const char *name, *slug, *description;   /* slug derived from name when absent */
};
int ah_cli_manifest_read(struct ah_cli *c, const char *dir, struct ah_cli_manifest *out, ah_err *err);

/* pack.c: a project directory as a gzip tarball in an unlinked temporary
 * file (the caller closes it), with its size and how many files it holds. */
int ah_cli_pack(struct ah_cli *c, const char *dir, FILE **out, long long *size, int *nfiles, ah_err *err);

#endif
