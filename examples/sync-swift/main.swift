import Atoll
import Foundation

// A Swift host on a shared atoll-server (make demo runs it with a C and a Python host at the
// same time, each as its own user).
//
//   atoll-sync-example BASE_URL APP_ID flexible|partition NAME WORKDIR
//
// It registers and logs in as NAME, opens a synced realm, writes a Message everyone may read and
// a private Note, tries to write a Message in someone else's name (refused by the rules), then
// waits until the Messages of all three hosts are there.

final class Message: Object {
    @Persisted(primaryKey: true) var _id = ""
    @Persisted var owner_id = ""
    @Persisted var room = ""
    @Persisted var author = ""
    @Persisted var text = ""
}

final class Note: Object {
    @Persisted(primaryKey: true) var _id = ""
    @Persisted var owner_id = ""
    @Persisted var room = ""
    @Persisted var text = ""
}

final class Refused: @unchecked Sendable {
    let lock = NSLock()
    var count = 0
}

func run(_ url: String, _ appId: String, _ mode: String, _ name: String, _ workdir: String) async throws -> Bool {
    let app = App(id: appId, configuration: AppConfiguration(baseURL: url, metadataDirectory: "\(workdir)/swift-\(mode)"))
    let email = "\(name)@example.com"
    try? await app.emailPasswordAuth.registerUser(email: email, password: "demo-password")   // registered by an earlier run
    let user = try await app.login(credentials: .emailPassword(email: email, password: "demo-password"))
    let refused = Refused()
    app.syncManager.errorHandler = { error, _ in
        if let e = error as? SyncError, e.code == .writeRejected { refused.lock.withLock { refused.count += 1 } }
    }
    var config: Realm.Configuration
    if mode == "flexible" {
        let me = user.id
        config = user.flexibleSyncConfiguration(initialSubscriptions: { subs in
            subs.append(QuerySubscription<Message>(name: "messages"))
            subs.append(QuerySubscription<Note>(name: "my notes") { $0.owner_id == me })
        })
    } else {
        config = user.configuration(partitionValue: "lobby")
    }
    config.objectTypes = [Message.self, Note.self]
    let realm = try await Realm(configuration: config, downloadBeforeOpen: .always)
    try realm.write {
        realm.add(Message(value: ["_id": "\(name)-\(mode)", "owner_id": user.id, "room": "lobby", "author": name, "text": "hello from Swift"]), update: .modified)
        realm.add(Note(value: ["_id": "\(name)-note-\(mode)", "owner_id": user.id, "room": "lobby", "text": "Swift's private note"]), update: .modified)
        realm.add(Message(value: ["_id": "\(name)-forged-\(mode)", "owner_id": "somebody-else", "room": "lobby", "author": "mallory", "text": "forged"]), update: .modified)
    }
    guard let session = realm.syncSession else { return false }
    try await session.wait(for: .upload)
    var messages = [Message]()
    for _ in 0..<400 {                                 // live: the other hosts write meanwhile
        try await session.wait(for: .download)
        messages = realm.objects(Message.self).where { $0.room == "lobby" }.filter { !$0._id.contains("forged") }
        if messages.count >= 3 { break }
        try await Task.sleep(nanoseconds: 50_000_000)
    }
    let forged = realm.objects(Message.self).filter { $0._id.contains("forged") }.count
    let notes = realm.objects(Note.self).count
    let authors = messages.map { "\($0.author): \($0.text)" }.sorted()
    print("[swift] \(name) (\(mode)): \(messages.count) messages \(authors); forged ones: \(forged); "
          + "refused writes reported: \(refused.lock.withLock { refused.count }); notes I can see: \(notes) (my own)")
    return messages.count >= 3 && forged == 0 && notes == 1
}

let args = CommandLine.arguments
guard args.count == 6 else {
    FileHandle.standardError.write(Data("usage: atoll-sync-example BASE_URL APP_ID flexible|partition NAME WORKDIR\n".utf8))
    exit(2)
}
do {
    exit(try await run(args[1], args[2], args[3], args[4], args[5]) ? 0 : 1)
} catch {
    FileHandle.standardError.write(Data("[swift] \(error)\n".utf8))
    exit(1)
}
