/* Settings structs (core/settings.h) and plans (core/plans.h): every key of the
 * table lands in a field of its own struct, of its type, with no field left
 * without a key; the values filled at load are the table's (the defaults are
 * spelled once, in the table); the plans are one table. */
#include "core/config.h"
#include "core/plans.h"
#include "core/settings.h"
#include "tap.h"

#include <ftw.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ah_cfg_field field_of(ah_cfg_type t)
{
	switch (t) {
	case AH_CFGT_STR:
	case AH_CFGT_PATH:
		return AH_CFGF_STR;
	case AH_CFGT_BOOL:
		return AH_CFGF_BOOL;
	default:
		return AH_CFGF_LL;
	}
}

static size_t size_of(ah_cfg_field f)
{
	return f == AH_CFGF_STR ? sizeof(const char *) : f == AH_CFGF_LL ? sizeof(long long) : sizeof(bool);
}

static size_t align_of(ah_cfg_field f)
{
	return f == AH_CFGF_STR ? alignof(const char *) : f == AH_CFGF_LL ? alignof(long long) : alignof(bool);
}

static size_t align_up(size_t n, size_t a)
{
	return (n + a - 1) / a * a;
}

/* Each key: a field of its key's type, inside its struct, its own. */
static void test_fields(void)
{
	bool typed = true, inside = true, own = true;
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		const ah_cfg_info *t = &ah_cfg_table[k];
		if (t->field != field_of(t->type))
			printf("# %s: its field's C type is not its key's\n", t->name), typed = false;
		const ah_settings_set_info *s = t->set >= 0 && t->set < AH_SET_COUNT ? &ah_settings_sets[t->set] : NULL;
		if (!s || t->offset < s->offset || t->offset + size_of(t->field) > s->offset + s->size)
			printf("# %s: its field is not in its struct\n", t->name), inside = false;
		for (int j = 0; j < k; j++)
			if (ah_cfg_table[j].offset == t->offset)
				printf("# %s and %s share a field\n", ah_cfg_table[j].name, t->name), own = false;
	}
	ok(typed, "every key's settings field has its key's type");
	ok(inside, "every key's field lies in the struct its row names");
	ok(own, "no two keys share a field");
}

/* A struct's fields, in offset order, leave no room for a field without a key:
 * each starts where the one before ends, but for alignment. (A bool left out
 * after a bool can hide in padding; the others cannot.) */
static void test_no_orphans(void)
{
	for (int s = 0; s < AH_SET_COUNT; s++) {
		const ah_settings_set_info *set = &ah_settings_sets[s];
		size_t at = set->offset, n = 0;
		bool tight = true;
		for (;;) {
			int next = -1;
			for (int k = 0; k < AH_CFG_COUNT; k++)
				if (ah_cfg_table[k].offset >= at && ah_cfg_table[k].offset < set->offset + set->size &&
				    (next < 0 || ah_cfg_table[k].offset < ah_cfg_table[next].offset))
					next = k;
			if (next < 0)
				break;
			if (ah_cfg_table[next].offset != align_up(at, align_of(ah_cfg_table[next].field))) {
				printf("# ah_%s_settings: %zu bytes before %s hold no key's field\n", set->name,
				       ah_cfg_table[next].offset - at, ah_cfg_table[next].name);
				tight = false;
			}
			at = ah_cfg_table[next].offset + size_of(ah_cfg_table[next].field);
			n++;
		}
		if (align_up(at, alignof(long long)) != set->offset + set->size) {
			printf("# ah_%s_settings ends with %zu bytes no key fills\n", set->name, set->offset + set->size - at);
			tight = false;
		}
		ok(n > 0 && tight, "ah_%s_settings: %zu fields, each a key's", set->name, n);
	}
}

/* What load filled is what the accessors read, and with no configuration the
 * table's defaults: a module reading its struct sees no default of its own. */
static void check_filled(const ah_config *c, const char *what)
{
	const ah_settings *s = ah_settings_of(c);
	bool same = true;
	for (int k = 0; k < AH_CFG_COUNT; k++) {
		const ah_cfg_info *t = &ah_cfg_table[k];
		const char *p = (const char *)s + t->offset;
		const char *str;
		long long num;
		bool b;
		switch (t->field) {
		case AH_CFGF_STR:
			memcpy(&str, p, sizeof str);
			same &= str && strcmp(str, ah_cfg_str(c, (ah_cfg_key)k)) == 0;
			break;
		case AH_CFGF_LL:
			memcpy(&num, p, sizeof num);
			same &= num == ah_cfg_int(c, (ah_cfg_key)k);
			break;
		default:
			memcpy(&b, p, sizeof b);
			same &= b == ah_cfg_bool(c, (ah_cfg_key)k);
		}
		if (!same) {
			printf("# %s: the field is not the key's value\n", t->name);
			break;
		}
	}
	ok(same, "%s: every field holds its key's value", what);
}

static void test_values(void)
{
	char path[] = "/tmp/ah-test-settings-XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fputs("socket_mode = 0640\nmodel_gateway = on\nprice_output_per_mtok = 0.5\n"
	      "max_sessions_pro = 7\nsandbox_dns = 9.9.9.9\n", f);
	fclose(f);
	ah_config *c = NULL;
	ah_err err = {0};
	ok(ah_config_load(&c, path, &err) == 0, "a file loads (%s)", err.msg);
	unlink(path);
	if (!c)
		return;
	const ah_settings *s = ah_settings_of(c);
	ok(s->api.socket_mode == 0640 && s->model.gateway && s->price.output == 500000 &&
	   strcmp(s->sandbox.dns, "9.9.9.9") == 0, "the file's values are in the structs");
	ok(s->invoke.max_sessions[AH_PLAN_PRO] == 7 && s->invoke.max_sessions[AH_PLAN_FREE] == 3 &&
	   s->invoke.max_sessions[AH_PLAN_ENTERPRISE] == 100,
	   "max_sessions_<plan> lands by plan; unset, the plan's own cap");
	ok(s->price.input == 3000000 && s->price.cache_write == 3750000 &&
	   s->price.cache_write_1h == 6000000 && s->price.cache_read == 300000, "prices are micro-dollars, computed ones too");
	check_filled(c, "a loaded file");
	ah_config_free(c);
	check_filled(NULL, "no configuration");
	ok(ah_settings_of(NULL)->db.port == 3306 && *ah_settings_of(NULL)->db.password == '\0',
	   "no configuration: the table's defaults, \"\" for an unset string");
}

static void test_plans(void)
{
	bool named = true;
	for (int i = 0; i < AH_PLAN_COUNT; i++) {
		const ah_plan *p = ah_plan_find(ah_plans[i].name);
		named &= p == &ah_plans[i] && ah_plan_id_of(p) == (ah_plan_id)i && p->quota > 0 &&
		         p->sessions > 0 && p->warm > 0;
		char key[64];
		snprintf(key, sizeof key, "max_sessions_%s", ah_plans[i].name);
		int k = ah_cfg_find(key);
		named &= k >= 0 && ah_cfg_table[k].offset == offsetof(ah_settings, invoke.max_sessions) +
		                                             (size_t)i * sizeof(long long);
	}
	ok(named, "each plan is found by name and has a max_sessions_<plan> key at its index");
	ok(ah_plan_quota("free") == 100LL << 20 && ah_plan_quota("pro") == 10LL << 30 &&
	   ah_plan_quota("enterprise") == 1LL << 40 && ah_plan_quota("gold") == -1,
	   "quotas: 100 MB, 10 GB, 1 TB; an unknown plan has none");
	ok(ah_plan_max_sessions("free") == 3 && ah_plan_max_sessions("pro") == 20 &&
	   ah_plan_max_sessions("enterprise") == 100 && ah_plan_max_sessions("") == -1,
	   "sessions: 3, 20, 100");
	ok(ah_plan_find("free")->warm == 1 && ah_plan_find("pro")->warm == 10 &&
	   ah_plan_find("enterprise")->warm == 50 && !ah_plan_find("Free") && !ah_plan_find(NULL),
	   "warm: 1, 10, 50; names are exact");
}

static int built_names; /* lines that look a key up by a name or an id */

/* The calls that read a setting by key instead of from its module's struct. */
static const char *const BY_KEY[] = {"ah_cfg_find(", "ah_cfg_str(", "ah_cfg_opt(", "ah_cfg_int(",
                                     "ah_cfg_bool(", "ah_cfg_is_set("};

static int scan_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)ftw;
	size_t n = strlen(path);
	/* The loader, and config check (it reads a file's names), look keys up by name. */
	if (type != FTW_F || n < 2 || strcmp(path + n - 2, ".c") != 0 || strstr(path, "/core/config.c") ||
	    strstr(path, "/admin/config_check.c"))
		return 0;
	FILE *f = fopen(path, "r");
	char line[4096];
	for (int no = 1; f && fgets(line, sizeof line, f); no++)
		for (size_t i = 0; i < sizeof BY_KEY / sizeof BY_KEY[0]; i++)
			if (strstr(line, BY_KEY[i])) {
				printf("# %s:%d reads a setting by key (%.*s), not from its struct\n", path, no,
				       (int)strlen(BY_KEY[i]) - 1, BY_KEY[i]);
				built_names++;
			}
	if (f)
		fclose(f);
	return 0;
}

/* A setting is a field: no module builds a key's name at run time or reads a
 * key by its id; each takes its struct. */
static void test_no_built_names(const char *root)
{
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/lib", root);
	int rc = nftw(dir, scan_file, 16, FTW_PHYS);
	snprintf(dir, sizeof dir, "%s/handlers", root);
	rc |= nftw(dir, scan_file, 16, FTW_PHYS);
	ok(rc == 0 && built_names == 0, "no module reads a setting by key name or id (ah_cfg_*)");
}

int main(int argc, char **argv)
{
	unsetenv("AGENTHOST_CONFIG");
	test_fields();
	test_no_orphans();
	test_values();
	test_plans();
	if (argc > 1)
		test_no_built_names(argv[1]);
	return tap_done();
}
