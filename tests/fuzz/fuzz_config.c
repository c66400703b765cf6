/*
 * fuzz_config.c — tird's settings files (daemon/config.c): a `--config
 * FILE` of `name = value` lines and the token file it names, read and
 * finished as main.c does (config_defaults, config_load, config_finish).
 *
 * The input is the config file, then, after a line "%%", the token file;
 * the token_file setting always points at that part (or at none when there
 * is no "%%" line), whatever the input says, so no input reads a file of
 * this machine.  Both go through real files (config_load reads a path).
 * Checked on every input:
 *   - a refusal names its fault;
 *   - what is accepted is within the ranges config_finish promises (a
 *     port, a host, positive counts), every token at least 8 characters
 *     with scopes and a name of its own, the local workers' token one
 *     that may register workers.
 */
#define _GNU_SOURCE                /* memmem */
#include <unistd.h>
#include "tird.h"
#include "fuzz.h"

static char conf_path[64], tok_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static char dir[64];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/fuzz-config.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("fuzz_config: mkdtemp");
		exit(1);
	}
	snprintf(conf_path, sizeof conf_path, "%s/tird.conf", dir);
	snprintf(tok_path, sizeof tok_path, "%s/token", dir);
	return 0;
}

static void write_file(const char *path, const uint8_t *data, size_t n)
{
	FILE *f = fopen(path, "wb");
	FUZZ_ASSERT(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *sep = size >= 3 && !memcmp(data, "%%\n", 3) ? data
			     : memmem(data, size, "\n%%\n", 4);
	size_t conf_len = sep ? (size_t)(sep - data) : size;
	write_file(conf_path, data, conf_len);
	if (sep) {
		const uint8_t *tok = sep + (sep == data ? 3 : 4);
		write_file(tok_path, tok, size - (size_t)(tok - data));
	}
	tird_config c;
	char msg[512] = "";
	config_defaults(&c);
	int rc = config_load(&c, conf_path, msg, sizeof msg);
	if (rc) {
		FUZZ_ASSERT(msg[0], "a refused config without a message");
		FUZZ_NOTE("refused: %s", msg);
		config_free(&c);
		return 0;
	}
	FUZZ_ASSERT(!config_set(&c, "token_file", sep ? tok_path : "", msg, sizeof msg), "%s", msg);
	msg[0] = '\0';
	if (config_finish(&c, msg, sizeof msg)) {
		FUZZ_ASSERT(msg[0], "a refused config without a message");
		FUZZ_NOTE("refused: %s", msg);
		config_free(&c);
		return 0;
	}
	FUZZ_ASSERT(c.port >= 0 && c.port <= 65535 && c.host[0], "listen %s:%d", c.host, c.port);
	FUZZ_ASSERT(c.tuning_threads >= 1 && c.tuning_threads <= 64 && c.default_batch >= 1 &&
		    c.default_trials >= 1 && c.lease_s >= 1 && c.max_body >= 256 &&
		    c.worker_wait_s >= 1 && c.max_queued_jobs >= 1 && c.max_connections >= 1 &&
		    c.idle_timeout_s >= 1 && c.default_patience >= 0 &&
		    c.default_patience <= TIRD_PATIENCE_MAX, "a count out of range");
	FUZZ_ASSERT(c.limits.max_extent > 0 && c.limits.max_elements > 0 && c.limits.max_flops > 0,
		    "limits");
	FUZZ_ASSERT(!sep || c.ntokens >= 1, "a token file of no token accepted");
	for (int i = 0; i < c.ntokens; i++) {
		const tird_token *t = &c.tokens[i];
		FUZZ_ASSERT(strlen(t->secret) >= 8 && t->scopes && t->name[0], "token %d", i);
		for (int k = 0; k < i; k++)
			FUZZ_ASSERT(strcmp(t->secret, c.tokens[k].secret) && strcmp(t->name, c.tokens[k].name),
				    "tokens %d and %d share a secret or a name", k, i);
	}
	bool worker_token = false;
	for (int i = 0; i < c.ntokens; i++)
		if (c.token == c.tokens[i].secret)
			worker_token = c.tokens[i].scopes & (TIRD_SCOPE(WORKER) | TIRD_SCOPE(ADMIN));
	FUZZ_ASSERT(!c.token || worker_token, "the local workers' token may not register");
	config_free(&c);
	return 0;
}
