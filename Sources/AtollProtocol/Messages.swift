import AtollStore

// The protocol's messages (docs/protocol.md, "Messages") as types: what a client sends is a
// `ClientMessage`, what a server sends a `ServerMessage`. Each has one encoder (`text`) and one
// decoder (`init(text:)`), in MessageCoding.swift: nothing else in the engine names a message's
// fields. A message of a type the decoder does not know is not a message of the protocol:
// both sides refuse it the same way (docs/protocol.md, "Unknown messages").

/// A client file's identity, given by the server (`ident`) and presented at each bind.
public struct ClientFileIdentity: Hashable, Sendable {
    /// The file's number on the server.
    public let ident: Int64
    /// A random number the server chose with it: a file restored from a backup elsewhere, or a
    /// server whose data was reset, cannot pass for another.
    public let salt: Int64
    public init(ident: Int64, salt: Int64) { (self.ident, self.salt) = (ident, salt) }
}

/// One query of a flexible sync subscription set, as a `query` message carries it.
public struct SubscriptionQuery: Hashable, Sendable {
    public var name: String
    public var className: String
    /// RQL text, with `$0`, `$1`… for `arguments`.
    public var query: String
    public var arguments: [Value]
    public init(name: String, className: String, query: String = "TRUEPREDICATE", arguments: [Value] = []) {
        (self.name, self.className, self.query, self.arguments) = (name, className, query, arguments)
    }
}

/// A changeset as a message carries it: decoded (what a decoder gives), or as JSON text that the
/// protocol's encoder wrote earlier (`EncodedChangeset`: a client's pending upload, stored when
/// it was translated; a server's history entry or fan-out, encoded once for every session that
/// gets it), which is sent as it is rather than decoded to be encoded again.
public enum WireChangeset: Hashable, Sendable {
    /// `more`: a part of a larger changeset, with more parts to come (uploads only).
    case decoded(SyncChangeset, more: Bool = false)
    case encoded(EncodedChangeset)

    /// The changeset (decoding the text of an encoded one).
    /// - Throws: `ProtocolError` for text that is not a changeset.
    public func decode() throws -> (changeset: SyncChangeset, more: Bool) {
        switch self {
        case .decoded(let cs, let more): return (cs, more)
        case .encoded(let e): return try e.decode()
        }
    }
}

/// What a client sends (docs/protocol.md, "Client → server").
public enum ClientMessage: Hashable, Sendable {
    /// Opens a session for one realm file.
    case bind(Bind)
    /// A new version of the session's subscription set (flexible sync).
    case query(Query)
    /// Changesets, in increasing client versions.
    case upload(session: Int64, changesets: [WireChangeset])
    /// Asks for a `mark` back once everything sent before it is answered.
    case mark(session: Int64, request: Int64)
    /// Ends a session.
    case unbind(session: Int64)
    /// Asks for a `pong` with the same timestamp (any JSON value, returned as it is).
    case ping(timestamp: Value)

    public struct Bind: Hashable, Sendable {
        public var session: Int64
        /// The realm's name (for the server's logs; a partition realm is named by `mode`).
        public var realm: String?
        public var mode: Mode
        /// Nil for a new file, which the server identifies (`ident`).
        public var file: ClientFileIdentity?
        /// The newest server version the file has integrated (0 for a new file).
        public var downloadCursor: UInt64
        /// The newest of its changesets the client has an acknowledgement of (nil: whatever the
        /// server has).
        public var uploadCursor: UInt64?
        /// The client's schema in Realm JS notation (an array of classes), which a server in
        /// development mode learns from.
        public var schema: Value?

        public init(session: Int64, realm: String? = nil, mode: Mode, file: ClientFileIdentity? = nil, downloadCursor: UInt64 = 0,
                    uploadCursor: UInt64? = nil, schema: Value? = nil) {
            (self.session, self.realm, self.mode, self.file) = (session, realm, mode, file)
            (self.downloadCursor, self.uploadCursor, self.schema) = (downloadCursor, uploadCursor, schema)
        }
    }

    public enum Mode: Hashable, Sendable {
        case flexible
        /// The partition value; nil when the bind names none (which the server refuses with
        /// `badSyncPartitionValue`, not as a malformed message).
        case partition(Value?)
    }

    public struct Query: Hashable, Sendable {
        public var session: Int64
        public var version: Int64
        public var subscriptions: [SubscriptionQuery]
        /// Whether the client holds this version as complete already (a resumed session).
        public var complete: Bool

        public init(session: Int64, version: Int64, subscriptions: [SubscriptionQuery], complete: Bool = false) {
            (self.session, self.version, self.subscriptions, self.complete) = (session, version, subscriptions, complete)
        }
    }

    /// The session the message is for (nil for a `ping`).
    public var session: Int64? {
        switch self {
        case .bind(let b): return b.session
        case .query(let q): return q.session
        case .upload(let session, _), .mark(let session, _), .unbind(let session): return session
        case .ping: return nil
        }
    }

    /// The message's `type` on the wire.
    public var type: String {
        switch self {
        case .bind: return "bind"
        case .query: return "query"
        case .upload: return "upload"
        case .mark: return "mark"
        case .unbind: return "unbind"
        case .ping: return "ping"
        }
    }
}

/// What a server sends (docs/protocol.md, "Server → client").
public enum ServerMessage: Hashable, Sendable {
    /// The identity of a new client file.
    case ident(session: Int64, file: ClientFileIdentity)
    /// Server changesets, filtered to the session's view and rules.
    case download(Download)
    /// Everything up to `clientVersion` is committed on the server.
    case uploadAck(session: Int64, clientVersion: UInt64)
    /// The subscription set `version` is bootstrapped, as of `serverVersion`.
    case queryComplete(session: Int64, version: Int64, serverVersion: UInt64)
    /// The server will not serve the subscription set `version`; the previous one stays.
    case queryError(session: Int64, version: Int64, message: String)
    /// The answer to the client's `mark`, at the server version the session has been sent.
    case mark(session: Int64, request: Int64, serverVersion: UInt64)
    case unbound(session: Int64)
    case pong(timestamp: Value)
    case error(SyncErrorMessage)

    public struct Download: Hashable, Sendable {
        public var session: Int64
        /// The cursor the client stores once it has applied the message.
        public var serverVersion: UInt64
        public var changesets: [WireChangeset]
        /// The client's changesets through this version are acknowledged (taken first), and the
        /// changesets are what the server tells it of them.
        public var uploadAck: UInt64?
        /// A catch-up's progress, in bytes.
        public var progress: Progress?
        /// A bootstrap's batch: the client applies them together once `last` is true.
        public var bootstrap: Bootstrap?

        public init(session: Int64, serverVersion: UInt64, changesets: [WireChangeset], uploadAck: UInt64? = nil,
                    progress: Progress? = nil, bootstrap: Bootstrap? = nil) {
            (self.session, self.serverVersion, self.changesets) = (session, serverVersion, changesets)
            (self.uploadAck, self.progress, self.bootstrap) = (uploadAck, progress, bootstrap)
        }
    }

    /// A catch-up's progress: bytes sent so far, of an honest estimate of all it sends.
    public struct Progress: Hashable, Sendable {
        public let downloaded: Int64, downloadable: Int64
        public init(downloaded: Int64, downloadable: Int64) { (self.downloaded, self.downloadable) = (downloaded, downloadable) }
    }

    /// A bootstrap's batch: which subscription set it serves, objects sent so far over the
    /// objects the new view holds, and whether it is the last.
    public struct Bootstrap: Hashable, Sendable {
        public let queryVersion: Int64, sent: Int64, total: Int64
        public let last: Bool
        public init(queryVersion: Int64, sent: Int64, total: Int64, last: Bool) {
            (self.queryVersion, self.sent, self.total, self.last) = (queryVersion, sent, total, last)
        }
    }

    /// The session the message is for (nil for a `pong` and a connection's `error`).
    public var session: Int64? {
        switch self {
        case .ident(let session, _), .uploadAck(let session, _), .queryComplete(let session, _, _), .queryError(let session, _, _),
             .mark(let session, _, _), .unbound(let session):
            return session
        case .download(let d): return d.session
        case .error(let e): return e.session
        case .pong: return nil
        }
    }

    /// The message's `type` on the wire.
    public var type: String {
        switch self {
        case .ident: return "ident"
        case .download: return "download"
        case .uploadAck: return "uploadAck"
        case .queryComplete: return "queryComplete"
        case .queryError: return "queryError"
        case .mark: return "mark"
        case .unbound: return "unbound"
        case .pong: return "pong"
        case .error: return "error"
        }
    }
}
