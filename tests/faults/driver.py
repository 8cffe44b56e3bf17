"""A sync client in its own process, for the fault tests (tests/faults): the parent kills it
with SIGKILL, or kills the server under it, and checks what it reported.

Every line it prints is flushed at once, so that what the parent read before a SIGKILL is what
had happened:

    U <user id>                 the user is logged in (the same user as before when DIR has one)
    READY                       the realm is open (and, for `bootstrap`, subscribed)
    C <txn>                     transaction <txn> committed (atoll_realm_commit returned)
    A <txn>                     wait_for_upload returned after transaction <txn>: the server
                                acknowledged every transaction up to <txn>
    P <transferred> <transferable>   a download progress event (bootstrap)
    E <code> <fatal> <message>  a sync error the app's error handler got
    HAVE <json>                 (verify) {"txns": {txn: count}, "count": n, "digest": sha256 of
                                every Item's fields, sorted: equal digests, equal data}
    DONE                        the command finished

Commands (`python driver.py COMMAND --url URL --dir DIR ...`; DIR holds the users' metadata and
the realm file `client.realm`, so that a second process resumes the same user and file):

    write      writes transactions of --per-txn objects (ids "<txn>-<i>", --payload bytes of
               text each) from --first-txn on, --txns of them (0: forever); with --ack, waits
               for the upload after each one and prints A.
    verify     opens the file, prints HAVE, waits for the upload, prints A for the last txn;
               with --settle, then waits for the download and prints HAVE again.
    bootstrap  opens a file subscribed to the Items of --query (download_before_open "never"),
               prints the bootstrap's progress, waits for the subscriptions, prints HAVE.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "bindings" / "python" / "src"))

import atoll  # noqa: E402

ITEM = {"name": "Item", "primaryKey": "_id",
        "properties": {"_id": "string", "txn": "int", "n": "int", "payload": "string"}}
SCHEMA = [ITEM]
ALL = ("all", "Item", "TRUEPREDICATE")


def say(*parts: object) -> None:
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def login(url: str, directory: Path) -> "tuple[atoll.App, atoll.User]":
    app = atoll.App("default", url, metadata_dir=directory / "meta", connect_timeout=2)
    user = app.current_user or app.login(atoll.Credentials.anonymous())
    return app, user


def on_error(event: atoll.SyncErrorEvent) -> None:
    message = event.message.replace("\n", " ")
    say("E", event.code, int(event.fatal), message)


def rows(txn: int, per_txn: int, payload: int):
    text = ("%d." % txn) * (payload // 2 + 1)
    return [{"_id": f"{txn}-{i}", "txn": txn, "n": i, "payload": text[:payload]}
            for i in range(per_txn)]


def have(realm: atoll.Realm) -> dict:
    txns: dict = {}
    fields = []
    for item in realm.objects("Item"):
        txns[item["txn"]] = txns.get(item["txn"], 0) + 1
        fields.append([item["_id"], item["txn"], item["n"], item["payload"]])
    digest = hashlib.sha256(json.dumps(sorted(fields)).encode()).hexdigest()
    return {"txns": txns, "count": sum(txns.values()), "digest": digest}


def wait_upload(realm: atoll.Realm, deadline: float) -> None:
    """wait_for_upload, again after timeouts (a server being restarted) until the deadline."""
    while True:
        try:
            realm.sync_session.wait_for_upload(timeout=5)
            return
        except atoll.SyncTimeoutError:
            if time.monotonic() > deadline:
                raise


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("write", "verify", "bootstrap"))
    parser.add_argument("--url", required=True)
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--first-txn", type=int, default=0)
    parser.add_argument("--txns", type=int, default=0)
    parser.add_argument("--per-txn", type=int, default=10)
    parser.add_argument("--payload", type=int, default=100)
    parser.add_argument("--ack", action="store_true")
    parser.add_argument("--query", default="TRUEPREDICATE")
    parser.add_argument("--upload-timeout", type=float, default=60)
    parser.add_argument("--settle", action="store_true")
    args = parser.parse_args()

    args.dir.mkdir(parents=True, exist_ok=True)
    app, user = login(args.url, args.dir)
    say("U", user.id)
    token = app.on_error(on_error)
    path = args.dir / "client.realm"

    if args.command == "bootstrap":
        realm = atoll.open_synced(user, path, schema=SCHEMA,
                                  initial_subscriptions=[("all", "Item", args.query)])

        def progress(event: dict) -> None:
            if event.get("event") == "progress" and event.get("direction") == "download":
                say("P", event.get("transferred"), event.get("transferable"))
        watch = realm.sync_session.observe(progress)
        say("READY")
        realm.subscriptions.wait(timeout=args.upload_timeout)
        realm.refresh()
        say("HAVE", json.dumps(have(realm)))
        watch.cancel()
        realm.close()
        token.cancel()
        say("DONE")
        return 0

    realm = atoll.open_synced(user, path, schema=SCHEMA, initial_subscriptions=[ALL])
    say("READY")
    if args.command == "verify":
        say("HAVE", json.dumps(have(realm)))
        wait_upload(realm, time.monotonic() + args.upload_timeout)
        say("A", "all")
        if args.settle:
            realm.sync_session.wait_for_download(timeout=args.upload_timeout)
            realm.refresh()
            say("HAVE", json.dumps(have(realm)))
        realm.close()
        token.cancel()
        say("DONE")
        return 0

    txn = args.first_txn
    while args.txns == 0 or txn < args.first_txn + args.txns:
        with realm.write():
            realm.create_many("Item", rows(txn, args.per_txn, args.payload))
        say("C", txn)
        if args.ack:
            wait_upload(realm, time.monotonic() + args.upload_timeout)
            say("A", txn)
        txn += 1
    if not args.ack:
        wait_upload(realm, time.monotonic() + args.upload_timeout)
        say("A", txn - 1)
    realm.close()
    token.cancel()
    say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main())
