#!/bin/sh
# make-secrets.sh — writes the secret files deploy/compose.yaml mounts, in
# deploy/secrets/ (git-ignored), each a fresh random value:
#
#   db_password    PostgreSQL's password of the user tird
#   tird_tokens    tird's token file: an admin token and the worker's token
#                  (TOKEN SCOPES NAME, tird.conf(5) token_file)
#   worker_token   the worker's token alone (its line of tird_tokens)
#
#   deploy/make-secrets.sh [--force]
#
# It refuses to overwrite existing files without --force: the postgres
# volume keeps the password it was first made with.  The folder is 0700 (only
# you read it on the host); the files are 0644 because compose bind-mounts
# them with the host file's mode and the containers' users (tird, postgres)
# are not you.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/secrets
force=0
case ${1:-} in
--force) force=1 ;;
"") ;;
*) echo "make-secrets.sh: unknown argument $1 (usage: make-secrets.sh [--force])" >&2; exit 2 ;;
esac
for f in db_password tird_tokens worker_token; do
	if [ -e "$dir/$f" ] && [ $force -eq 0 ]; then
		echo "make-secrets.sh: $dir/$f exists; --force to replace it (and the postgres volume's password)" >&2
		exit 1
	fi
done
rand() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
mkdir -p "$dir"
chmod 700 "$dir"
umask 022
rand >"$dir/db_password"
admin=$(rand)
worker=$(rand)
printf '%s admin admin\n%s worker compose-worker\n' "$admin" "$worker" >"$dir/tird_tokens"
printf '%s\n' "$worker" >"$dir/worker_token"
echo "make-secrets.sh: wrote $dir/db_password, tird_tokens, worker_token"
echo "the admin token (tirctl --token): $admin"
