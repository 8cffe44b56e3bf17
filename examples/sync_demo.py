"""A Python host on a shared atoll-server (make demo runs it with a C and a Swift host at the
same time, each as its own user).

    python sync_demo.py BASE_URL APP_ID flexible|partition NAME WORKDIR

It registers and logs in as NAME, opens a synced realm, writes a Message everyone may read and a
private Note, tries to write a Message in someone else's name (refused by the rules: a
compensating write), then waits until the Messages of all three hosts are there.
"""
import sys
import time

import atoll

SCHEMA = [
    {"name": "Message", "primaryKey": "_id",
     "properties": {"_id": "string", "owner_id": "string", "room": "string", "author": "string", "text": "string"}},
    {"name": "Note", "primaryKey": "_id",
     "properties": {"_id": "string", "owner_id": "string", "room": "string", "text": "string"}},
]


def main(url: str, app_id: str, mode: str, name: str, workdir: str) -> int:
    app = atoll.App(app_id, url, metadata_dir=f"{workdir}/py-{mode}")
    email = f"{name}@example.com"
    try:
        app.register_email(email, "demo-password")
    except atoll.AuthError:
        pass                                           # registered by an earlier run
    user = app.login(atoll.Credentials.email_password(email, "demo-password"))
    refused = []
    errors = app.on_error(lambda e: refused.append(e) if e.code == "writeRejected" else None)  # keep the token
    options = dict(schema=SCHEMA, download_before_open="always", timeout=20)
    if mode == "flexible":
        realm = atoll.open_synced(user, f"{workdir}/py-{mode}.realm", mode="flexible",
                                  initial_subscriptions=[("messages", "Message", "TRUEPREDICATE"),
                                                         ("my notes", "Note", "owner_id == $0", user.id)],
                                  **options)
    else:
        realm = atoll.open_synced(user, f"{workdir}/py-{mode}.realm", mode="partition",
                                  partition_value="lobby", **options)
    with realm:
        with realm.write():
            realm.create("Message", {"_id": f"{name}-{mode}", "owner_id": user.id, "room": "lobby",
                                     "author": name, "text": "hello from Python"}, update="modified")
            realm.create("Note", {"_id": f"{name}-note-{mode}", "owner_id": user.id, "room": "lobby",
                                  "text": "Python's private note"}, update="modified")
            realm.create("Message", {"_id": f"{name}-forged-{mode}", "owner_id": "somebody-else", "room": "lobby",
                                     "author": "mallory", "text": "forged"}, update="modified")
        session = realm.sync_session
        session.wait_for_upload(timeout=20)
        messages = []
        for _ in range(400):                           # live: the other hosts write meanwhile
            session.wait_for_download(timeout=20)
            realm.refresh()
            messages = [m for m in realm.objects("Message").filter("room == 'lobby'") if "forged" not in m["_id"]]
            if len(messages) >= 3:
                break
            time.sleep(0.05)
        forged = len(realm.objects("Message").filter("_id CONTAINS 'forged'"))
        notes = len(realm.objects("Note"))
        authors = sorted(f"{m['author']}: {m['text']}" for m in messages)
        print(f"[python] {name} ({mode}): {len(messages)} messages {authors}; forged ones: {forged}; "
              f"refused writes reported: {len(refused)}; notes I can see: {notes} (my own)")
        errors.cancel()
        return 0 if len(messages) >= 3 and forged == 0 and notes == 1 else 1


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
