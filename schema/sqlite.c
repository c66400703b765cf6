/*
 * sqlite.c — the SQLite backend of the store (backend.h): one file in WAL
 * mode with synchronous=NORMAL, foreign keys on and a busy timeout.  A
 * committed transaction survives a killed process (kill -9), and one in
 * flight is rolled back at the next open.  Statements are prepared once
 * (SQLITE_PREPARE_PERSISTENT) and reset between uses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include "backend.h"

static const migration sqlite_migrations[] = {
#include "migrations.inc"
};

struct db {
	sqlite3 *h;
};

typedef struct lite_stmt {
	db_stmt base;
	sqlite3_stmt *st;
	sqlite3 *h;
	int64_t changes;
} lite_stmt;

#define LQ(q) ((lite_stmt *)(q))

static int lite_fail(sqlite3 *h, store_error *err, const char *what)
{
	if (err)
		snprintf(err->msg, sizeof err->msg, "%s: %s", what,
			 h ? sqlite3_errmsg(h) : "out of memory");
	return -1;
}

static db *lite_open(const char *where, store_error *err)
{
	db *c = calloc(1, sizeof *c);
	if (!c)
		abort();
	const char *what = "open";
	if (sqlite3_open_v2(where, &c->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(c->h, 5000);
	what = "pragmas";
	if (sqlite3_exec(c->h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
			 "PRAGMA foreign_keys=ON;", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	return c;
fail:
	if (err)
		snprintf(err->msg, sizeof err->msg, "%s: %s: %s", where, what,
			 c->h ? sqlite3_errmsg(c->h) : "out of memory");
	sqlite3_close(c->h);
	free(c);
	return NULL;
}

static void lite_close(db *c)
{
	if (!c)
		return;
	sqlite3_close(c->h);
	free(c);
}

static int lite_exec(db *c, const char *sql, store_error *err)
{
	char *msg = NULL;
	if (sqlite3_exec(c->h, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	if (err)
		snprintf(err->msg, sizeof err->msg, "%s", msg ? msg : sqlite3_errmsg(c->h));
	sqlite3_free(msg);
	return -1;
}

static int lite_begin(db *c, store_error *err)
{
	return lite_exec(c, "BEGIN IMMEDIATE", err);
}

static int lite_commit(db *c, store_error *err)
{
	return lite_exec(c, "COMMIT", err);
}

static void lite_rollback(db *c)
{
	sqlite3_exec(c->h, "ROLLBACK", NULL, NULL, NULL);
}

static db_stmt *lite_prepare(db *c, const char *sql, store_error *err)
{
	lite_stmt *q = calloc(1, sizeof *q);
	if (!q)
		abort();
	q->base.be = &store_sqlite;
	q->h = c->h;
	if (sqlite3_prepare_v3(c->h, sql, -1, SQLITE_PREPARE_PERSISTENT, &q->st, NULL) !=
	    SQLITE_OK) {
		lite_fail(c->h, err, "prepare");
		free(q);
		return NULL;
	}
	return &q->base;
}

static void lite_finalize(db_stmt *q)
{
	if (!q)
		return;
	sqlite3_finalize(LQ(q)->st);
	free(q);
}

static void lite_start(db_stmt *q)
{
	sqlite3_reset(LQ(q)->st);
	sqlite3_clear_bindings(LQ(q)->st);
}

static void lite_finish(db_stmt *q)
{
	sqlite3_reset(LQ(q)->st);
}

static void lite_bind_null(db_stmt *q, int i)
{
	sqlite3_bind_null(LQ(q)->st, i);
}

static void lite_bind_text(db_stmt *q, int i, const char *v)
{
	if (v)
		sqlite3_bind_text(LQ(q)->st, i, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(LQ(q)->st, i);
}

static void lite_bind_double(db_stmt *q, int i, double v)
{
	sqlite3_bind_double(LQ(q)->st, i, v);
}

static void lite_bind_int64(db_stmt *q, int i, int64_t v)
{
	sqlite3_bind_int64(LQ(q)->st, i, v);
}

static void lite_bind_blob(db_stmt *q, int i, const void *p, size_t n)
{
	sqlite3_bind_blob64(LQ(q)->st, i, p, n, SQLITE_STATIC);
}

static int lite_step(db_stmt *q, store_error *err)
{
	int rc = sqlite3_step(LQ(q)->st);
	if (rc == SQLITE_ROW)
		return DB_ROW;
	if (rc == SQLITE_DONE) {
		LQ(q)->changes = sqlite3_changes(LQ(q)->h);
		return DB_DONE;
	}
	if (err)
		snprintf(err->msg, sizeof err->msg, "%.40s...: %s", sqlite3_sql(LQ(q)->st),
			 sqlite3_errmsg(LQ(q)->h));
	return DB_ERROR;
}

static int64_t lite_changes(db_stmt *q)
{
	return LQ(q)->changes;
}

static bool lite_is_null(db_stmt *q, int col)
{
	return sqlite3_column_type(LQ(q)->st, col) == SQLITE_NULL;
}

static const char *lite_text(db_stmt *q, int col)
{
	return (const char *)sqlite3_column_text(LQ(q)->st, col);
}

static double lite_real(db_stmt *q, int col)
{
	return sqlite3_column_double(LQ(q)->st, col);
}

static int64_t lite_int64(db_stmt *q, int col)
{
	return sqlite3_column_int64(LQ(q)->st, col);
}

static void *lite_blob(db_stmt *q, int col, size_t *n)
{
	int len = sqlite3_column_bytes(LQ(q)->st, col);
	void *p = malloc(len > 0 ? (size_t)len : 1);
	if (!p)
		abort();
	if (len > 0)
		memcpy(p, sqlite3_column_blob(LQ(q)->st, col), (size_t)len);
	*n = len > 0 ? (size_t)len : 0;
	return p;
}

const store_backend store_sqlite = {
	.name = "sqlite",
	.shared = false,
	.lock_rows = "",
	.open = lite_open,
	.close = lite_close,
	.migrations = sqlite_migrations,
	.nmigrations = sizeof sqlite_migrations / sizeof sqlite_migrations[0],
	.exec = lite_exec,
	.begin = lite_begin,
	.commit = lite_commit,
	.rollback = lite_rollback,
	.prepare = lite_prepare,
	.finalize = lite_finalize,
	.start = lite_start,
	.finish = lite_finish,
	.bind_null = lite_bind_null,
	.bind_text = lite_bind_text,
	.bind_double = lite_bind_double,
	.bind_int64 = lite_bind_int64,
	.bind_blob = lite_bind_blob,
	.step = lite_step,
	.changes = lite_changes,
	.is_null = lite_is_null,
	.text = lite_text,
	.real = lite_real,
	.int64 = lite_int64,
	.blob = lite_blob,
};
