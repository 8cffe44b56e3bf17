#!/usr/bin/env bash
# check-exports.sh — the atoll_* symbols libatoll.so exports are exactly the functions
# include/atoll.h declares (as jansson's check-exports does).
#
#   tests/c/check-exports.sh <libatoll.so> <atoll.h> [C compiler] [nm]
#
# The header goes through the C preprocessor first, so that comments (which mention function
# names) are not mistaken for declarations.
set -euo pipefail

lib=${1:?usage: check-exports.sh <libatoll.so> <atoll.h> [cc] [nm]}
header=${2:?usage: check-exports.sh <libatoll.so> <atoll.h> [cc] [nm]}
cc=${3:-cc}
nm=${4:-nm}

[[ -f $lib ]] || { echo "check-exports: no library at $lib" >&2; exit 1; }
[[ -f $header ]] || { echo "check-exports: no header at $header" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Declared: identifiers atoll_... directly followed by "(" in the preprocessed header.
"$cc" -E -P -x c "$header" \
    | grep -oE '\batoll_[A-Za-z0-9_]+[[:space:]]*\(' \
    | sed -E 's/[[:space:]]*\($//' | sort -u >"$tmp/declared"

# Exported: dynamic symbols defined by the library, without version suffixes.
"$nm" -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' \
    | grep -E '^atoll_' | sort -u >"$tmp/exported" || true

declared=$(wc -l <"$tmp/declared")
exported=$(wc -l <"$tmp/exported")
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
extra=$(comm -13 "$tmp/declared" "$tmp/exported")

status=0
if [[ -n $missing ]]; then
    echo "declared in $(basename "$header") but not exported by $(basename "$lib"):"
    sed 's/^/    /' <<<"$missing"
    status=1
fi
if [[ -n $extra ]]; then
    echo "exported by $(basename "$lib") but not declared in $(basename "$header"):"
    sed 's/^/    /' <<<"$extra"
    status=1
fi
if [[ $declared -eq 0 ]]; then
    echo "no declarations found in $header (preprocessor problem?)"
    status=1
fi
if [[ $status -eq 0 ]]; then
    echo "exports: the $exported atoll_* symbols of $(basename "$lib") are exactly the $declared functions of $(basename "$header")"
else
    echo "exports: $declared declared, $exported exported: FAILED"
fi
exit $status
