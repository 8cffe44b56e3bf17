import AtollStore
import Foundation

/// The protocol's error codes (docs/protocol.md, "Errors"): Realm's `SyncError` codes where
/// they apply, with the action a client should take.
public enum SyncErrorCode: String, Sendable, CaseIterable {
    case internalServerError
    case badMessage
    case badSyncPartitionValue
    case permissionDenied
    case badClientFile
    case badServerVersion
    case clientTooOld
    case invalidSchemaChange
    case invalidFlexibleSyncSubscriptions
    case writeRejected
    case tooManyMessages
    /// A changeset's clock is further ahead of the server's wall clock than it allows.
    case clockAhead
    // Client-side only (never on the wire).
    case connectionFailed
    case timeout
    case authFailed
    case clientReset
    /// The session's own work on the device failed (its realm file could not be read or
    /// written, local changes were pruned before they were uploaded): not the server's doing.
    case clientInternalError

    public var number: Int {
        switch self {
        case .internalServerError: return 1
        case .badMessage: return 100
        case .badSyncPartitionValue: return 204
        case .permissionDenied: return 206
        case .badClientFile: return 208
        case .badServerVersion: return 209
        case .clientTooOld: return 210
        case .invalidSchemaChange: return 225
        case .invalidFlexibleSyncSubscriptions: return 226
        case .writeRejected: return 231
        case .tooManyMessages: return 233
        case .clockAhead: return 235
        case .connectionFailed: return 1001
        case .timeout: return 1002
        case .authFailed: return 1003
        case .clientReset: return 1004
        case .clientInternalError: return 1005
        }
    }

    /// What the client should do.
    public var action: String {
        switch self {
        case .internalServerError, .tooManyMessages, .clockAhead, .connectionFailed, .timeout: return "retry"
        case .badMessage, .badSyncPartitionValue, .permissionDenied, .invalidSchemaChange, .clientInternalError: return "applicationBug"
        case .badClientFile, .badServerVersion, .clientTooOld, .clientReset: return "clientReset"
        case .invalidFlexibleSyncSubscriptions: return "none"
        case .writeRejected: return "warning"
        case .authFailed: return "logOut"
        }
    }

    public var isFatal: Bool {
        switch self {
        case .writeRejected, .invalidFlexibleSyncSubscriptions, .internalServerError, .tooManyMessages,
             .clockAhead, .connectionFailed, .timeout: return false
        default: return true
        }
    }
}

/// A write the server refused: the client undoes it.
public struct CompensatingWrite: Hashable, Sendable {
    public var className: String
    public var primaryKey: Value
    public var reason: String
    public init(className: String, primaryKey: Value, reason: String) {
        self.className = className
        self.primaryKey = primaryKey
        self.reason = reason
    }

    public var wireValue: Value {
        .doc(["class": .string(className), "primaryKey": primaryKey, "reason": .string(reason)])
    }
}

/// An `error` message.
public struct SyncErrorMessage: Hashable, Sendable, Error, CustomStringConvertible {
    public var code: SyncErrorCode
    public var message: String
    public var session: Int64?
    public var compensatingWrites: [CompensatingWrite] = []
    /// Seconds after which trying again can succeed (`clockAhead`, `tooManyMessages`); the
    /// client waits at least that long before it reconnects.
    public var retryAfter: Int64?
    /// `writeRejected`: the client version of the changeset whose writes were refused.
    public var clientVersion: UInt64?

    public init(_ code: SyncErrorCode, _ message: String, session: Int64? = nil, compensatingWrites: [CompensatingWrite] = [],
                retryAfter: Int64? = nil, clientVersion: UInt64? = nil) {
        (self.code, self.message, self.session) = (code, message, session)
        (self.compensatingWrites, self.retryAfter, self.clientVersion) = (compensatingWrites, retryAfter, clientVersion)
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public var wireValue: Value {
        var d = Document()
        d["type"] = .string("error")
        if let session { d["session"] = .int(session) }
        d["code"] = .string(code.rawValue)
        d["codeNumber"] = .int(Int64(code.number))
        d["message"] = .string(message)
        d["fatal"] = .bool(code.isFatal)
        d["action"] = .string(code.action)
        if !compensatingWrites.isEmpty { d["compensatingWrites"] = .list(compensatingWrites.map(\.wireValue)) }
        if let retryAfter { d["retryAfter"] = .int(retryAfter) }
        if let clientVersion { d["clientVersion"] = .int(Int64(clientVersion)) }
        return .object(d)
    }

    public init(wire f: Fields) throws {
        let name = try f.string("code")
        code = SyncErrorCode(rawValue: name) ?? .internalServerError
        message = (try? f.string("message")) ?? name
        session = try? f.int("session")
        retryAfter = try? f.int("retryAfter")
        clientVersion = try? f.uint("clientVersion")
        compensatingWrites = try f.list("compensatingWrites").map { v in
            let c = try Fields(v, "compensating write")
            return CompensatingWrite(className: try c.string("class"), primaryKey: c.document["primaryKey"] ?? .null,
                                     reason: (try? c.string("reason")) ?? "")
        }
    }
}

extension SyncErrorMessage: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
