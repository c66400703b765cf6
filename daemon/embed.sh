#!/bin/sh
# embed.sh — a text file as a C string initialiser (as schema/embed.sh does for
# the migrations): each line a literal "...\n", backslashes and quotes escaped.
# Usage: embed.sh daemon/openapi.json > openapi.inc
#   static const char openapi_json[] =
#   #include "daemon/openapi.inc"
#   ;
set -e
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$/\\n"/' "$1"
