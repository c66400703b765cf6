/*
 * postgres.c — the PostgreSQL backend of the store (backend.h), through
 * libpq: one connection per store, its statements prepared on the server
 * (PQprepare, parameter types inferred there), results read as text.
 *
 * Transactions.  begin() is BEGIN plus a transaction advisory lock
 * (pg_advisory_xact_lock(STORE_PG_LOCK)), held until COMMIT or ROLLBACK: the
 * writers of one database take their transactions one at a time, as SQLite's
 * BEGIN IMMEDIATE makes them, so a store function that reads a row and then
 * writes by it (the best row) sees no other writer in between.  A COMMIT of a
 * transaction the server had aborted answers "ROLLBACK": that is a failure.
 *
 * A lost connection (the server restarted, say).  A call outside a
 * transaction that finds the connection gone, before or as it sends, resets
 * it (PQreset) and tries once more, its statements prepared again (each
 * notes the connection generation it was prepared on); in a transaction it
 * fails, and the caller's rollback ends the transaction, so nothing
 * half-written is committed on a new connection.
 *
 * Session settings: extra_float_digits = 3 (every double read back exactly
 * on any server version) and notices discarded (they would go to stderr).
 *
 * Watching the best rows (pg_watch): replicas keep GET /v1/best answers in
 * memory, so each must learn when another changes a best row.  A trigger on
 * the best table (005_best_notify.sql) sends NOTIFY tird_best for every
 * statement that changes it, delivered when its transaction commits; a
 * watcher thread holds a connection of its own that LISTENs on the channel,
 * sleeping in poll() on its socket (and on a pipe that wakes it to stop),
 * and counts the notifications.  Its connection lost, it says it is not
 * live (the store's readers then read the database every time), connects
 * again after a second, and counts one change on listening again, for what
 * it may have missed.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libpq-fe.h>
#include "backend.h"

/* "tird" as a number: the advisory lock every write transaction holds */
#define STORE_PG_LOCK 0x74697264

static const migration pg_migrations[] = {
#include "migrations_pg.inc"
};

struct db {
	PGconn *conn;
	unsigned gen;              /* incremented by each reconnection */
	bool in_tx;
	int nstmts;                /* names the next statement s<N> */
};

typedef struct pg_stmt {
	db_stmt base;
	db *c;
	char name[16];
	char *sql;                 /* with $N parameters */
	unsigned gen;              /* the connection generation it is prepared on */
	int nparams;
	const char **values;
	int *lengths, *formats;
	char (*num)[32];           /* the text of numeric parameters */
	PGresult *res;
	int row, nrows;
	int64_t changes;
} pg_stmt;

#define PQ(q) ((pg_stmt *)(q))

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		abort();
	return p;
}

/* The server's message, its trailing newlines dropped. */
static int pg_fail(store_error *err, const char *what, const char *msg)
{
	if (err) {
		snprintf(err->msg, sizeof err->msg, "%s%s%s", what, *what ? ": " : "",
			 msg && *msg ? msg : "(no message)");
		size_t n = strlen(err->msg);
		while (n && (err->msg[n - 1] == '\n' || err->msg[n - 1] == ' '))
			err->msg[--n] = '\0';
	}
	return -1;
}

/* A failed result's primary message (its DETAIL and HINT lines left out:
 * the store's messages are one line), else the whole text. */
static const char *result_msg(const PGresult *r)
{
	const char *m = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	return m ? m : r ? PQresultErrorMessage(r) : "out of memory";
}

static void no_notices(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

static int session(db *c, store_error *err)
{
	PQsetNoticeProcessor(c->conn, no_notices, NULL);
	PGresult *r = PQexec(c->conn, "SET extra_float_digits = 3");
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	PQclear(r);
	return ok ? 0 : pg_fail(err, "session", PQerrorMessage(c->conn));
}

static db *pg_open(const char *where, store_error *err)
{
	db *c = xcalloc(1, sizeof *c);
	c->conn = PQconnectdb(where);
	if (!c->conn || PQstatus(c->conn) != CONNECTION_OK) {
		pg_fail(err, "connect", c->conn ? PQerrorMessage(c->conn) : "out of memory");
		PQfinish(c->conn);
		free(c);
		return NULL;
	}
	if (session(c, err)) {
		PQfinish(c->conn);
		free(c);
		return NULL;
	}
	return c;
}

static void pg_close(db *c)
{
	if (!c)
		return;
	PQfinish(c->conn);
	free(c);
}

/* The connection usable: outside a transaction a lost one is reset once. */
static int pg_alive(db *c, store_error *err)
{
	if (PQstatus(c->conn) == CONNECTION_OK)
		return 0;
	if (c->in_tx)
		return pg_fail(err, "the connection was lost in a transaction", "");
	PQreset(c->conn);
	if (PQstatus(c->conn) != CONNECTION_OK)
		return pg_fail(err, "reconnect", PQerrorMessage(c->conn));
	c->gen++;
	return session(c, err);
}

/* Whether r failed because the connection is gone, outside a transaction
 * (where trying again on a new connection is safe). */
static bool gone(db *c, const PGresult *r)
{
	return (!r || PQresultStatus(r) == PGRES_FATAL_ERROR) &&
	       PQstatus(c->conn) == CONNECTION_BAD && !c->in_tx;
}

/* Runs sql (no parameters); `want` the command tag a success answers, or NULL. */
static int pg_run(db *c, const char *sql, const char *want, store_error *err)
{
	if (pg_alive(c, err))
		return -1;
	PGresult *r = PQexec(c->conn, sql);
	if (gone(c, r)) {
		PQclear(r);                        /* the server went away: once more */
		if (pg_alive(c, err))
			return -1;
		r = PQexec(c->conn, sql);
	}
	ExecStatusType st = PQresultStatus(r);
	int rc = 0;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = pg_fail(err, "", result_msg(r));
	else if (want && strcmp(PQcmdStatus(r), want) != 0)
		rc = pg_fail(err, want, "the server ended the transaction without it "
			     "(an earlier statement failed)");
	PQclear(r);
	return rc;
}

static int pg_exec(db *c, const char *sql, store_error *err)
{
	return pg_run(c, sql, NULL, err);
}

static int pg_begin(db *c, store_error *err)
{
	char sql[96];
	snprintf(sql, sizeof sql, "BEGIN; SELECT pg_advisory_xact_lock(%d)", STORE_PG_LOCK);
	if (pg_run(c, sql, NULL, err)) {
		pg_run(c, "ROLLBACK", NULL, NULL);
		return -1;
	}
	c->in_tx = true;
	return 0;
}

static int pg_commit(db *c, store_error *err)
{
	int rc = pg_run(c, "COMMIT", "COMMIT", err);
	c->in_tx = false;
	return rc;
}

static void pg_rollback(db *c)
{
	if (PQstatus(c->conn) == CONNECTION_OK) {
		PGresult *r = PQexec(c->conn, "ROLLBACK");
		PQclear(r);
	}
	c->in_tx = false;
}

/* ?N parameters as $N, outside quoted text; *nparams the largest N. */
static char *dollar_params(const char *sql, int *nparams)
{
	char *out = xcalloc(strlen(sql) + 1, 1), *o = out;
	char quote = 0;
	*nparams = 0;
	for (const char *p = sql; *p; p++) {
		if (quote) {
			if (*p == quote)
				quote = 0;
		} else if (*p == '\'' || *p == '"') {
			quote = *p;
		} else if (*p == '?' && p[1] >= '0' && p[1] <= '9') {
			int n = atoi(p + 1);
			if (n > *nparams)
				*nparams = n;
			*o++ = '$';
			continue;
		}
		*o++ = *p;
	}
	*o = '\0';
	return out;
}

static int pg_prepare_on_server(pg_stmt *q, store_error *err)
{
	PGresult *r = PQprepare(q->c->conn, q->name, q->sql, q->nparams, NULL);
	int rc = 0;
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		char what[64];
		snprintf(what, sizeof what, "prepare %.40s...", q->sql);
		rc = pg_fail(err, what, result_msg(r));
	}
	PQclear(r);
	if (rc == 0)
		q->gen = q->c->gen;
	return rc;
}

static db_stmt *pg_prepare(db *c, const char *sql, store_error *err)
{
	pg_stmt *q = xcalloc(1, sizeof *q);
	q->base.be = &store_postgres;
	q->c = c;
	snprintf(q->name, sizeof q->name, "s%d", c->nstmts++);
	q->sql = dollar_params(sql, &q->nparams);
	q->values = xcalloc((size_t)q->nparams, sizeof *q->values);
	q->lengths = xcalloc((size_t)q->nparams, sizeof *q->lengths);
	q->formats = xcalloc((size_t)q->nparams, sizeof *q->formats);
	q->num = xcalloc((size_t)q->nparams, sizeof *q->num);
	if (pg_alive(c, err) || pg_prepare_on_server(q, err)) {
		q->base.be->finalize(&q->base);
		return NULL;
	}
	return &q->base;
}

static void pg_finalize(db_stmt *q_)
{
	pg_stmt *q = PQ(q_);
	if (!q)
		return;
	PQclear(q->res);
	free(q->sql);
	free(q->values);
	free(q->lengths);
	free(q->formats);
	free(q->num);
	free(q);
}

static void pg_finish(db_stmt *q_)
{
	pg_stmt *q = PQ(q_);
	PQclear(q->res);
	q->res = NULL;
	q->row = q->nrows = 0;
}

static void pg_start(db_stmt *q_)
{
	pg_stmt *q = PQ(q_);
	pg_finish(q_);
	for (int i = 0; i < q->nparams; i++) {
		q->values[i] = NULL;
		q->lengths[i] = q->formats[i] = 0;
	}
	q->changes = 0;
}

/* Parameter i (from 1), when the statement has it. */
static bool param(pg_stmt *q, int i)
{
	return i >= 1 && i <= q->nparams;
}

static void pg_bind_null(db_stmt *q_, int i)
{
	pg_stmt *q = PQ(q_);
	if (param(q, i)) {
		q->values[i - 1] = NULL;
		q->formats[i - 1] = 0;
	}
}

static void pg_bind_text(db_stmt *q_, int i, const char *v)
{
	pg_stmt *q = PQ(q_);
	if (param(q, i)) {
		q->values[i - 1] = v;
		q->formats[i - 1] = 0;
	}
}

static void pg_bind_double(db_stmt *q_, int i, double v)
{
	pg_stmt *q = PQ(q_);
	if (param(q, i)) {
		snprintf(q->num[i - 1], sizeof q->num[0], "%.17g", v);
		pg_bind_text(q_, i, q->num[i - 1]);
	}
}

static void pg_bind_int64(db_stmt *q_, int i, int64_t v)
{
	pg_stmt *q = PQ(q_);
	if (param(q, i)) {
		snprintf(q->num[i - 1], sizeof q->num[0], "%lld", (long long)v);
		pg_bind_text(q_, i, q->num[i - 1]);
	}
}

/* Binary format: a bytea's bytes as they are. */
static void pg_bind_blob(db_stmt *q_, int i, const void *p, size_t n)
{
	pg_stmt *q = PQ(q_);
	if (param(q, i)) {
		q->values[i - 1] = p ? p : "";
		q->lengths[i - 1] = (int)n;
		q->formats[i - 1] = 1;
	}
}

/* Executes q, prepared again on a new connection; a call that finds the
 * connection gone (at the prepare or the execution) outside a transaction
 * reconnects and tries once more.  NULL with err when the prepare failed. */
static PGresult *pg_execute(pg_stmt *q, store_error *err)
{
	for (int attempt = 0;; attempt++) {
		if (pg_alive(q->c, err))
			return NULL;
		PGresult *r = NULL;
		if (q->gen == q->c->gen || pg_prepare_on_server(q, err) == 0)
			r = PQexecPrepared(q->c->conn, q->name, q->nparams, q->values,
					   q->lengths, q->formats, 0);
		if (attempt == 0 && gone(q->c, r)) {
			PQclear(r);                /* the server went away: once more */
			continue;
		}
		return r;
	}
}

static int pg_step(db_stmt *q_, store_error *err)
{
	pg_stmt *q = PQ(q_);
	if (!q->res) {
		PGresult *r = pg_execute(q, err);
		if (!r)
			return DB_ERROR;
		ExecStatusType st = PQresultStatus(r);
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			char what[64];
			snprintf(what, sizeof what, "%.40s...", q->sql);
			pg_fail(err, what, result_msg(r));
			PQclear(r);
			return DB_ERROR;
		}
		q->res = r;
		q->row = -1;
		q->nrows = st == PGRES_TUPLES_OK ? PQntuples(r) : 0;
		const char *n = PQcmdTuples(r);
		q->changes = *n ? strtoll(n, NULL, 10) : q->nrows;
	}
	return ++q->row < q->nrows ? DB_ROW : DB_DONE;
}

static int64_t pg_changes(db_stmt *q)
{
	return PQ(q)->changes;
}

static bool pg_col_null(db_stmt *q_, int col)
{
	pg_stmt *q = PQ(q_);
	return !q->res || q->row >= q->nrows || PQgetisnull(q->res, q->row, col);
}

static const char *pg_col_text(db_stmt *q, int col)
{
	return pg_col_null(q, col) ? NULL : PQgetvalue(PQ(q)->res, PQ(q)->row, col);
}

static double pg_col_real(db_stmt *q, int col)
{
	const char *t = pg_col_text(q, col);
	return t ? strtod(t, NULL) : 0;
}

static int64_t pg_col_int64(db_stmt *q, int col)
{
	const char *t = pg_col_text(q, col);
	return t ? strtoll(t, NULL, 10) : 0;
}

static void *pg_col_blob(db_stmt *q, int col, size_t *n)
{
	const char *t = pg_col_text(q, col);
	size_t len = 0;
	unsigned char *raw = t ? PQunescapeBytea((const unsigned char *)t, &len) : NULL;
	void *p = xcalloc(len ? len : 1, 1);
	if (raw) {
		memcpy(p, raw, len);
		PQfreemem(raw);
	}
	*n = raw ? len : 0;
	return p;
}

/* ---- watching the best rows ---------------------------------------------------------- */

struct db_watch {
	char *where;
	_Atomic uint64_t *changes;
	_Atomic bool *live;
	int wake[2];               /* a byte on wake[1] stops the thread */
	pthread_t tid;
};

/* Sleeps up to ms on c's socket (c NULL: on the wake pipe alone); false
 * once asked to stop. */
static bool watch_wait(db_watch *w, PGconn *c, int ms)
{
	struct pollfd pf[2] = { { w->wake[0], POLLIN, 0 }, { c ? PQsocket(c) : -1, POLLIN, 0 } };
	if (poll(pf, c ? 2 : 1, ms) < 0 && errno != EINTR)
		return true;
	return !(pf[0].revents & POLLIN);
}

static void *watch_main(void *arg)
{
	db_watch *w = arg;
	for (;;) {
		PGconn *c = PQconnectdb(w->where);
		PGresult *r = c && PQstatus(c) == CONNECTION_OK ? PQexec(c, "LISTEN tird_best") : NULL;
		bool listening = r && PQresultStatus(r) == PGRES_COMMAND_OK;
		PQclear(r);
		if (listening) {
			atomic_fetch_add(w->changes, 1);   /* what it missed, if anything */
			atomic_store(w->live, true);
			bool go;
			while ((go = watch_wait(w, c, -1)) && PQconsumeInput(c)) {
				PGnotify *n;
				while ((n = PQnotifies(c))) {
					atomic_fetch_add(w->changes, 1);
					PQfreemem(n);
				}
			}
			atomic_store(w->live, false);
			PQfinish(c);
			if (!go)
				return NULL;
		} else {
			PQfinish(c);
		}
		if (!watch_wait(w, NULL, 1000))
			return NULL;
	}
}

static db_watch *pg_watch(const char *where, _Atomic uint64_t *changes, _Atomic bool *live)
{
	db_watch *w = xcalloc(1, sizeof *w);
	w->changes = changes;
	w->live = live;
	w->where = strdup(where);
	if (!w->where || pipe(w->wake)) {
		free(w->where);
		free(w);
		return NULL;
	}
	if (pthread_create(&w->tid, NULL, watch_main, w)) {
		close(w->wake[0]);
		close(w->wake[1]);
		free(w->where);
		free(w);
		return NULL;
	}
	return w;
}

static void pg_unwatch(db_watch *w)
{
	if (!w)
		return;
	ssize_t k = write(w->wake[1], "x", 1);
	(void)k;
	pthread_join(w->tid, NULL);
	close(w->wake[0]);
	close(w->wake[1]);
	free(w->where);
	free(w);
}

const store_backend store_postgres = {
	.name = "postgresql",
	.shared = true,
	.lock_rows = " FOR UPDATE SKIP LOCKED",
	.open = pg_open,
	.close = pg_close,
	.migrations = pg_migrations,
	.nmigrations = sizeof pg_migrations / sizeof pg_migrations[0],
	.exec = pg_exec,
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.prepare = pg_prepare,
	.finalize = pg_finalize,
	.start = pg_start,
	.finish = pg_finish,
	.bind_null = pg_bind_null,
	.bind_text = pg_bind_text,
	.bind_double = pg_bind_double,
	.bind_int64 = pg_bind_int64,
	.bind_blob = pg_bind_blob,
	.step = pg_step,
	.changes = pg_changes,
	.is_null = pg_col_null,
	.text = pg_col_text,
	.real = pg_col_real,
	.int64 = pg_col_int64,
	.blob = pg_col_blob,
	.watch = pg_watch,
	.unwatch = pg_unwatch,
};
