import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

// Binding a session: its mode, its client file (new, or known and its cursors), its schema
// (development mode) and, in partition mode, its view at once.

extension ServerApp {
    func bind(_ m: ClientMessage.Bind, _ connection: SyncConnection) throws {
        let number = m.session
        guard sessions[ObjectIdentifier(connection)]?[number] == nil else {
            throw SyncErrorMessage(.badMessage, "session \(number) is bound already")
        }
        failedBinds[ObjectIdentifier(connection)]?.remove(number)
        let s = Session(number: number, connection: connection)
        switch m.mode {
        case .flexible:
            if case .partition = configuration.mode {
                throw SyncErrorMessage(.badSyncPartitionValue, "this app uses partition-based sync; open the realm with a partition value", session: number)
            }
        case .partition(let value):
            guard configuration.partitionKey != nil else {
                throw SyncErrorMessage(.badSyncPartitionValue, "this app has no partition key; use flexible sync", session: number)
            }
            guard let value else {
                throw SyncErrorMessage(.badSyncPartitionValue, "partition sync needs a \"partition\" value", session: number)
            }
            s.partitionMode = true
            s.partition = value
        }
        if let schema = m.schema {
            try adoptSchema(schema, session: number)
        }
        // The client file.
        if let file = m.file {
            guard let known = try storage.file(file.ident), known.salt == file.salt else {
                throw SyncErrorMessage(.badClientFile, "this server does not know the client file \(file.ident) (was the server's data reset?)", session: number)
            }
            guard known.user == connection.user.id else {
                throw SyncErrorMessage(.badClientFile, "the client file \(file.ident) belongs to another user", session: number)
            }
            s.file = file.ident
            s.uploadCursor = known.uploadCursor
            // A client that says what it was told of has the changesets after it sent again.
            s.clientAcked = min(known.uploadCursor, m.uploadCursor ?? known.uploadCursor)
        } else {
            // A new file has downloaded nothing: it cannot resume (a resume from a made-up cursor
            // would be told about objects it never held).
            guard m.downloadCursor == 0 else {
                throw SyncErrorMessage(.badMessage, "bind: a new client file (no \"file\") starts at downloadCursor 0", session: number)
            }
            let salt = Int64.random(in: 1...Int64.max)
            s.file = try storage.createFile(user: connection.user.id, salt: salt)
            connection.send(.ident(session: number, file: ClientFileIdentity(ident: s.file, salt: salt)))
        }
        let cursor = m.downloadCursor
        // A client that comes from another instance may know versions this one has not applied yet.
        if cursor > latestVersion { try storage.catchUp(self) }
        guard cursor <= latestVersion else {
            throw SyncErrorMessage(.badServerVersion, "the client has server version \(cursor), newer than the server's \(latestVersion): the server was restored from a backup", session: number)
        }
        s.downloadCursor = cursor
        addSession(s)
        log.debug("bound", ["app": configuration.id, "user": connection.user.id, "session": "\(number)", "file": "\(s.file)"])
        // What the server has of the client's uploads: it re-sends what comes after.
        connection.send(.uploadAck(session: number, clientVersion: s.clientAcked))
        if s.partitionMode {
            s.subscriptions = try partitionSubscriptions(s.partition)
            s.queryVersion = 0
            try computeViews(s)
            if cursor == 0 { try startBootstrap(s, version: 0) } else { try resume(s, from: cursor) }
        }
    }

    /// Partition sync as flexible sync: one query per class that has the partition key.
    func partitionSubscriptions(_ value: Value) throws -> [SubscriptionQuery] {
        guard let key = configuration.partitionKey else { return [] }
        return schema.classes.filter { !$0.isEmbedded && $0[property: key] != nil }.map {
            SubscriptionQuery(name: "partition:\($0.name)", className: $0.name, query: "\(key) == $0", arguments: [value])
        }
    }
}
