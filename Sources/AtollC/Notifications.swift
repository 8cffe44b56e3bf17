import AtollJSON
import AtollStore
import CJansson

// atoll_*_observe, atoll_token_free, refresh, host-driven delivery, frozen results.

/// A host's change callback: `fn(userdata, changes_json)` with the JSON text borrowed for the
/// call; `free_userdata(userdata)` once after the last call.
public typealias ChangesFunction = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void
public typealias FreeUserdataFunction = @convention(c) (UnsafeMutableRawPointer?) -> Void

/// Calls the host's function with a change's JSON text.
private func deliver(_ host: HostCallback<ChangesFunction>, _ json: JSONRef) {
    defer { json_decref(json) }
    guard let text = EJSON.dumpC(json) else { return }
    defer { free(text) }
    host.function(host.userdata, text)
}

/// Parses an optional JSON array of key paths.
private func keyPaths(_ p: UnsafePointer<CChar>?) throws -> [String]? {
    guard let p else { return nil }
    let value = try jsonArgument(p, "key_paths_json")
    defer { json_decref(value) }
    guard value.pointee.type == JSON_ARRAY else {
        throw AtollError(.invalidArgument, "key_paths_json must be a JSON array of strings (or NULL)")
    }
    var paths = [String]()
    for i in 0..<json_array_size(value) {
        guard let item = json_array_get(value, i), case .string(let path) = try EJSON.value(item) else {
            throw AtollError(.invalidArgument, "key_paths_json must be a JSON array of strings; item \(i) is not a string")
        }
        paths.append(path)
    }
    return paths
}

/// Registers through `register` and wraps the token in a handle; `free_userdata` runs when the
/// token is freed (or at once, when registering fails).
private func observe(_ fn: ChangesFunction?, _ userdata: UnsafeMutableRawPointer?, _ freeUserdata: FreeUserdataFunction?,
                     _ register: (HostCallback<ChangesFunction>) throws -> NotificationToken) -> OpaquePointer? {
    let release = HostCallback(freeUserdata, userdata)
    let token: OpaquePointer? = abiCall(nil) {
        guard let fn else { throw AtollError(.invalidArgument, "fn is NULL") }
        let t = try register(HostCallback(fn, userdata))
        t.whenInvalidated { release.function?(release.userdata) }
        return handles.insert(.token(t))
    }
    if token == nil { freeUserdata?(userdata) }
    return token
}

@_cdecl("atoll_results_observe")
public func atoll_results_observe(_ handle: OpaquePointer?, _ keyPathsJSON: UnsafePointer<CChar>?, _ fn: ChangesFunction?,
                                  _ userdata: UnsafeMutableRawPointer?, _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    observe(fn, userdata, freeUserdata) { host in
        let r = try liveResults(handle)
        return try r.observe(keyPaths: try keyPaths(keyPathsJSON)) { deliver(host, ChangesJSON.make($0)) }
    }
}

@_cdecl("atoll_object_observe")
public func atoll_object_observe(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                                 _ keyPathsJSON: UnsafePointer<CChar>?, _ fn: ChangesFunction?,
                                 _ userdata: UnsafeMutableRawPointer?, _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    observe(fn, userdata, freeUserdata) { host in
        let s = try realmStore(realm)
        let name = try textArgument(className, "class_name")
        let pk = try valueArgument(primaryKeyJSON, "primary_key_json")
        return try s.observeObject(name, primaryKey: pk, keyPaths: try keyPaths(keyPathsJSON)) { deliver(host, ChangesJSON.make($0)) }
    }
}

@_cdecl("atoll_collection_observe")
public func atoll_collection_observe(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                                     _ property: UnsafePointer<CChar>?, _ keyPathsJSON: UnsafePointer<CChar>?, _ fn: ChangesFunction?,
                                     _ userdata: UnsafeMutableRawPointer?, _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    observe(fn, userdata, freeUserdata) { host in
        let s = try realmStore(realm)
        let name = try textArgument(className, "class_name")
        let pk = try valueArgument(primaryKeyJSON, "primary_key_json")
        let prop = try textArgument(property, "property")
        return try s.observeCollection(name, primaryKey: pk, property: prop, keyPaths: try keyPaths(keyPathsJSON)) {
            deliver(host, ChangesJSON.make($0))
        }
    }
}

@_cdecl("atoll_realm_observe")
public func atoll_realm_observe(_ realm: OpaquePointer?, _ fn: ChangesFunction?, _ userdata: UnsafeMutableRawPointer?,
                                _ freeUserdata: FreeUserdataFunction?) -> OpaquePointer? {
    observe(fn, userdata, freeUserdata) { host in
        try realmStore(realm).observe { deliver(host, ChangesJSON.make($0)) }
    }
}

@_cdecl("atoll_token_free")
public func atoll_token_free(_ token: OpaquePointer?) {
    // Cannot fail, so it leaves the last error alone (see the header).
    guard let token, case .token(let t) = handles.get(token) else { return }
    handles.replace(token, with: nil)
    t.invalidate()
}

@_cdecl("atoll_realm_refresh")
public func atoll_realm_refresh(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) {
        _ = try realmStore(realm).refresh()
        return true
    }
}

@_cdecl("atoll_realm_notification_fd")
public func atoll_realm_notification_fd(_ realm: OpaquePointer?) -> Int32 {
    abiCall(-1) { try realmStore(realm).notificationDescriptor() }
}

@_cdecl("atoll_realm_deliver_notifications")
public func atoll_realm_deliver_notifications(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) {
        try realmStore(realm).deliverNotifications()
        return true
    }
}

@_cdecl("atoll_results_freeze")
public func atoll_results_freeze(_ handle: OpaquePointer?) -> OpaquePointer? {
    abiCall(nil) {
        if let handle, case .frozenResults(let frozen) = handles.get(handle) { return handles.insert(.frozenResults(frozen)) }
        return handles.insert(.frozenResults(try liveResults(handle).freeze()))
    }
}
