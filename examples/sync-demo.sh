#!/usr/bin/env bash
# The sync demo (make demo): one atoll-server with examples/sync-demo.json, and a C, a Python and
# a Swift host, each logged in as its own user, writing and reading at the same time — first
# under flexible sync (app "chat"), then under partition sync (app "rooms").
#
#   examples/sync-demo.sh WORKDIR SERVER C_HOST PYTHON SWIFT_HOST
set -euo pipefail
work=$1 server=$2 c_host=$3 python=$4 swift_host=$5
here=$(cd "$(dirname "$0")" && pwd)

"$server" --port 0 --data "$work/server-data" --config "$here/sync-demo.json" --log-level warning >"$work/server.out" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    [[ $(wc -l <"$work/server.out") -ge 3 ]] && break
    sleep 0.1
done
url=$(sed -n 's/^listening on //p' "$work/server.out" | head -1)
[[ -n $url ]] || { echo "sync-demo: atoll-server did not start" >&2; exit 1; }
echo "atoll-server: $url (apps: chat = flexible sync, rooms = partition sync; owner-only rules)"
# The admin console: its address and the key this start made (lines 2 and 3 of the server's output).
sed -n 's/^admin console: /admin console: /p; s/^admin key: /admin key: /p' "$work/server.out"

status=0
for pair in chat:flexible rooms:partition; do
    app=${pair%%:*} mode=${pair##*:}
    echo "-- $mode sync (app $app): ann (C), bob (Python), cleo (Swift) at the same time"
    "$c_host" "$url" "$app" "$mode" ann "$work" & c=$!
    "$python" "$here/sync_demo.py" "$url" "$app" "$mode" bob "$work" & p=$!
    "$swift_host" "$url" "$app" "$mode" cleo "$work" & s=$!
    wait "$c" || status=1
    wait "$p" || status=1
    wait "$s" || status=1
done
echo "-- the server's numbers (GET $url/metrics):"
curl -s "$url/metrics" | grep -E '^atoll_(connections_opened_total|uploads_total|rejected_writes_total|bootstraps_total|downloads_total) '
exit $status
