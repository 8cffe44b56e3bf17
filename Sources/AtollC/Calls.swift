import AtollStore
import AtollSync
import Foundation
import Synchronization

// The machinery every @_cdecl function uses: the thread-local last error, the table of live
// handles, and `call`, which runs a body and turns any thrown error into a status.

// MARK: - Last error

/// The last error of one thread. The message is a C string owned here, valid until the next
/// call on that thread replaces it.
final class ErrorSlot {
    var code: Int32 = 0
    var message: UnsafeMutablePointer<CChar> = strdup("")

    func set(_ code: Int32, _ text: String) {
        free(message)
        self.code = code
        message = strdup(text.replacingOccurrences(of: "\0", with: "\\0"))
    }

    func clear() {
        guard code != 0 else { return }
        set(0, "")
    }

    deinit { free(message) }
}

private let errorKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key) { pointer in
        if let pointer { Unmanaged<ErrorSlot>.fromOpaque(pointer).release() }
    }
    return key
}()

var errorSlot: ErrorSlot {
    if let p = pthread_getspecific(errorKey) { return Unmanaged<ErrorSlot>.fromOpaque(p).takeUnretainedValue() }
    let slot = ErrorSlot()
    pthread_setspecific(errorKey, Unmanaged.passRetained(slot).toOpaque())
    return slot
}

/// Runs the body of an ABI function: clears the last error, and on a thrown error records it
/// and returns `failure`. Nothing escapes into the host.
@inline(__always)
func abiCall<T>(_ failure: T, _ body: () throws -> T) -> T {
    let slot = errorSlot
    slot.clear()
    do {
        return try body()
    } catch let e as AtollError {
        slot.set(e.code.rawValue, e.description)
    } catch let e as SyncError {
        slot.set(syncStatus(e).rawValue, e.description)
    } catch {
        slot.set(AtollError.Code.internal.rawValue, "\(error)")
    }
    return failure
}

// MARK: - Handles

/// What a handle stands for. Closed realms leave a tombstone so that later calls report
/// ATOLL_ERR_CLOSED; handle values are never reused.
enum HandleEntry {
    case realm(Store)
    case closedRealm
    /// Results; `migrationRealm` is the value of the migration realm handle they were made on,
    /// if they were: they fail as closed once that handle is (when the migration callback
    /// returns), as results of any closed realm do.
    case results(Results, migrationRealm: UInt?)
    /// The realm a migration callback works on: usable as a realm, not closed by
    /// atoll_realm_close(); a `closedRealm` once the callback returns.
    case migratingRealm(Store)
    /// A migration, during its callback, with the value of its realm handle (a
    /// `migratingRealm`); `endedMigration` after.
    case migration(Migration, realm: UInt)
    case endedMigration
    /// Results frozen by atoll_results_freeze: read like results, never change.
    case frozenResults(FrozenResults)
    /// An observer's registration (atoll_*_observe), until atoll_token_free.
    case token(NotificationToken)
    /// Apps, users, sync sessions and background opens (Sync.swift).
    case sync(SyncHandle)
}

final class HandleTable: Sendable {
    private let state = Mutex<(next: UInt, entries: [UInt: HandleEntry])>((next: 1, entries: [:]))

    /// A new handle value: an odd number that is not a valid address of anything.
    func insert(_ entry: HandleEntry) -> OpaquePointer {
        let id = state.withLock { s -> UInt in
            let id = s.next << 4 | 0x5
            s.next += 1
            s.entries[id] = entry
            return id
        }
        return OpaquePointer(bitPattern: id)!
    }

    func get(_ handle: OpaquePointer?) -> HandleEntry? {
        guard let handle else { return nil }
        let id = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        return state.withLock { $0.entries[id] }
    }

    func replace(_ handle: OpaquePointer, with entry: HandleEntry?) {
        let id = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(handle)))
        state.withLock { $0.entries[id] = entry }
    }
}

let handles = HandleTable()

func realmStore(_ handle: OpaquePointer?) throws -> Store {
    guard let handle else { throw AtollError(.invalidArgument, "realm is NULL") }
    switch handles.get(handle) {
    case .realm(let s), .migratingRealm(let s): return s
    case .closedRealm: throw AtollError(.closed, "the realm is closed")
    case .results, .frozenResults: throw AtollError(.invalidArgument, "a results handle was passed where a realm is expected")
    case .migration, .endedMigration: throw AtollError(.invalidArgument, "a migration handle was passed where a realm is expected")
    case .token: throw AtollError(.invalidArgument, "a token was passed where a realm is expected")
    case .sync: throw AtollError(.invalidArgument, "an app, user, session or open handle was passed where a realm is expected")
    case nil: throw AtollError(.invalidArgument, "not a realm handle (never opened, or freed)")
    }
}

func liveResults(_ handle: OpaquePointer?) throws -> Results {
    guard let handle else { throw AtollError(.invalidArgument, "results is NULL") }
    switch handles.get(handle) {
    case .results(let r, let migrationRealm):
        if let migrationRealm, case .closedRealm = handles.get(OpaquePointer(bitPattern: migrationRealm)) {
            throw AtollError(.closed, "the realm is closed: these results were made on a migration's realm, which closes when the migration callback returns")
        }
        return r
    case .frozenResults:
        throw AtollError(.invalidArgument, "these results are frozen: they can be read, not changed or observed")
    case .realm, .closedRealm, .migratingRealm, .migration, .endedMigration, .token, .sync:
        throw AtollError(.invalidArgument, "a realm, migration, token or sync handle was passed where results are expected")
    case nil: throw AtollError(.invalidArgument, "not a results handle (never made, or freed)")
    }
}

/// What reading results needs, live or frozen.
protocol ReadableResults {
    func count() throws -> Int
    func documents(offset: Int, limit: Int?) throws -> [Document]
}

extension Results: ReadableResults {}
extension FrozenResults: ReadableResults {}

/// Results to read: live or frozen.
func readableResults(_ handle: OpaquePointer?) throws -> ReadableResults {
    if let handle, case .frozenResults(let frozen) = handles.get(handle) { return frozen }
    return try liveResults(handle)
}

// MARK: - Callbacks

/// A host's C callback with its userdata, held by a Swift closure (which must be `Sendable`).
/// The pointer is the host's: it is used only during the call that was given it, on the
/// calling thread.
final class HostCallback<Function>: @unchecked Sendable {
    let function: Function
    let userdata: UnsafeMutableRawPointer?
    init(_ function: Function, _ userdata: UnsafeMutableRawPointer?) {
        self.function = function
        self.userdata = userdata
    }
}

// MARK: - Arguments

/// A required C string argument, checked for NULL and UTF-8.
func textArgument(_ p: UnsafePointer<CChar>?, _ name: String) throws -> String {
    guard let p else { throw AtollError(.invalidArgument, "\(name) is NULL") }
    guard let s = String(validatingCString: p) else { throw AtollError(.invalidArgument, "\(name) is not valid UTF-8") }
    return s
}

/// A required JSON text argument: NULL is an invalid argument, bad text invalid JSON.
func jsonArgument(_ p: UnsafePointer<CChar>?, _ name: String) throws -> JSONRef {
    guard let p else { throw AtollError(.invalidArgument, "\(name) is NULL") }
    do { return try EJSON.load(p) } catch let e as AtollError { throw e.prefixed(name) }
}

/// A required JSON text argument as a value (errors as for `json`).
func valueArgument(_ p: UnsafePointer<CChar>?, _ name: String) throws -> Value {
    let parsed = try jsonArgument(p, name)
    defer { json_decref(parsed) }
    do { return try EJSON.value(parsed) } catch let e as AtollError { throw e.prefixed(name) }
}

func updatePolicy(_ raw: Int32) throws -> UpdatePolicy {
    guard let p = UpdatePolicy(rawValue: raw) else {
        throw AtollError(.invalidArgument, "update_policy must be ATOLL_UPDATE_ERROR (0), ATOLL_UPDATE_MODIFIED (1) or ATOLL_UPDATE_ALL (2), not \(raw)")
    }
    return p
}

/// A `malloc`ed copy of a jansson value's text; consumes the reference.
func textResult(_ json: JSONRef) throws -> UnsafeMutablePointer<CChar> {
    defer { json_decref(json) }
    guard let text = EJSON.dumpC(json) else { throw AtollError(.internal, "could not serialize JSON") }
    return text
}

import CJansson
import AtollJSON
