import AtollJSON
import AtollStore
import CJansson

// atoll_object_* and atoll_objects_*: each in a text form and a jansson (_j) form; the text
// form parses and calls the jansson form's body.

private func create(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ object: JSONRef,
                    _ policy: Int32) throws -> JSONRef {
    let s = try realmStore(realm)
    let name = try textArgument(className, "class_name")
    let p = try updatePolicy(policy)
    let doc = try EJSON.document(object)
    return try s.withLock {
        let key = try s.create(name, doc, update: p)
        guard let stored = try s.object(name, key: key) else { throw AtollError(.internal, "the object just written is missing") }
        return EJSON.make(stored)
    }
}

@_cdecl("atoll_object_create")
public func atoll_object_create(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                _ objectJSON: UnsafePointer<CChar>?, _ policy: Int32) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let object = try jsonArgument(objectJSON, "object_json")
        defer { json_decref(object) }
        return try textResult(try create(realm, className, object, policy))
    }
}

@_cdecl("atoll_object_create_j")
public func atoll_object_create_j(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                  _ object: JSONRef?, _ policy: Int32) -> JSONRef? {
    abiCall(nil) {
        guard let object else { throw AtollError(.invalidArgument, "object is NULL") }
        return try create(realm, className, object, policy)
    }
}

private func createMany(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ array: JSONRef, _ policy: Int32,
                        _ out: UnsafeMutablePointer<Int>?) throws -> Bool {
    let s = try realmStore(realm)
    let name = try textArgument(className, "class_name")
    let p = try updatePolicy(policy)
    guard array.pointee.type == JSON_ARRAY else {
        throw AtollError(.invalidJSON, "array_json must be a JSON array of objects, not \(EJSON.kind(array))")
    }
    var docs = [Document]()
    docs.reserveCapacity(json_array_size(array))
    for i in 0..<json_array_size(array) {
        do { docs.append(try EJSON.document(json_array_get(array, i))) } catch let e as AtollError {
            throw e.prefixed("object \(i)")
        }
    }
    let n = try s.createMany(name, docs, update: p)
    out?.pointee = n
    return true
}

@_cdecl("atoll_objects_create_many")
public func atoll_objects_create_many(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                      _ arrayJSON: UnsafePointer<CChar>?, _ policy: Int32,
                                      _ out: UnsafeMutablePointer<Int>?) -> Bool {
    abiCall(false) {
        let array = try jsonArgument(arrayJSON, "array_json")
        defer { json_decref(array) }
        return try createMany(realm, className, array, policy, out)
    }
}

@_cdecl("atoll_objects_create_many_j")
public func atoll_objects_create_many_j(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                        _ array: JSONRef?, _ policy: Int32, _ out: UnsafeMutablePointer<Int>?) -> Bool {
    abiCall(false) {
        guard let array else { throw AtollError(.invalidArgument, "array is NULL") }
        return try createMany(realm, className, array, policy, out)
    }
}

private func get(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ key: JSONRef) throws -> JSONRef {
    let s = try realmStore(realm)
    let name = try textArgument(className, "class_name")
    let pk = try EJSON.value(key)
    guard let doc = try s.object(name, primaryKey: pk) else {
        throw AtollError(.notFound, "no object of class '\(name)' with primary key \(EJSON.dump(key))")
    }
    return EJSON.make(doc)
}

@_cdecl("atoll_object_get")
public func atoll_object_get(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                             _ keyJSON: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let key = try jsonArgument(keyJSON, "primary_key_json")
        defer { json_decref(key) }
        return try textResult(try get(realm, className, key))
    }
}

@_cdecl("atoll_object_get_j")
public func atoll_object_get_j(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ key: JSONRef?) -> JSONRef? {
    abiCall(nil) {
        guard let key else { throw AtollError(.invalidArgument, "primary_key is NULL") }
        return try get(realm, className, key)
    }
}

private func delete(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ key: JSONRef) throws -> Bool {
    let s = try realmStore(realm)
    try s.delete(try textArgument(className, "class_name"), primaryKey: try EJSON.value(key))
    return true
}

@_cdecl("atoll_object_delete")
public func atoll_object_delete(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                _ keyJSON: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let key = try jsonArgument(keyJSON, "primary_key_json")
        defer { json_decref(key) }
        return try delete(realm, className, key)
    }
}

@_cdecl("atoll_object_delete_j")
public func atoll_object_delete_j(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ key: JSONRef?) -> Bool {
    abiCall(false) {
        guard let key else { throw AtollError(.invalidArgument, "primary_key is NULL") }
        return try delete(realm, className, key)
    }
}
