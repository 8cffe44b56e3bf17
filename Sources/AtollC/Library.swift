import AtollStore
import Foundation

// atoll_libversion*, atoll_last_error, atoll_status_name, atoll_free.

let versionNumber: Int32 = 1000
nonisolated(unsafe) private let versionText = UnsafePointer(strdup("0.1.0")!)

nonisolated(unsafe) private let statusNames: [Int32: UnsafePointer<CChar>] = {
    var names: [Int32: UnsafePointer<CChar>] = [0: UnsafePointer(strdup("ATOLL_OK")!)]
    let spelled: [AtollError.Code: String] = [
        .invalidArgument: "INVALID_ARGUMENT", .invalidJSON: "INVALID_JSON", .schema: "SCHEMA",
        .schemaMismatch: "SCHEMA_MISMATCH", .notFound: "NOT_FOUND", .duplicatePrimaryKey: "DUPLICATE_PRIMARY_KEY",
        .querySyntax: "QUERY_SYNTAX", .queryInvalid: "QUERY_INVALID", .notInWrite: "NOT_IN_WRITE",
        .alreadyInWrite: "ALREADY_IN_WRITE", .file: "FILE", .closed: "CLOSED", .readOnly: "READ_ONLY", .busy: "BUSY",
        .noSuchClass: "NO_SUCH_CLASS", .noSuchProperty: "NO_SUCH_PROPERTY", .typeMismatch: "TYPE_MISMATCH",
        .missingValue: "MISSING_VALUE", .internal: "INTERNAL", .migration: "MIGRATION",
        .auth: "AUTH", .timeout: "TIMEOUT", .network: "NETWORK", .subscriptionExists: "SUBSCRIPTION_EXISTS",
        .subscription: "SUBSCRIPTION", .sync: "SYNC",
    ]
    for code in AtollError.Code.allCases {
        names[code.rawValue] = UnsafePointer(strdup("ATOLL_ERR_" + (spelled[code] ?? "UNKNOWN"))!)
    }
    return names
}()

@_cdecl("atoll_libversion_number")
public func atoll_libversion_number() -> Int32 { versionNumber }

@_cdecl("atoll_libversion")
public func atoll_libversion() -> UnsafePointer<CChar> { versionText }

/// The C layout of `atoll_error_t`.
public struct CError {
    var code: Int32
    var message: UnsafePointer<CChar>?
}

@_cdecl("atoll_last_error")
public func atoll_last_error(_ out: UnsafeMutableRawPointer?) -> Bool {
    let slot = errorSlot
    if let out {
        let error = out.assumingMemoryBound(to: CError.self)
        error.pointee.code = slot.code
        error.pointee.message = UnsafePointer(slot.message)
    }
    return slot.code != 0
}

@_cdecl("atoll_status_name")
public func atoll_status_name(_ code: Int32) -> UnsafePointer<CChar>? { statusNames[code] }

@_cdecl("atoll_free")
public func atoll_free(_ pointer: UnsafeMutableRawPointer?) { free(pointer) }
