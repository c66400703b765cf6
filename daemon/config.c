/*
 * config.c — tird's settings: one table (TIRD_CONFIG in tird.h) gives the
 * defaults, the config-file names, the flags and the help text.  Precedence:
 * defaults, then the --config file, then the other flags (main.c applies
 * them in that order).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tird.h"

enum { CFG_STR, CFG_INT, CFG_BOOL };

typedef struct setting {
	const char *name;
	int type;
	size_t off;
	const char *def, *help;
} setting;

static const setting settings[] = {
#define TIRD_CFG_ROW(name, type, f, def, help) \
	{ #name, CFG_##type, offsetof(tird_config, f), def, help },
	TIRD_CONFIG(TIRD_CFG_ROW)
#undef TIRD_CFG_ROW
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static int set_one(tird_config *c, const setting *s, const char *v, char *msg, size_t n)
{
	void *p = (char *)c + s->off;
	switch (s->type) {
	case CFG_STR: {
		char **sp = p;
		free(*sp);
		*sp = tird_strdup(v);
		return 0;
	}
	case CFG_INT: {
		char *end;
		errno = 0;
		long x = strtol(v, &end, 10);
		if (errno || end == v || *end || x < 0) {
			snprintf(msg, n, "%s: \"%s\" is not a non-negative integer", s->name, v);
			return -1;
		}
		*(long *)p = x;
		return 0;
	}
	default:
		if (!strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "on"))
			*(bool *)p = true;
		else if (!strcmp(v, "false") || !strcmp(v, "no") || !strcmp(v, "0") ||
			 !strcmp(v, "off"))
			*(bool *)p = false;
		else {
			snprintf(msg, n, "%s: \"%s\" is not true or false", s->name, v);
			return -1;
		}
		return 0;
	}
}

void config_defaults(tird_config *c)
{
	memset(c, 0, sizeof *c);
	char msg[64];
	for (size_t i = 0; i < NSETTINGS; i++)
		set_one(c, &settings[i], settings[i].def, msg, sizeof msg);
}

int config_set(tird_config *c, const char *name, const char *value, char *msg, size_t n)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (!strcmp(settings[i].name, name))
			return set_one(c, &settings[i], value, msg, n);
	snprintf(msg, n, "unknown setting \"%s\"", name);
	return -1;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Whether fgets cut the line it read into `line` (cap bytes) short: the
 * rest would be read as a line of its own (the tail of a long comment as a
 * setting), so a line that long is refused instead. */
static bool line_cut(FILE *f, const char *line, size_t cap)
{
	size_t len = strlen(line);
	if (len + 1 < cap || line[len - 1] == '\n')
		return false;
	int ch = getc(f);
	if (ch == EOF)
		return false;
	ungetc(ch, f);
	return true;
}

int config_load(tird_config *c, const char *path, char *msg, size_t n)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(msg, n, "%s: %s", path, strerror(errno));
		return -1;
	}
	char line[1024];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (line_cut(f, line, sizeof line)) {
			snprintf(msg, n, "%s:%d: longer than %zu characters", path, lineno,
				 sizeof line - 2);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = trim(line);
		if (!*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(msg, n, "%s:%d: expected name = value", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		char *name = trim(s), *value = trim(eq + 1), m[256];
		size_t vl = strlen(value);
		if (vl >= 2 && value[0] == '"' && value[vl - 1] == '"') {
			value[vl - 1] = '\0';
			value++;
		}
		if (config_set(c, name, value, m, sizeof m)) {
			snprintf(msg, n, "%s:%d: %s", path, lineno, m);
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}

static const char *const scope_names[] = {
#define TIRD_SCOPE_NAME(id, name) name,
	TIRD_SCOPES(TIRD_SCOPE_NAME)
#undef TIRD_SCOPE_NAME
};

const char *tird_scopes_name(unsigned scopes, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = '\0';
	for (int i = 0; i < TIRD_NSCOPES; i++)
		if (scopes & (1u << i))
			at += (size_t)snprintf(buf + at, at < n ? n - at : 0, "%s%s", at ? "," : "",
					       scope_names[i]);
	return buf;
}

static void free_tokens(tird_config *c)
{
	for (int i = 0; i < c->ntokens; i++)
		free(c->tokens[i].secret);
	free(c->tokens);
	c->tokens = NULL;
	c->ntokens = 0;
	c->token = NULL;
}

/* "read,submit" into *scopes; -1 naming the word that is not a scope. */
static int parse_scopes(char *s, unsigned *scopes, char *msg, size_t n)
{
	char *save = NULL;
	*scopes = 0;
	for (char *w = strtok_r(s, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		int found = -1;
		for (int i = 0; i < TIRD_NSCOPES; i++)
			if (!strcmp(w, scope_names[i]))
				found = i;
		if (found < 0) {
			snprintf(msg, n, "\"%.40s\" is not a scope (read, submit, worker, admin)", w);
			return -1;
		}
		*scopes |= 1u << found;
	}
	if (!*scopes) {            /* "," would be a token that may do nothing */
		snprintf(msg, n, "\"%.40s\" names no scope (read, submit, worker, admin)", s);
		return -1;
	}
	return 0;
}

/* The token file: one token a line, `TOKEN [SCOPES [NAME]]` (SCOPES a
 * comma-separated list of read, submit, worker, admin; '#' starts a comment).
 * A line of a token alone is today's (version 1) file: that token may do
 * everything.  Tokens are at least 8 characters, each given once. */
static int load_tokens(tird_config *c, char *msg, size_t n)
{
	FILE *f = fopen(c->token_file, "r");
	if (!f) {
		snprintf(msg, n, "token_file %s: %s", c->token_file, strerror(errno));
		return -1;
	}
	char line[1024];
	int lineno = 0, rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		lineno++;
		if (line_cut(f, line, sizeof line)) {
			snprintf(msg, n, "token_file %s:%d: longer than %zu characters",
				 c->token_file, lineno, sizeof line - 2);
			rc = -1;
			break;
		}
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *save = NULL, *secret = strtok_r(line, " \t\r\n", &save);
		if (!secret)
			continue;
		char *scopes = strtok_r(NULL, " \t\r\n", &save);
		char *name = strtok_r(NULL, " \t\r\n", &save);
		char *extra = strtok_r(NULL, " \t\r\n", &save);
		char m[160];
		tird_token t = { .scopes = TIRD_SCOPE_ALL };
		if (strlen(secret) < 8) {
			snprintf(m, sizeof m, "the token is shorter than 8 characters");
			rc = -1;
		} else if (extra) {
			snprintf(m, sizeof m, "expected TOKEN [SCOPES [NAME]], got more");
			rc = -1;
		} else if (scopes && parse_scopes(scopes, &t.scopes, m, sizeof m)) {
			rc = -1;
		} else if (name && strlen(name) >= sizeof t.name) {
			snprintf(m, sizeof m, "the name is longer than %zu characters",
				 sizeof t.name - 1);
			rc = -1;
		} else {
			/* the name a line ends with, given or not: a worker is bound to
			 * its token's name, so no two tokens may share one ("token-2"
			 * given on line 1 is line 2's default) */
			if (name)
				snprintf(t.name, sizeof t.name, "%s", name);
			else
				snprintf(t.name, sizeof t.name, "token-%d", lineno);
			for (int i = 0; rc == 0 && i < c->ntokens; i++)
				if (!strcmp(c->tokens[i].secret, secret) ||
				    !strcmp(c->tokens[i].name, t.name)) {
					snprintf(m, sizeof m, "the %s of token %d again%s",
						 strcmp(c->tokens[i].secret, secret) ? "name" : "token",
						 i + 1, name ? "" : " (the default name of this line)");
					rc = -1;
				}
		}
		if (rc) {
			snprintf(msg, n, "token_file %s:%d: %s", c->token_file, lineno, m);
			break;
		}
		t.secret = tird_strdup(secret);
		c->tokens = tird_xrealloc(c->tokens, (size_t)(c->ntokens + 1) * sizeof *c->tokens);
		c->tokens[c->ntokens++] = t;
	}
	fclose(f);
	if (rc == 0 && c->ntokens == 0) {
		snprintf(msg, n, "token_file %s: empty (no token)", c->token_file);
		rc = -1;
	}
	for (int i = 0; rc == 0 && i < c->ntokens && !c->token; i++)
		if (c->tokens[i].scopes & (TIRD_SCOPE(WORKER) | TIRD_SCOPE(ADMIN)))
			c->token = c->tokens[i].secret;
	return rc;
}

int config_finish(tird_config *c, char *msg, size_t n)
{
	/* listen: HOST:PORT, or :PORT / PORT for 127.0.0.1 */
	const char *colon = strrchr(c->listen, ':');
	const char *port = colon ? colon + 1 : c->listen;
	size_t hl = colon ? (size_t)(colon - c->listen) : 0;
	char *end;
	long p = strtol(port, &end, 10);
	if (!*port || *end || p < 0 || p > 65535 || hl >= sizeof c->host) {
		snprintf(msg, n, "listen: \"%s\" is not HOST:PORT", c->listen);
		return -1;
	}
	snprintf(c->host, sizeof c->host, "%.*s", (int)hl, c->listen);
	if (!c->host[0] || !strcmp(c->host, "localhost"))
		snprintf(c->host, sizeof c->host, "127.0.0.1");
	c->port = (int)p;
	int lv = log_level_parse(c->log_level);
	if (lv < 0) {
		snprintf(msg, n, "log_level: \"%s\" is not debug, info, warn or error",
			 c->log_level);
		return -1;
	}
	log_set_level((log_level)lv);
	if (c->tuning_threads < 1 || c->tuning_threads > 64 || c->default_batch < 1 ||
	    c->default_trials < 1 || c->lease_s < 1 || c->max_body < 256) {
		snprintf(msg, n, "tuning_threads, default_batch, default_trials and lease_s "
			 "must be positive (tuning_threads at most 64), max_body at least 256");
		return -1;
	}
	if (c->default_patience < 0 || c->default_patience > TIRD_PATIENCE_MAX) {
		snprintf(msg, n, "default_patience must be 0 (never stop early) to %d rounds "
			 "(given %ld)", TIRD_PATIENCE_MAX, c->default_patience);
		return -1;
	}
	if (c->worker_wait_s < 1 || c->max_queued_jobs < 1 || c->max_connections < 1 ||
	    c->max_connections_per_ip < 0 || c->idle_timeout_s < 1 || c->model_save_rows < 1 ||
	    c->model_save_s < 1) {
		snprintf(msg, n, "worker_wait_s, max_queued_jobs, max_connections, idle_timeout_s, "
			 "model_save_rows and model_save_s must be positive, "
			 "max_connections_per_ip 0 or more");
		return -1;
	}
	if (c->job_lease_s < 2 || c->job_lease_renew_s < 1 ||
	    c->job_lease_renew_s >= c->job_lease_s) {
		snprintf(msg, n, "job_lease_s must be at least 2 and job_lease_renew_s at least 1 "
			 "and less than job_lease_s (given %ld and %ld): a replica renews its "
			 "claim of a job several times in each lease", c->job_lease_s,
			 c->job_lease_renew_s);
		return -1;
	}
	if (!strcmp(c->pipeline, "auto")) {
		c->pipeline_depth = -1;
	} else {
		char *rest;
		long k = strtol(c->pipeline, &rest, 10);
		if (rest == c->pipeline || *rest || k < 0 || k > TIR_TUNE_PIPELINE_MAX) {
			snprintf(msg, n, "pipeline: \"%s\" is not auto or a number from 0 to %d",
				 c->pipeline, TIR_TUNE_PIPELINE_MAX);
			return -1;
		}
		c->pipeline_depth = (int)k;
	}
	c->limits = tir_limits_default();
	if (c->max_extent)
		c->limits.max_extent = c->max_extent;
	if (c->max_elements)
		c->limits.max_elements = c->max_elements;
	if (c->max_gflop)
		c->limits.max_flops = (double)c->max_gflop * 1e9;
	if ((size_t)c->max_body < c->limits.max_json_bytes)
		c->limits.max_json_bytes = (size_t)c->max_body;
	free_tokens(c);
	if (c->token_file[0] && load_tokens(c, msg, n))
		return -1;
	return 0;
}

void config_usage(void)
{
	printf("usage: tird [--config FILE] [--NAME VALUE ...]\n"
	       "       tird --help | --version\n\n"
	       "Settings (config file `name = value`, flag --name with '-' for '_'):\n");
	for (size_t i = 0; i < NSETTINGS; i++) {
		char flag[64];
		snprintf(flag, sizeof flag, "--%s", settings[i].name);
		for (char *p = flag + 2; *p; p++)
			if (*p == '_')
				*p = '-';
		printf("  %-20s %s (default %s)\n", flag, settings[i].help,
		       settings[i].def[0] ? settings[i].def : "none");
	}
}

void config_free(tird_config *c)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (settings[i].type == CFG_STR) {
			char **sp = (char **)((char *)c + settings[i].off);
			free(*sp);
			*sp = NULL;
		}
	free_tokens(c);
}
