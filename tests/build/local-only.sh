#!/bin/sh
# A local-only Swift app: the typed API built with the package trait `Sync` off (as an app does
# with `.package(..., traits: [])`) links no network library, and runs. The sync example of the
# default build (trait on), given as $2, must link them: the check can tell the difference.
#
# usage: tests/build/local-only.sh SCRATCH_DIR SYNC_EXAMPLE_BINARY
set -eu
scratch=$1
with_sync=$2
swift build --scratch-path "$scratch" --disable-default-traits --product atoll-swift-example
bin="$scratch/debug/atoll-swift-example"
network="libssl|libcrypto|libwslay|libhttp_parser"

needed() { readelf -d "$1" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'; }

if needed "$bin" | grep -E "$network"; then
    echo "FAIL: the local-only build links a network library (above)" >&2
    exit 1
fi
if nm "$bin" | grep -q 'AtollNet\|AtollSync'; then
    echo "FAIL: the local-only build holds AtollNet or AtollSync code" >&2
    exit 1
fi
if ! needed "$with_sync" | grep -qE "$network"; then
    echo "FAIL: $with_sync (trait Sync on) links no network library: this check would prove nothing" >&2
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/atoll-local-only.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$bin" "$tmp/local.realm" > "$tmp/out.txt"
echo "local-only build: $(needed "$bin" | tr '\n' ' ')"
echo "ok: no network library linked; the example ran ($(wc -l < "$tmp/out.txt") lines)"
