import AtollJSON
import AtollStore
import CJansson

// atoll_realm_*: open, close, transactions, schema, versions and the change log.

@_cdecl("atoll_realm_open")
public func atoll_realm_open(_ config: UnsafePointer<CChar>?) -> OpaquePointer? {
    atoll_realm_open_with(config, nil)
}

@_cdecl("atoll_realm_close")
public func atoll_realm_close(_ realm: OpaquePointer?) {
    // Cannot fail, so it leaves the last error alone (see the header).
    guard let realm, case .realm(let s) = handles.get(realm) else { return }
    s.close()
    handles.replace(realm, with: .closedRealm)
    closeSynced(realm)
}

@_cdecl("atoll_realm_begin_write")
public func atoll_realm_begin_write(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) { try realmStore(realm).beginWrite(); return true }
}

@_cdecl("atoll_realm_commit")
public func atoll_realm_commit(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) { try realmStore(realm).commit(); return true }
}

@_cdecl("atoll_realm_cancel_write")
public func atoll_realm_cancel_write(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) { try realmStore(realm).cancelWrite(); return true }
}

@_cdecl("atoll_realm_is_in_write")
public func atoll_realm_is_in_write(_ realm: OpaquePointer?, _ out: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let s = try realmStore(realm)
        guard let out else { throw AtollError(.invalidArgument, "out_in_write is NULL") }
        guard !s.isClosed else { throw AtollError(.closed, "the realm is closed") }
        out.pointee = s.isInWrite
        return true
    }
}

@_cdecl("atoll_realm_schema")
public func atoll_realm_schema(_ realm: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let s = try realmStore(realm)
        return try s.withLock { try textResult(SchemaJSON.make(s.schema)) }
    }
}

@_cdecl("atoll_realm_schema_version")
public func atoll_realm_schema_version(_ realm: OpaquePointer?, _ out: UnsafeMutablePointer<UInt64>?) -> Bool {
    abiCall(false) {
        let s = try realmStore(realm)
        guard let out else { throw AtollError(.invalidArgument, "out_version is NULL") }
        out.pointee = try s.withLock { s.schemaVersion }
        return true
    }
}

@_cdecl("atoll_realm_version")
public func atoll_realm_version(_ realm: OpaquePointer?, _ out: UnsafeMutablePointer<UInt64>?) -> Bool {
    abiCall(false) {
        let s = try realmStore(realm)
        guard let out else { throw AtollError(.invalidArgument, "out_version is NULL") }
        out.pointee = try s.version()
        return true
    }
}

@_cdecl("atoll_realm_changes")
public func atoll_realm_changes(_ realm: OpaquePointer?, _ after: UInt64, _ maxEntries: UInt) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let sets = try realmStore(realm).changes(after: after, limit: maxEntries == 0 ? nil : Int(clamping: maxEntries))
        return try textResult(ChangeLogJSON.make(sets))
    }
}
