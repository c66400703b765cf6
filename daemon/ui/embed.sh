#!/bin/sh
# embed.sh — turns the dashboard's files (daemon/ui/*) into C initialisers
# for daemon/ui.c:  { "name", "Content-Type", "text" },
# Usage: embed.sh daemon/ui/index.html ... > ui_assets.inc
set -e
for f in "$@"; do
	name=$(basename "$f")
	case "$name" in
	*.html) type='text/html; charset=utf-8' ;;
	*.js)   type='text/javascript; charset=utf-8' ;;
	*.css)  type='text/css; charset=utf-8' ;;
	*) echo "embed.sh: $f: no Content-Type known for this file" >&2; exit 1 ;;
	esac
	printf '{ "%s", "%s",\n' "$name" "$type"
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$/\\n"/' "$f"
	printf '},\n'
done
