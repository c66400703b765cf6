/*
 * backend.h — the database backends behind store.c (schema/ only).
 *
 * Design.  store.c holds everything a store function does (its statements,
 * its transactions, the best-row bookkeeping) once; a backend only connects,
 * prepares, binds, steps and reads columns.  Each backend is a table of
 * functions in its own file: sqlite.c (an SQLite file, the default) and
 * postgres.c (a PostgreSQL server through libpq, built where configure found
 * libpq).  store_open picks one by the location: a postgresql:// or
 * postgres:// URL is PostgreSQL, anything else an SQLite path.
 *
 * Statements are written with ?N parameters (N from 1) in SQL both accept;
 * postgres.c turns ?N into $N.  A parameter whose type nothing around it
 * decides is CAST in the text, since PostgreSQL infers the types.
 *
 * A statement may hold {LOCK}, which store.c replaces by the backend's
 * lock_rows before it prepares it.
 *
 * Every db_stmt starts with the backend that made it, so that store.c binds
 * and reads through q->be without knowing which it is.  Text and blob
 * parameters are not copied: they must stay valid until the step that
 * executes the statement.  Column values are valid until the next step or
 * start of the statement.
 */
#ifndef TIRD_BACKEND_H
#define TIRD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store.h"

typedef struct store_backend store_backend;
typedef struct db db;                  /* a backend's connection */
typedef struct db_watch db_watch;      /* a backend's watcher of best changes */

typedef struct db_stmt {
	const store_backend *be;
} db_stmt;

typedef struct migration {
	int version;
	const char *name;
	const char *sql;
} migration;

enum { DB_ERROR = -1, DB_DONE = 0, DB_ROW = 1 };

struct store_backend {
	const char *name;                  /* "sqlite", "postgresql" */
	/* Several tird replicas may share the database (store_shared). */
	bool shared;
	/* What a statement's {LOCK} becomes: the clause that locks the rows a
	 * SELECT read until the transaction ends, skipping those another
	 * transaction holds (" FOR UPDATE SKIP LOCKED"; "" where the write
	 * transaction locks the whole database, as SQLite's does). */
	const char *lock_rows;
	/* Connects to the database at `where`; NULL with a message. */
	db *(*open)(const char *where, store_error *err);
	void (*close)(db *c);
	/* The numbered migrations this backend applies, in order. */
	const migration *migrations;
	size_t nmigrations;
	/* A script of statements without parameters (a migration); 0 or -1. */
	int (*exec)(db *c, const char *sql, store_error *err);
	/* A write transaction: held alone against every other writer of the
	 * database (SQLite's BEGIN IMMEDIATE; a transaction advisory lock on
	 * PostgreSQL), so read-then-write inside it is safe across processes. */
	int (*begin)(db *c, store_error *err);
	int (*commit)(db *c, store_error *err);
	void (*rollback)(db *c);
	db_stmt *(*prepare)(db *c, const char *sql, store_error *err);
	void (*finalize)(db_stmt *q);
	/* Before binding: drops the last result and every binding. */
	void (*start)(db_stmt *q);
	/* After the last step: drops the result (the change count stays). */
	void (*finish)(db_stmt *q);
	void (*bind_null)(db_stmt *q, int i);
	void (*bind_text)(db_stmt *q, int i, const char *v);
	void (*bind_double)(db_stmt *q, int i, double v);
	void (*bind_int64)(db_stmt *q, int i, int64_t v);
	void (*bind_blob)(db_stmt *q, int i, const void *p, size_t n);
	/* DB_ROW, DB_DONE, or DB_ERROR with the message in err. */
	int (*step)(db_stmt *q, store_error *err);
	/* Rows the last INSERT, UPDATE or DELETE of q changed (or returned). */
	int64_t (*changes)(db_stmt *q);
	bool (*is_null)(db_stmt *q, int col);
	const char *(*text)(db_stmt *q, int col);          /* NULL for NULL */
	double (*real)(db_stmt *q, int col);               /* 0 for NULL */
	int64_t (*int64)(db_stmt *q, int col);             /* 0 for NULL */
	/* A copy the caller frees (malloc'd, at least one byte), its length in *n. */
	void *(*blob)(db_stmt *q, int col, size_t *n);
	/* Where other processes change the best rows (shared): starts watching
	 * them on a connection of its own to `where`, in a thread, counting each
	 * change they announce (the best table's trigger, migration 005) in
	 * *changes; *live says whether it is listening now (a change made while
	 * it was not is counted when it listens again).  NULL where it cannot
	 * start a thread; unwatch stops it and frees it.  NULL functions where
	 * no other process writes (SQLite: one tird per file). */
	db_watch *(*watch)(const char *where, _Atomic uint64_t *changes, _Atomic bool *live);
	void (*unwatch)(db_watch *w);
};

extern const store_backend store_sqlite;
#ifdef HAVE_LIBPQ
extern const store_backend store_postgres;
#endif

#endif
