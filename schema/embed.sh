#!/bin/sh
# embed.sh — turns the numbered migrations (NNN_name.sql) into C initialisers
# for store.c:  { NNN, "NNN_name", "SQL text" },
# Usage: embed.sh schema/001_init.sql ... > migrations.inc
set -e
for f in "$@"; do
	base=$(basename "$f" .sql)
	num=$(printf '%s' "$base" | sed 's/_.*//; s/^0*//')
	printf '{ %s, "%s",\n' "${num:-0}" "$base"
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$/\\n"/' "$f"
	printf '},\n'
done
