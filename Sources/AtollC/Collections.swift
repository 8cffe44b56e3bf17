import AtollJSON
import AtollStore
import CJansson

// atoll_list_*, atoll_set_*, atoll_dictionary_*: element operations on collection properties.

/// The object and property an element operation addresses, with its JSON value (if any).
private func target(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                    _ property: UnsafePointer<CChar>?) throws -> (Store, String, Value, String) {
    let s = try realmStore(realm)
    let name = try textArgument(className, "class_name")
    let pk = try valueArgument(primaryKeyJSON, "primary_key_json")
    return (s, name, pk, try textArgument(property, "property"))
}

private func element(_ valueJSON: UnsafePointer<CChar>?) throws -> Value {
    try valueArgument(valueJSON, "value_json")
}

private func report(_ out: UnsafeMutablePointer<Bool>?, _ value: Bool) -> Bool {
    out?.pointee = value
    return true
}

@_cdecl("atoll_list_insert")
public func atoll_list_insert(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                              _ property: UnsafePointer<CChar>?, _ index: Int, _ valueJSON: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.listInsert(name, primaryKey: pk, property: prop, try element(valueJSON), at: index)
        return true
    }
}

@_cdecl("atoll_list_set")
public func atoll_list_set(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                           _ property: UnsafePointer<CChar>?, _ index: Int, _ valueJSON: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.listSet(name, primaryKey: pk, property: prop, try element(valueJSON), at: index)
        return true
    }
}

@_cdecl("atoll_list_erase")
public func atoll_list_erase(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                             _ property: UnsafePointer<CChar>?, _ index: Int) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.listErase(name, primaryKey: pk, property: prop, at: index)
        return true
    }
}

@_cdecl("atoll_list_move")
public func atoll_list_move(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                            _ property: UnsafePointer<CChar>?, _ from: Int, _ to: Int) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.listMove(name, primaryKey: pk, property: prop, from: from, to: to)
        return true
    }
}

@_cdecl("atoll_set_insert")
public func atoll_set_insert(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                             _ property: UnsafePointer<CChar>?, _ valueJSON: UnsafePointer<CChar>?,
                             _ outInserted: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        return report(outInserted, try s.setInsert(name, primaryKey: pk, property: prop, try element(valueJSON)))
    }
}

@_cdecl("atoll_set_erase")
public func atoll_set_erase(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                            _ property: UnsafePointer<CChar>?, _ valueJSON: UnsafePointer<CChar>?,
                            _ outErased: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        return report(outErased, try s.setErase(name, primaryKey: pk, property: prop, try element(valueJSON)))
    }
}

@_cdecl("atoll_dictionary_set")
public func atoll_dictionary_set(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                                 _ property: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?,
                                 _ valueJSON: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.dictionarySet(name, primaryKey: pk, property: prop, key: try textArgument(key, "key"), try element(valueJSON))
        return true
    }
}

@_cdecl("atoll_dictionary_erase")
public func atoll_dictionary_erase(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                                   _ property: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?,
                                   _ outErased: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        return report(outErased, try s.dictionaryErase(name, primaryKey: pk, property: prop, key: try textArgument(key, "key")))
    }
}

@_cdecl("atoll_object_add_integer")
public func atoll_object_add_integer(_ realm: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ primaryKeyJSON: UnsafePointer<CChar>?,
                                     _ property: UnsafePointer<CChar>?, _ delta: Int64) -> Bool {
    abiCall(false) {
        let (s, name, pk, prop) = try target(realm, className, primaryKeyJSON, property)
        try s.addInteger(name, primaryKey: pk, property: prop, delta)
        return true
    }
}
