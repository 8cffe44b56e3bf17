import AtollJSON
import AtollStore

// The one encoder and the one decoder of each side's messages. A message is built as a JSON
// tree and written by jansson (`Wire.encode`); its changesets, which are encoded once and sent
// many times (a server's fan-out, a client's stored uploads), are written into the message's
// `changesets` array as the text they were encoded to. That is the only place where message
// text is joined, and what is joined is only ever text this file's encoders wrote.

/// A changeset's JSON text, written by the protocol's encoder, kept to be sent as it is.
public struct EncodedChangeset: Hashable, Sendable {
    public let text: String

    /// Encodes `changeset` (with `"more": true` for a part of a larger changeset with more to come).
    public init(_ changeset: SyncChangeset, more: Bool = false) {
        var value = changeset.wireValue
        if more, case .object(var d) = value {
            d["more"] = .bool(true)
            value = .object(d)
        }
        text = Wire.encode(value)
    }

    /// A changeset whose instructions are encoded already: each of `instructions` is the JSON of
    /// one or more instructions, comma-separated, as `SyncInstruction.wireValues` gives them.
    public init(serverVersion: UInt64, clock: Clock, instructions: [String]) {
        text = Wire.splice(.doc(["serverVersion": .int(Int64(serverVersion)), "clock": clock.value]), "instructions", instructions)
    }

    /// Text that one of the other initialisers wrote and that was kept since (a client's pending
    /// upload, a server's history entry).
    public init(stored text: String) { self.text = text }

    /// The changeset, and whether it is a part with more to come.
    /// - Throws: `ProtocolError` for text that is not a changeset.
    public func decode() throws -> (changeset: SyncChangeset, more: Bool) {
        let value: Value
        do { value = try EJSON.parse(text) } catch { throw ProtocolError("a changeset that is not JSON: \(error)") }
        return try Self.decode(value)
    }

    static func decode(_ value: Value) throws -> (changeset: SyncChangeset, more: Bool) {
        let more = if case .object(let d) = value, d["more"] == .bool(true) { true } else { false }
        return (try SyncChangeset(wire: value), more)
    }
}

extension WireChangeset {
    /// The changeset's text in a message.
    var text: String {
        switch self {
        case .decoded(let cs, let more): return EncodedChangeset(cs, more: more).text
        case .encoded(let e): return e.text
        }
    }
}

extension Wire {
    /// The text of `document` with one more field, `key`, last: an array of JSON texts that this
    /// module's encoders wrote.
    static func splice(_ document: Value, _ key: String, _ elements: [String]) -> String {
        var text = encode(document)
        // jansson writes an object compactly: its text ends with the closing brace.
        if text.last == "}" { text.removeLast() }
        text += (text.utf8.count > 1 ? "," : "") + "\"" + key + "\":["
        text += elements.joined(separator: ",")
        text += "]}"
        return text
    }
}

extension Wire {
    /// A message decoded by `body` from its fields; an error names the message's type and
    /// session where those could be read (the server drops a message for a session whose bind
    /// failed, decodable or not).
    static func decodeMessage<M>(_ text: String, _ body: (Fields) throws -> M) throws -> M {
        let m = try decode(text)
        do { return try body(m) } catch var error as ProtocolError {
            error.messageType = try? m.string("type")
            error.session = try? m.int("session")
            throw error
        }
    }
}

extension SubscriptionQuery {
    /// The wire form: `{"name", "class", "query", "args"}` (also how a client stores its sets).
    public var wireValue: Value {
        .doc(["name": .string(name), "class": .string(className), "query": .string(query), "args": .list(arguments)])
    }

    /// - Throws: `ProtocolError` naming a field missing or of the wrong kind.
    public init(wire value: Value) throws {
        let f = try Fields(value, "query")
        self.init(name: try f.optionalString("name") ?? "", className: try f.string("class"),
                  query: try f.optionalString("query") ?? "TRUEPREDICATE", arguments: try f.list("args"))
    }
}

// MARK: - Client messages

extension ClientMessage {
    /// The message's JSON text.
    public var text: String {
        switch self {
        case .bind(let b):
            var d = Document()
            d["type"] = .string("bind")
            d["session"] = .int(b.session)
            if let realm = b.realm { d["realm"] = .string(realm) }
            switch b.mode {
            case .flexible: d["mode"] = .string("flexible")
            case .partition(let value):
                d["mode"] = .string("partition")
                if let value { d["partition"] = value }
            }
            d["file"] = b.file.map { .doc(["ident": .int($0.ident), "salt": .int($0.salt)]) } ?? .null
            d["downloadCursor"] = .int(Int64(b.downloadCursor))
            if let cursor = b.uploadCursor { d["uploadCursor"] = .int(Int64(cursor)) }
            if let schema = b.schema { d["schema"] = schema }
            return Wire.encode(.object(d))
        case .query(let q):
            return Wire.encode(.doc(["type": .string("query"), "session": .int(q.session), "version": .int(q.version),
                                     "queries": .list(q.subscriptions.map(\.wireValue)), "complete": .bool(q.complete)]))
        case .upload(let session, let changesets):
            return Wire.splice(.doc(["type": .string("upload"), "session": .int(session)]), "changesets", changesets.map(\.text))
        case .mark(let session, let request):
            return Wire.encode(.doc(["type": .string("mark"), "session": .int(session), "request": .int(request)]))
        case .unbind(let session):
            return Wire.encode(.doc(["type": .string("unbind"), "session": .int(session)]))
        case .ping(let timestamp):
            return Wire.encode(.doc(["type": .string("ping"), "timestamp": timestamp]))
        }
    }

    /// Decodes a client's message.
    /// - Throws: `ProtocolError` (with the message's type and session, where those could be
    ///   read) for text that is not JSON, a type the protocol does not have, or a field missing
    ///   or of the wrong kind.
    public init(text: String) throws { self = try Wire.decodeMessage(text, Self.init) }

    private init(_ m: Fields) throws {
        let type = try m.string("type")
        switch type {
        case "bind":
            let mode: Mode
            switch try m.optionalString("mode") ?? "flexible" {
            case "flexible": mode = .flexible
            // A partition value may be null (Realm allows it): only an absent one is none.
            case "partition": mode = .partition(m.document["partition"])
            default: throw ProtocolError("bind: mode must be \"flexible\" or \"partition\"")
            }
            var file: ClientFileIdentity?
            if case .object(let f)? = m["file"] {
                guard case .int(let ident)? = f["ident"], case .int(let salt)? = f["salt"] else {
                    throw ProtocolError("bind: \"file\" must be {\"ident\", \"salt\"}")
                }
                file = ClientFileIdentity(ident: ident, salt: salt)
            }
            let schema: Value? = if case .list? = m["schema"] { m["schema"] } else { nil }
            self = .bind(Bind(session: try m.int("session"), realm: try? m.string("realm"), mode: mode, file: file,
                              downloadCursor: try m.uint("downloadCursor", default: 0),
                              uploadCursor: m["uploadCursor"] == nil ? nil : try m.uint("uploadCursor"), schema: schema))
        case "query":
            self = .query(Query(session: try m.int("session"), version: try m.int("version"),
                                subscriptions: try m.list("queries").map(SubscriptionQuery.init(wire:)),
                                complete: try m.bool("complete", default: false)))
        case "upload":
            self = .upload(session: try m.int("session"), changesets: try m.changesets())
        case "mark":
            self = .mark(session: try m.int("session"), request: try m.int("request"))
        case "unbind":
            self = .unbind(session: try m.int("session"))
        case "ping":
            self = .ping(timestamp: m.document["timestamp"] ?? .null)
        default:
            throw ProtocolError("unknown message type '\(type)'")
        }
    }
}

// MARK: - Server messages

extension ServerMessage {
    /// The message's JSON text.
    public var text: String {
        switch self {
        case .ident(let session, let file):
            return Wire.encode(.doc(["type": .string("ident"), "session": .int(session),
                                     "file": .doc(["ident": .int(file.ident), "salt": .int(file.salt)])]))
        case .download(let d):
            var head = Document()
            head["type"] = .string("download")
            head["session"] = .int(d.session)
            head["serverVersion"] = .int(Int64(d.serverVersion))
            if let acked = d.uploadAck { head["uploadAck"] = .int(Int64(acked)) }
            if let p = d.progress { head["progress"] = .doc(["downloaded": .int(p.downloaded), "downloadable": .int(p.downloadable)]) }
            if let b = d.bootstrap {
                head["bootstrap"] = .doc(["queryVersion": .int(b.queryVersion), "sent": .int(b.sent), "total": .int(b.total),
                                          "last": .bool(b.last)])
            }
            return Wire.splice(.object(head), "changesets", d.changesets.map(\.text))
        case .uploadAck(let session, let clientVersion):
            return Wire.encode(.doc(["type": .string("uploadAck"), "session": .int(session), "clientVersion": .int(Int64(clientVersion))]))
        case .queryComplete(let session, let version, let serverVersion):
            return Wire.encode(.doc(["type": .string("queryComplete"), "session": .int(session), "version": .int(version),
                                     "serverVersion": .int(Int64(serverVersion))]))
        case .queryError(let session, let version, let message):
            return Wire.encode(.doc(["type": .string("queryError"), "session": .int(session), "version": .int(version),
                                     "message": .string(message)]))
        case .mark(let session, let request, let serverVersion):
            return Wire.encode(.doc(["type": .string("mark"), "session": .int(session), "request": .int(request),
                                     "serverVersion": .int(Int64(serverVersion))]))
        case .unbound(let session):
            return Wire.encode(.doc(["type": .string("unbound"), "session": .int(session)]))
        case .pong(let timestamp):
            return Wire.encode(.doc(["type": .string("pong"), "timestamp": timestamp]))
        case .error(let e):
            return Wire.encode(e.wireValue)
        }
    }

    /// Decodes a server's message.
    /// - Throws: as `ClientMessage.init(text:)`.
    public init(text: String) throws { self = try Wire.decodeMessage(text, Self.init) }

    private init(_ m: Fields) throws {
        let type = try m.string("type")
        switch type {
        case "ident":
            guard case .object(let f)? = m["file"], case .int(let ident)? = f["ident"], case .int(let salt)? = f["salt"] else {
                throw ProtocolError("ident without a file")
            }
            self = .ident(session: try m.int("session"), file: ClientFileIdentity(ident: ident, salt: salt))
        case "download":
            var progress: Progress?
            if case .object(let p)? = m["progress"] {
                progress = Progress(downloaded: p["downloaded"]?.intValue ?? 0, downloadable: p["downloadable"]?.intValue ?? 0)
            }
            var bootstrap: Bootstrap?
            if case .object(let b)? = m["bootstrap"] {
                bootstrap = Bootstrap(queryVersion: b["queryVersion"]?.intValue ?? 0, sent: b["sent"]?.intValue ?? 0,
                                      total: b["total"]?.intValue ?? 0, last: b["last"] == .bool(true))
            }
            let acked = m["uploadAck"] == nil ? nil : try m.uint("uploadAck")
            self = .download(Download(session: try m.int("session"), serverVersion: try m.uint("serverVersion"),
                                      changesets: try m.changesets(), uploadAck: acked == 0 ? nil : acked,
                                      progress: progress, bootstrap: bootstrap))
        case "uploadAck":
            self = .uploadAck(session: try m.int("session"), clientVersion: try m.uint("clientVersion"))
        case "queryComplete":
            self = .queryComplete(session: try m.int("session"), version: try m.int("version"),
                                  serverVersion: try m.uint("serverVersion", default: 0))
        case "queryError":
            self = .queryError(session: try m.int("session"), version: try m.int("version"),
                               message: try m.optionalString("message") ?? "the server refused the subscriptions")
        case "mark":
            self = .mark(session: try m.int("session"), request: try m.int("request"), serverVersion: try m.uint("serverVersion", default: 0))
        case "unbound":
            self = .unbound(session: try m.int("session"))
        case "pong":
            self = .pong(timestamp: m.document["timestamp"] ?? .null)
        case "error":
            self = .error(try SyncErrorMessage(wire: m))
        default:
            throw ProtocolError("unknown message type '\(type)'")
        }
    }
}

extension Fields {
    /// A message's `changesets`, decoded.
    fileprivate func changesets() throws -> [WireChangeset] {
        try list("changesets").map { item in
            let (cs, more) = try EncodedChangeset.decode(item)
            return .decoded(cs, more: more)
        }
    }
}
