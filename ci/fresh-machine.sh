#!/usr/bin/env bash
# The README's first command, verbatim, as a new user on a fresh Debian/Ubuntu runs it:
# the project copied to a new folder under /tmp, Debian's own /usr/bin/python3 (no
# developer PATH, no pyenv, no VIRTUAL_ENV), empty harness caches, and the system Python's
# packages hidden (`bwrap --tmpfs /usr/lib/python3/dist-packages`), so nothing the host
# happens to have installed (pytest, six...) can make it pass. Expects the decision the
# README states: PASS, exit 0.
#
# The command is read from README.md (the sh block under "Run the bundled example"). Its
# leading `apt-get update && apt-get install -y PKGS && ` is skipped when every PKG is
# already installed (CI installs them with ci/system-deps.sh), and run as written otherwise.
#
#   bash ci/fresh-machine.sh            # exit 0 when the README's promise holds
#   FRESH_COMMAND='...' bash ci/fresh-machine.sh   # try a proposed command instead
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
say() { printf 'fresh-machine: %s\n' "$*" >&2; }

cmd="${FRESH_COMMAND:-$(sed -n '/^\*\*Run the bundled example\*\*/,$p' "$repo/README.md" \
    | sed -n '/^```sh$/,/^```$/p' | sed '1d;/^```$/,$d' | head -n1)}"
[ -n "$cmd" ] || { say "no command found in README.md"; exit 2; }
say "README command: $cmd"

apt_re='^apt-get update && apt-get install -y ([a-z0-9.+ -]+) && (.*)$'
if [[ "$cmd" =~ $apt_re ]]; then
    pkgs="${BASH_REMATCH[1]}"
    rest="${BASH_REMATCH[2]}"
    # shellcheck disable=SC2086
    if dpkg -s $pkgs >/dev/null 2>&1; then
        say "packages already installed ($pkgs): running the rest"
        cmd="$rest"
    fi
fi

work="$(mktemp -d /tmp/harness-fresh.XXXXXX)"
keep="${FRESH_KEEP:-0}"
cleanup() { if [ "$keep" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi; }
trap cleanup EXIT
mkdir -p "$work/project"
# The project as a user has it: tracked files only (no store, no reports, no venv).
(cd "$repo" && git ls-files -z | tar --null -T - -cf -) | tar -xf - -C "$work/project"

log="$work/output.log"
set +e
env -i HOME="$HOME" LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HARNESS_CACHE_DIR="$work/harness-cache" \
    bwrap --dev-bind / / --tmpfs /usr/lib/python3/dist-packages --chdir "$work/project" \
    -- sh -c "$cmd" >"$log" 2>&1
code=$?
set -e
tail -n 40 "$log" >&2
if [ "$code" -ne 0 ]; then
    say "FAILED: exit $code (expected 0)"
    exit 1
fi
if ! grep -qE '^PASS ' "$log"; then
    say "FAILED: exit 0 but no PASS decision in the output"
    exit 1
fi
say "ok: PASS, exit 0"
