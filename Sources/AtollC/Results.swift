import AtollJSON
import AtollStore
import CJansson

// atoll_results_*: queries and reading their objects.

private func query(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ rql: UnsafePointer<CChar>?,
                   _ args: JSONRef?) throws -> OpaquePointer {
    let s = try realmStore(realm)
    let name = try textArgument(className, "class_name")
    let queryText = rql == nil ? "" : try textArgument(rql, "rql")
    var arguments = [Value]()
    if let args {
        guard case .list(let items) = try EJSON.value(args) else {
            throw AtollError(.invalidJSON, "args must be a JSON array, not \(EJSON.kind(args))")
        }
        arguments = items
    }
    var migrationRealm: UInt?
    if let realm, case .migratingRealm = handles.get(realm) { migrationRealm = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(realm))) }
    return handles.insert(.results(try s.objects(name, where: queryText, arguments), migrationRealm: migrationRealm))
}

@_cdecl("atoll_results_query")
public func atoll_results_query(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                _ rql: UnsafePointer<CChar>?, _ argsJSON: UnsafePointer<CChar>?) -> OpaquePointer? {
    abiCall(nil) {
        guard let argsJSON else { return try query(realm, className, rql, nil) }
        let args = try jsonArgument(argsJSON, "args_json")
        defer { json_decref(args) }
        return try query(realm, className, rql, args)
    }
}

@_cdecl("atoll_results_query_j")
public func atoll_results_query_j(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                  _ rql: UnsafePointer<CChar>?, _ args: JSONRef?) -> OpaquePointer? {
    abiCall(nil) { try query(realm, className, rql, args) }
}

@_cdecl("atoll_results_count")
public func atoll_results_count(_ handle: OpaquePointer?, _ out: UnsafeMutablePointer<Int>?) -> Bool {
    abiCall(false) {
        let r = try readableResults(handle)
        guard let out else { throw AtollError(.invalidArgument, "out_count is NULL") }
        out.pointee = try r.count()
        return true
    }
}

private func page(_ handle: OpaquePointer?, _ offset: Int, _ limit: Int) throws -> JSONRef {
    let r = try readableResults(handle)
    let docs = try r.documents(offset: offset, limit: limit == 0 ? nil : limit)
    let array = json_array()!
    for doc in docs { json_array_append_new(array, EJSON.make(doc)) }
    return array
}

@_cdecl("atoll_results_json")
public func atoll_results_json(_ handle: OpaquePointer?, _ offset: UInt, _ limit: UInt) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) { try textResult(try page(handle, Int(clamping: offset), Int(clamping: limit))) }
}

@_cdecl("atoll_results_json_j")
public func atoll_results_json_j(_ handle: OpaquePointer?, _ offset: UInt, _ limit: UInt) -> JSONRef? {
    abiCall(nil) { try page(handle, Int(clamping: offset), Int(clamping: limit)) }
}

@_cdecl("atoll_results_delete_all")
public func atoll_results_delete_all(_ handle: OpaquePointer?, _ out: UnsafeMutablePointer<Int>?) -> Bool {
    abiCall(false) {
        let n = try liveResults(handle).deleteAll()
        out?.pointee = n
        return true
    }
}

@_cdecl("atoll_results_free")
public func atoll_results_free(_ handle: OpaquePointer?) {
    // Cannot fail, so it leaves the last error alone (see the header).
    guard let handle else { return }
    switch handles.get(handle) {
    case .results, .frozenResults: handles.replace(handle, with: nil)
    default: return
    }
}
