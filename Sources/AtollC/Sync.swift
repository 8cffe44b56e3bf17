import AtollJSON
import AtollProtocol
import AtollStore
import AtollSync
import CJansson
import Foundation
import Synchronization

// One file over 600 lines: it is the whole sync section of the C ABI, one `@_cdecl` for each
// function of include/atoll.h's "Sync" part, so that the two read side by side.

// atoll_app_*, atoll_user_*, atoll_realm_open_synced, atoll_realm_async_open, atoll_async_open_*,
// atoll_subscriptions_*, atoll_sync_session_*, atoll_realm_write_copy_synced (docs/abi.md, "Sync").
// Network calls block the calling thread; state changes arrive through callbacks.

/// The sync objects a handle can stand for.
enum SyncHandle {
    case app(ClientApp)
    case user(ClientUser)
    case session(ClientSession)
    case asyncOpen(AsyncOpenBox)
}

/// An AsyncOpen from C: the task, and the realm it opened until the host takes it.
final class AsyncOpenBox: @unchecked Sendable {
    let lock = NSLock()
    var task: AsyncOpenTask?
    var session: ClientSession?
    var configuration: Configuration
    var taken = false
    var freed = false
    /// The host's `free_userdata`, run once when the handle is freed.
    var releaseUserdata: (@Sendable () -> Void)?
    init(configuration: Configuration) { self.configuration = configuration }
}

/// The synced realms' sessions, by realm handle: closing the realm gives the session back.
let syncedRealms = Mutex<[UInt: ClientSession]>([:])

func handleKey(_ h: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(h))) }

/// The C status of a sync error.
func syncStatus(_ e: SyncError) -> AtollError.Code {
    switch e.code {
    case .authFailed: return .auth
    case .timeout: return .timeout
    case .connectionFailed: return .network
    case .invalidFlexibleSyncSubscriptions: return .subscription
    default: return .sync
    }
}

private func syncEntry(_ handle: OpaquePointer?, _ name: String) throws -> SyncHandle {
    guard let handle else { throw AtollError(.invalidArgument, "\(name) is NULL") }
    guard case .sync(let entry)? = handles.get(handle) else {
        throw AtollError(.invalidArgument, "not \(name == "app" ? "an" : "a") \(name) handle (never made, or freed)")
    }
    return entry
}

private func app(_ h: OpaquePointer?) throws -> ClientApp {
    guard case .app(let a) = try syncEntry(h, "app") else { throw AtollError(.invalidArgument, "not an app handle") }
    return a
}

private func user(_ h: OpaquePointer?) throws -> ClientUser {
    guard case .user(let u) = try syncEntry(h, "user") else { throw AtollError(.invalidArgument, "not a user handle") }
    return u
}

private func session(_ h: OpaquePointer?) throws -> ClientSession {
    guard case .session(let s) = try syncEntry(h, "session") else { throw AtollError(.invalidArgument, "not a sync session handle") }
    return s
}

/// The session of a synced realm handle.
private func realmSession(_ realm: OpaquePointer?) throws -> ClientSession {
    _ = try realmStore(realm)
    guard let realm, let s = syncedRealms.withLock({ $0[handleKey(realm)] }) else {
        throw AtollError(.invalidArgument, "the realm is not synced (open it with atoll_realm_open_synced)")
    }
    return s
}

private func object(_ p: UnsafePointer<CChar>?, _ name: String) throws -> Document {
    guard case .object(let d) = try valueArgument(p, name) else { throw AtollError(.invalidArgument, "\(name) must be a JSON object") }
    return d
}

private func milliseconds(_ ms: Int32, _ name: String) throws -> Double {
    guard ms >= 0 else { throw AtollError(.invalidArgument, "\(name) must be >= 0") }
    return Double(ms) / 1000
}

private func deliver(_ host: HostCallback<ChangesFunction>, _ value: Value) {
    let text = Wire.encode(value)
    text.withCString { host.function(host.userdata, $0) }
}

// MARK: - Apps and users

@_cdecl("atoll_app_new")
public func atoll_app_new(_ configJSON: UnsafePointer<CChar>?) -> OpaquePointer? {
    abiCall(nil) {
        let c = try object(configJSON, "app_config_json")
        for key in c.keys where !["appId", "baseUrl", "metadataDir", "requestTimeoutMs", "connectTimeoutMs"].contains(key) {
            throw AtollError(.invalidArgument, "app_config_json: unknown key \"\(key)\"")
        }
        guard case .string(let id)? = c["appId"] else { throw AtollError(.invalidArgument, "app_config_json needs \"appId\"") }
        var configuration = ClientAppConfiguration(appId: id)
        if let v = c["baseUrl"] {
            guard case .string(let url) = v else { throw AtollError(.invalidArgument, "\"baseUrl\" must be a string") }
            configuration = ClientAppConfiguration(appId: id, baseURL: url)
        }
        if let v = c["metadataDir"] {
            guard case .string(let dir) = v else { throw AtollError(.invalidArgument, "\"metadataDir\" must be a string") }
            configuration.metadataDirectory = dir
        }
        if let v = c["requestTimeoutMs"] {
            guard case .int(let ms) = v, ms > 0 else { throw AtollError(.invalidArgument, "\"requestTimeoutMs\" must be an integer > 0") }
            configuration.requestTimeout = Double(ms) / 1000
        }
        if let v = c["connectTimeoutMs"] {
            guard case .int(let ms) = v, ms > 0 else { throw AtollError(.invalidArgument, "\"connectTimeoutMs\" must be an integer > 0") }
            configuration.connectTimeout = Double(ms) / 1000
        }
        return handles.insert(.sync(.app(try ClientApp.shared(configuration: configuration))))
    }
}

@_cdecl("atoll_app_free")
public func atoll_app_free(_ handle: OpaquePointer?) {
    guard let handle, case .sync(.app) = handles.get(handle) else { return }
    handles.replace(handle, with: nil)
}

@_cdecl("atoll_app_login")
public func atoll_app_login(_ handle: OpaquePointer?, _ credentialsJSON: UnsafePointer<CChar>?) -> OpaquePointer? {
    abiCall(nil) {
        let a = try app(handle)
        let c = try object(credentialsJSON, "credentials_json")
        func field(_ k: String) throws -> String {
            guard case .string(let s)? = c[k] else { throw AtollError(.invalidArgument, "credentials_json needs \"\(k)\" (a string)") }
            return s
        }
        let credentials: ClientCredentials
        switch try field("provider") {
        case "anonymous": credentials = .anonymous
        case "emailPassword": credentials = .emailPassword(email: try field("email"), password: try field("password"))
        case "apiKey": credentials = .apiKey(try field("key"))
        case "jwt": credentials = .jwt(try field("token"))
        case let other:
            throw AtollError(.invalidArgument, "credentials_json: unknown provider \"\(other)\" (anonymous, emailPassword, apiKey, jwt)")
        }
        let u = try runToCompletion { try await a.login(credentials) }
        return handles.insert(.sync(.user(u)))
    }
}

@_cdecl("atoll_app_register_email")
public func atoll_app_register_email(_ handle: OpaquePointer?, _ email: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let a = try app(handle)
        let e = try textArgument(email, "email"), p = try textArgument(password, "password")
        try runToCompletion { try await a.registerEmail(e, password: p) }
        return true
    }
}

@_cdecl("atoll_app_current_user")
public func atoll_app_current_user(_ handle: OpaquePointer?) -> OpaquePointer? {
    abiCall(nil) {
        guard let u = try app(handle).currentUser else { return nil }
        return handles.insert(.sync(.user(u)))
    }
}

@_cdecl("atoll_app_all_users")
public func atoll_app_all_users(_ handle: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) { strdup(Wire.encode(.list(try app(handle).allUsers.map(\.json)))) }
}

@_cdecl("atoll_app_switch_user")
public func atoll_app_switch_user(_ handle: OpaquePointer?, _ u: OpaquePointer?) -> Bool {
    abiCall(false) { try app(handle).switchUser(try user(u)); return true }
}

@_cdecl("atoll_user_json")
public func atoll_user_json(_ handle: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) { strdup(Wire.encode(try user(handle).json)) }
}

@_cdecl("atoll_user_logout")
public func atoll_user_logout(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) {
        let u = try user(handle)
        try runToCompletion { try await u.app.logOut(u) }
        return true
    }
}

@_cdecl("atoll_user_remove")
public func atoll_user_remove(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) {
        let u = try user(handle)
        try runToCompletion { try await u.app.remove(u) }
        return true
    }
}

@_cdecl("atoll_user_delete")
public func atoll_user_delete(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) {
        let u = try user(handle)
        try runToCompletion { try await u.app.delete(u) }
        return true
    }
}

@_cdecl("atoll_user_free")
public func atoll_user_free(_ handle: OpaquePointer?) {
    guard let handle, case .sync(.user) = handles.get(handle) else { return }
    handles.replace(handle, with: nil)
}

/// `{"code","codeNumber","message","fatal","action","compensatingWrites":[{"class","primaryKey","reason"}]}`.
func errorJSON(_ e: SyncError) -> Value {
    .doc(["code": .string(e.code.rawValue), "codeNumber": .int(Int64(e.code.number)), "message": .string(e.message),
          "fatal": .bool(e.isFatal), "action": .string(e.action),
          "compensatingWrites": .list(e.compensatingWrites.map(\.wireValue))])
}

@_cdecl("atoll_app_observe_errors")
public func atoll_app_observe_errors(_ handle: OpaquePointer?, _ fn: ChangesFunction?, _ userdata: UnsafeMutableRawPointer?,
                                     _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    let release = HostCallback(freeUserdata, userdata)
    let token: OpaquePointer? = abiCall(nil) {
        let a = try app(handle)
        guard let fn else { throw AtollError(.invalidArgument, "fn is NULL") }
        let host = HostCallback(fn, userdata)
        let t = NotificationToken()
        let id = a.addErrorHandler { [weak t] error, session in
            var v = errorJSON(error)
            if case .object(var d) = v, let session { d["path"] = .string(session.path); v = .object(d) }
            t?.run { deliver(host, v) }
        }
        t.whenInvalidated { [weak a] in
            a?.removeErrorHandler(id)
            release.function?(release.userdata)
        }
        return handles.insert(.token(t))
    }
    if token == nil { freeUserdata?(userdata) }
    return token
}

// MARK: - Opening synced realms

/// A synced realm's configuration: the store's (as for atoll_realm_open) and its "sync" part.
struct SyncedOpen {
    var store: Configuration
    var sync: ClientSyncConfiguration
    var options: AtollSync.OpenOptions
}

private func syncedOpen(_ configJSON: UnsafePointer<CChar>?) throws -> SyncedOpen {
    let json = try jsonArgument(configJSON, "config_json")
    defer { json_decref(json) }
    guard json.pointee.type == JSON_OBJECT else { throw AtollError(.invalidArgument, "config_json must be a JSON object") }
    guard let syncRef = json_object_get(json, "sync"), case .object(let s) = try EJSON.value(syncRef) else {
        throw AtollError(.invalidArgument, "config_json needs \"sync\": {\"mode\": \"flexible\" | \"partition\", ...}")
    }
    json_object_del(json, "sync")
    guard let rest = EJSON.dumpC(json) else { throw AtollError(.internal, "could not serialize JSON") }
    defer { free(rest) }
    let store = try ConfigurationJSON.configuration(rest)
    let known = ["mode", "partitionValue", "initialSubscriptions", "rerunOnOpen", "downloadBeforeOpen", "timeoutMs",
                 "offlineFallback", "clientResetMode"]
    for key in s.keys where !known.contains(key) { throw AtollError(.invalidArgument, "sync: unknown key \"\(key)\"") }
    var sync: ClientSyncConfiguration
    switch s["mode"] {
    case .string("flexible")?, nil: sync = ClientSyncConfiguration(mode: .flexible)
    case .string("partition")?:
        guard let value = s["partitionValue"] else { throw AtollError(.invalidArgument, "sync: partition mode needs \"partitionValue\"") }
        sync = ClientSyncConfiguration(mode: .partition(value))
    default: throw AtollError(.invalidArgument, "sync: \"mode\" must be \"flexible\" or \"partition\"")
    }
    if case .list(let items)? = s["initialSubscriptions"] {
        sync.initialSubscriptions = try items.map { try subscription($0, "sync.initialSubscriptions") }
    }
    if case .bool(let b)? = s["rerunOnOpen"] { sync.rerunOnOpen = b }
    if let v = s["clientResetMode"] {
        guard case .string(let name) = v, let mode = ClientResetStrategy(rawValue: name) else {
            throw AtollError(.invalidArgument, "sync: \"clientResetMode\" must be manual, discardUnsyncedChanges, recoverUnsyncedChanges or recoverOrDiscardUnsyncedChanges")
        }
        sync.clientResetMode = mode
    }
    var options = AtollSync.OpenOptions()
    if let v = s["downloadBeforeOpen"] {
        guard case .string(let name) = v, let mode = DownloadBeforeOpen(rawValue: name) else {
            throw AtollError(.invalidArgument, "sync: \"downloadBeforeOpen\" must be never, once or always")
        }
        options.downloadBeforeOpen = mode
    }
    if let v = s["timeoutMs"] {
        guard case .int(let ms) = v, ms >= 0 else { throw AtollError(.invalidArgument, "sync: \"timeoutMs\" must be an integer >= 0") }
        options.timeout = Double(ms) / 1000
    }
    if case .bool(let b)? = s["offlineFallback"] { options.offlineFallback = b }
    return SyncedOpen(store: store, sync: sync, options: options)
}

/// `{"name","class","query","args"}`.
private func subscription(_ v: Value, _ context: String) throws -> SubscriptionQuery {
    guard case .object(let d) = v else { throw AtollError(.invalidArgument, "\(context): each subscription must be an object") }
    guard case .string(let cls)? = d["class"] else { throw AtollError(.invalidArgument, "\(context): a subscription needs \"class\"") }
    var args = [Value]()
    if let a = d["args"] {
        guard case .list(let items) = a else { throw AtollError(.invalidArgument, "\(context): \"args\" must be an array") }
        args = items
    }
    return SubscriptionQuery(name: d["name"]?.stringValue ?? "", className: cls,
                             query: d["query"]?.stringValue ?? "TRUEPREDICATE", arguments: args)
}

/// Opens the host's handle of a synced realm whose session is open.
private func openHandle(_ configuration: Configuration, _ s: ClientSession) throws -> OpaquePointer {
    let store: Store
    do { store = try Store(configuration) } catch {
        s.release()
        throw error
    }
    let h = handles.insert(.realm(store))
    syncedRealms.withLock { $0[handleKey(h)] = s }
    return h
}

@_cdecl("atoll_realm_open_synced")
public func atoll_realm_open_synced(_ u: OpaquePointer?, _ configJSON: UnsafePointer<CChar>?) -> OpaquePointer? {
    abiCall(nil) {
        let owner = try user(u)
        let open = try syncedOpen(configJSON)
        let s = try ClientSession.openRealm(user: owner, storeConfiguration: open.store, sync: open.sync, options: open.options)
        return try openHandle(open.store, s)
    }
}

/// Called when a synced realm handle closes (Realm.swift).
func closeSynced(_ realm: OpaquePointer) {
    let s = syncedRealms.withLock { $0.removeValue(forKey: handleKey(realm)) }
    s?.release()
}

@_cdecl("atoll_realm_async_open")
public func atoll_realm_async_open(_ u: OpaquePointer?, _ configJSON: UnsafePointer<CChar>?, _ fn: ChangesFunction?,
                                   _ userdata: UnsafeMutableRawPointer?, _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    let release = HostCallback(freeUserdata, userdata)
    let result: OpaquePointer? = abiCall(nil) {
        let owner = try user(u)
        guard let fn else { throw AtollError(.invalidArgument, "fn is NULL") }
        let open = try syncedOpen(configJSON)
        let host = HostCallback(fn, userdata)
        let box = AsyncOpenBox(configuration: open.store)
        box.releaseUserdata = { release.function?(release.userdata) }
        // `always`: AsyncOpen downloads before opening whatever the option says.
        let task = AsyncOpenTask(user: owner, storeConfiguration: open.store, sync: open.sync, timeout: open.options.timeout,
                                 offlineFallback: open.options.offlineFallback) { state in
            let value: Value
            switch state {
            case .connecting: value = .doc(["state": .string("connecting")])
            case .waitingForUser: value = .doc(["state": .string("waitingForUser")])
            case let .progress(transferred, transferable, estimate):
                value = .doc(["state": .string("progress"), "transferred": .int(Int64(transferred)),
                              "transferable": .int(Int64(transferable)), "estimate": .double(estimate)])
            case .open(let s):
                let keep = box.lock.withLock { () -> Bool in
                    if box.freed { return false }
                    box.session = s
                    return true
                }
                if !keep { s.release() }
                value = .doc(["state": .string("open")])
            case .error(let failure):
                let e: Error = failure
                var d: Document = ["state": .string("error")]
                if let e = e as? SyncError {
                    d["code"] = .string(e.code.rawValue)
                    d["status"] = .string(String(cString: atoll_status_name(syncStatus(e).rawValue)!))
                    d["message"] = .string(e.message)
                } else if let e = e as? AtollError {
                    d["status"] = .string(String(cString: atoll_status_name(e.code.rawValue)!))
                    d["message"] = .string(e.message)
                } else {
                    d["message"] = .string("\(e)")
                }
                value = .object(d)
            }
            let freed = box.lock.withLock { box.freed }
            if !freed { deliver(host, value) }
        }
        box.lock.withLock { box.task = task }
        return handles.insert(.sync(.asyncOpen(box)))
    }
    if result == nil { freeUserdata?(userdata) }
    return result
}

@_cdecl("atoll_async_open_take_realm")
public func atoll_async_open_take_realm(_ handle: OpaquePointer?) -> OpaquePointer? {
    abiCall(nil) {
        guard case .asyncOpen(let box) = try syncEntry(handle, "async open") else { throw AtollError(.invalidArgument, "not an async open handle") }
        let s = box.lock.withLock { () -> ClientSession? in
            guard !box.taken, let s = box.session else { return nil }
            box.taken = true
            box.session = nil
            return s
        }
        guard let s else { throw AtollError(.invalidArgument, "the realm is not open yet (wait for the \"open\" state), or was taken") }
        return try openHandle(box.configuration, s)
    }
}

@_cdecl("atoll_async_open_free")
public func atoll_async_open_free(_ handle: OpaquePointer?) {
    guard let handle, case .sync(.asyncOpen(let box))? = handles.get(handle) else { return }
    handles.replace(handle, with: nil)
    let (task, leftover) = box.lock.withLock { () -> (AsyncOpenTask?, ClientSession?) in
        box.freed = true
        defer { box.session = nil }
        return (box.task, box.session)
    }
    task?.cancel()
    leftover?.release()
    let release = box.lock.withLock { () -> (@Sendable () -> Void)? in
        defer { box.releaseUserdata = nil }
        return box.releaseUserdata
    }
    release?()
}

// MARK: - Subscriptions

@_cdecl("atoll_subscriptions_json")
public func atoll_subscriptions_json(_ realm: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let set = try realmSession(realm).subscriptions()
        return strdup(Wire.encode(.doc([
            "version": .int(set.version), "state": .string(set.state), "error": set.error.map { .string($0) } ?? .null,
            "subscriptions": .list(set.subscriptions.map { s in
                .doc(["name": .string(s.name), "class": .string(s.className), "query": .string(s.query), "args": .list(s.arguments)])
            }),
        ])))
    }
}

@_cdecl("atoll_subscriptions_update")
public func atoll_subscriptions_update(_ realm: OpaquePointer?, _ updateJSON: UnsafePointer<CChar>?,
                                       _ outVersion: UnsafeMutablePointer<UInt64>?) -> Bool {
    abiCall(false) {
        let s = try realmSession(realm)
        let u = try object(updateJSON, "update_json")
        for key in u.keys where !["add", "update", "remove", "removeClasses", "removeAll"].contains(key) {
            throw AtollError(.invalidArgument, "update_json: unknown key \"\(key)\"")
        }
        func list(_ k: String) throws -> [Value] {
            guard let v = u[k] else { return [] }
            guard case .list(let items) = v else { throw AtollError(.invalidArgument, "update_json: \"\(k)\" must be an array") }
            return items
        }
        let adds = try list("add").map { try subscription($0, "update_json.add") }
        let updates = try list("update")
        let removes = try list("remove").map { v -> String in
            guard case .string(let n) = v else { throw AtollError(.invalidArgument, "update_json: \"remove\" holds names") }
            return n
        }
        let removeClasses = try list("removeClasses").compactMap(\.stringValue)
        let removeAll = u["removeAll"] == .bool(true)
        let version = try s.updateSubscriptions { set in
            if removeAll { set.removeAll() }
            set.removeAll { removes.contains($0.name) || removeClasses.contains($0.className) }
            for item in updates {
                guard case .object(let d) = item, case .string(let name)? = d["name"] else {
                    throw AtollError(.invalidArgument, "update_json.update: each entry needs \"name\"")
                }
                guard let i = set.firstIndex(where: { $0.name == name }) else {
                    throw AtollError(.notFound, "no subscription named '\(name)' to update")
                }
                if case .string(let q)? = d["query"] { set[i].query = q }
                if case .list(let a)? = d["args"] { set[i].arguments = a }
            }
            for add in adds {
                if !add.name.isEmpty, set.contains(where: { $0.name == add.name }) {
                    throw AtollError(.subscriptionExists, "a subscription named '\(add.name)' exists already (update it instead)")
                }
                set.append(add)
            }
        }
        outVersion?.pointee = UInt64(max(0, version))
        return true
    }
}

@_cdecl("atoll_subscriptions_wait")
public func atoll_subscriptions_wait(_ realm: OpaquePointer?, _ version: UInt64, _ timeoutMs: Int32) -> Bool {
    abiCall(false) {
        try realmSession(realm).waitForSubscriptions(version: Int64(clamping: version), timeout: try milliseconds(timeoutMs, "timeout_ms"))
        return true
    }
}

// MARK: - Sessions

@_cdecl("atoll_realm_sync_session")
public func atoll_realm_sync_session(_ realm: OpaquePointer?) -> OpaquePointer? {
    abiCall(nil) { handles.insert(.sync(.session(try realmSession(realm)))) }
}

@_cdecl("atoll_sync_session_state_json")
public func atoll_sync_session_state_json(_ handle: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let s = try session(handle)
        return strdup(Wire.encode(.doc(["state": .string(s.state.rawValue), "connection": .string(s.connectionState.rawValue),
                                        "path": .string(s.path), "user": .string(s.user.id)])))
    }
}

@_cdecl("atoll_sync_session_pause")
public func atoll_sync_session_pause(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) { try session(handle).pause(); return true }
}

@_cdecl("atoll_sync_session_resume")
public func atoll_sync_session_resume(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) { try session(handle).resume(); return true }
}

@_cdecl("atoll_sync_session_reconnect")
public func atoll_sync_session_reconnect(_ handle: OpaquePointer?) -> Bool {
    abiCall(false) { try session(handle).reconnect(); return true }
}

@_cdecl("atoll_sync_session_wait_for_upload")
public func atoll_sync_session_wait_for_upload(_ handle: OpaquePointer?, _ timeoutMs: Int32) -> Bool {
    abiCall(false) { try session(handle).waitForUpload(timeout: try milliseconds(timeoutMs, "timeout_ms")); return true }
}

@_cdecl("atoll_sync_session_wait_for_download")
public func atoll_sync_session_wait_for_download(_ handle: OpaquePointer?, _ timeoutMs: Int32) -> Bool {
    abiCall(false) { try session(handle).waitForDownload(timeout: try milliseconds(timeoutMs, "timeout_ms")); return true }
}

@_cdecl("atoll_sync_session_observe")
public func atoll_sync_session_observe(_ handle: OpaquePointer?, _ fn: ChangesFunction?, _ userdata: UnsafeMutableRawPointer?,
                                       _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    let release = HostCallback(freeUserdata, userdata)
    let token: OpaquePointer? = abiCall(nil) {
        let s = try session(handle)
        guard let fn else { throw AtollError(.invalidArgument, "fn is NULL") }
        let host = HostCallback(fn, userdata)
        let t = NotificationToken()
        let id = s.observe { [weak t] event in
            let v: Value
            switch event {
            case .state(let st): v = .doc(["event": .string("state"), "state": .string(st.rawValue)])
            case .connection(let c): v = .doc(["event": .string("connection"), "connection": .string(c.rawValue)])
            case let .progress(direction, transferred, transferable, estimate):
                v = .doc(["event": .string("progress"), "direction": .string(direction), "transferred": .int(Int64(transferred)),
                          "transferable": .int(Int64(transferable)), "estimate": .double(estimate)])
            }
            t?.run { deliver(host, v) }
        }
        t.whenInvalidated { [weak s] in
            s?.removeObserver(id)
            release.function?(release.userdata)
        }
        return handles.insert(.token(t))
    }
    if token == nil { freeUserdata?(userdata) }
    return token
}

@_cdecl("atoll_sync_session_free")
public func atoll_sync_session_free(_ handle: OpaquePointer?) {
    guard let handle, case .sync(.session) = handles.get(handle) else { return }
    handles.replace(handle, with: nil)
}

// MARK: - Copies

@_cdecl("atoll_realm_write_copy_synced")
public func atoll_realm_write_copy_synced(_ realm: OpaquePointer?, _ configJSON: UnsafePointer<CChar>?, _ u: OpaquePointer?) -> Bool {
    abiCall(false) {
        let source = try realmStore(realm)
        if let u {
            // A local realm into a synced one: the objects are written anew, with the copy's
            // sync configuration (its subscriptions), and uploaded now if the server can be
            // reached within the timeout — else when the copy is next opened synced.
            let owner = try user(u)
            guard owner.isLoggedIn else { throw SyncError(.authFailed, "user \(owner.id) is not logged in") }
            let open = try syncedOpen(configJSON)
            try SyncCopy.copy(from: source, toSynced: open.store)
            let s = try ClientSession.open(user: owner, storeConfiguration: open.store, sync: open.sync)
            defer { s.release() }
            do { try s.waitForUpload(timeout: open.options.timeout) } catch let e as SyncError where e.code == .timeout {}
        } else {
            // Out as a local realm: the data without the sync metadata.
            guard let configJSON else { throw AtollError(.invalidArgument, "config_json is NULL") }
            try SyncCopy.copy(from: source, toLocal: try ConfigurationJSON.configuration(configJSON))
        }
        return true
    }
}
