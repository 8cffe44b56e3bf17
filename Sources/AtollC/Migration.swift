import AtollJSON
import AtollStore
import CJansson

// atoll_migration_*: what a migration callback (atoll_open_options_t.migration) calls.

/// `atoll_migration_fn`.
typealias MigrationFunction = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Bool

/// The host's callback as a Swift migration: it gets a migration handle and a realm handle
/// that live for the call; returning false fails the migration with the callback's last error.
func migrationCallback(_ function: MigrationFunction, _ userdata: UnsafeMutableRawPointer?) -> @Sendable (Migration) throws -> Void {
    let host = HostCallback(function, userdata)
    return { migration in
        let realm = handles.insert(.migratingRealm(migration.realm))
        let handle = handles.insert(.migration(migration, realm: UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(realm)))))
        defer {
            handles.replace(handle, with: .endedMigration)
            handles.replace(realm, with: .closedRealm)
        }
        errorSlot.clear()
        if host.function(handle, host.userdata) { return }
        let slot = errorSlot
        let reason = slot.code != 0 ? String(cString: slot.message) : "the migration callback returned false"
        throw AtollError(.migration, reason)
    }
}

private func migration(_ handle: OpaquePointer?) throws -> Migration { try migrationEntry(handle).migration }

private func migrationEntry(_ handle: OpaquePointer?) throws -> (migration: Migration, realm: UInt) {
    guard let handle else { throw AtollError(.invalidArgument, "migration is NULL") }
    switch handles.get(handle) {
    case .migration(let m, let realm): return (m, realm)
    case .endedMigration: throw AtollError(.closed, "the migration is over: its handle is valid only during the callback")
    default: throw AtollError(.invalidArgument, "not a migration handle")
    }
}

@_cdecl("atoll_migration_realm")
public func atoll_migration_realm(_ m: OpaquePointer?) -> OpaquePointer? {
    abiCall(nil) { OpaquePointer(bitPattern: try migrationEntry(m).realm) }
}

@_cdecl("atoll_migration_old_schema")
public func atoll_migration_old_schema(_ m: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) { try textResult(SchemaJSON.make(try migration(m).oldSchema)) }
}

@_cdecl("atoll_migration_new_schema")
public func atoll_migration_new_schema(_ m: OpaquePointer?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) { try textResult(SchemaJSON.make(try migration(m).newSchema)) }
}

@_cdecl("atoll_migration_versions")
public func atoll_migration_versions(_ m: OpaquePointer?, _ oldVersion: UnsafeMutablePointer<UInt64>?,
                                     _ newVersion: UnsafeMutablePointer<UInt64>?) -> Bool {
    abiCall(false) {
        let mig = try migration(m)
        oldVersion?.pointee = mig.oldSchemaVersion
        newVersion?.pointee = mig.newSchemaVersion
        return true
    }
}

@_cdecl("atoll_migration_old_objects")
public func atoll_migration_old_objects(_ m: OpaquePointer?, _ className: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? {
    abiCall(nil) {
        let objects = try migration(m).oldObjects(try textArgument(className, "class_name"))
        let array = json_array()!
        for (key, object) in objects {
            let entry = json_object()!
            json_object_set_new(entry, "key", json_integer(json_int_t(key.rawValue)))
            json_object_set_new(entry, "object", EJSON.make(object))
            json_array_append_new(array, entry)
        }
        return try textResult(array)
    }
}

@_cdecl("atoll_migration_set")
public func atoll_migration_set(_ m: OpaquePointer?, _ className: UnsafePointer<CChar>?, _ key: Int64,
                                _ valuesJSON: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let mig = try migration(m)
        let name = try textArgument(className, "class_name")
        let values = try jsonArgument(valuesJSON, "values_json")
        defer { json_decref(values) }
        try mig.set(name, key: ObjectKey(key), try EJSON.document(values))
        return true
    }
}

@_cdecl("atoll_migration_rename_property")
public func atoll_migration_rename_property(_ m: OpaquePointer?, _ className: UnsafePointer<CChar>?,
                                            _ from: UnsafePointer<CChar>?, _ to: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        try migration(m).renameProperty(try textArgument(className, "class_name"), from: try textArgument(from, "from"), to: try textArgument(to, "to"))
        return true
    }
}

@_cdecl("atoll_migration_delete_data")
public func atoll_migration_delete_data(_ m: OpaquePointer?, _ className: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        try migration(m).deleteData(try textArgument(className, "class_name"))
        return true
    }
}
