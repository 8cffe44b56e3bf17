import AtollJSON
import AtollStore

// atoll_realm_open_with, atoll_realm_write_copy*, atoll_realm_compact,
// atoll_realm_file_exists, atoll_realm_delete_files: a realm's files.

/// `atoll_should_compact_fn`.
typealias ShouldCompactFunction = @convention(c) (UInt64, UInt64, UnsafeMutableRawPointer?) -> Bool

/// The C layout of `atoll_open_options_t`. Fields are only ever added at the end; `size` says
/// how many the host's header had.
struct OpenOptions {
    var size: Int
    var shouldCompact: ShouldCompactFunction?
    var shouldCompactUserdata: UnsafeMutableRawPointer?
    var migration: MigrationFunction?
    var migrationUserdata: UnsafeMutableRawPointer?

    /// The size of the first version of the struct (size and the should-compact fields).
    static let firstVersionSize = MemoryLayout<Int>.stride + 2 * MemoryLayout<UnsafeRawPointer>.stride
}

/// A configuration JSON argument.
private func configuration(_ p: UnsafePointer<CChar>?) throws -> Configuration {
    guard let p else { throw AtollError(.invalidArgument, "config_json is NULL") }
    return try ConfigurationJSON.configuration(p)
}

@_cdecl("atoll_realm_open_with")
public func atoll_realm_open_with(_ config: UnsafePointer<CChar>?, _ options: UnsafeRawPointer?) -> OpaquePointer? {
    abiCall(nil) {
        var configuration = try configuration(config)
        if let options {
            // `size` must cover every field read below and no more than this library knows.
            let size = options.load(as: Int.self)
            let minimum = OpenOptions.firstVersionSize
            let maximum = MemoryLayout<OpenOptions>.size
            guard size == minimum || size == maximum else {
                throw AtollError(.invalidArgument, "options->size must be sizeof(atoll_open_options_t) "
                    + "(\(maximum) for this library, or \(minimum) for hosts built with its first version), not \(size)")
            }
            // Fields past the host's size are not read: they are not there.
            var read = OpenOptions(size: size, shouldCompact: nil, shouldCompactUserdata: nil, migration: nil, migrationUserdata: nil)
            withUnsafeMutableBytes(of: &read) { $0.copyMemory(from: UnsafeRawBufferPointer(start: options, count: size)) }
            if let function = read.shouldCompact {
                let callback = HostCallback(function, read.shouldCompactUserdata)
                configuration.shouldCompactOnLaunch = { total, used in callback.function(total, used, callback.userdata) }
            }
            if let function = read.migration {
                configuration.migration = migrationCallback(function, read.migrationUserdata)
            }
        }
        let store = try Store(configuration)
        return handles.insert(.realm(store))
    }
}

@_cdecl("atoll_realm_write_copy")
public func atoll_realm_write_copy(_ realm: OpaquePointer?, _ path: UnsafePointer<CChar>?, _ compact: Bool) -> Bool {
    abiCall(false) {
        let s = try realmStore(realm)
        try s.writeCopy(to: try textArgument(path, "path"), compact: compact)
        return true
    }
}

@_cdecl("atoll_realm_write_copy_to")
public func atoll_realm_write_copy_to(_ realm: OpaquePointer?, _ config: UnsafePointer<CChar>?) -> Bool {
    abiCall(false) {
        let s = try realmStore(realm)
        try s.writeCopy(to: try configuration(config))
        return true
    }
}

@_cdecl("atoll_realm_compact")
public func atoll_realm_compact(_ realm: OpaquePointer?) -> Bool {
    abiCall(false) { try realmStore(realm).compact(); return true }
}

@_cdecl("atoll_realm_file_exists")
public func atoll_realm_file_exists(_ config: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let c = try configuration(config)
        guard let out else { throw AtollError(.invalidArgument, "out_exists is NULL") }
        out.pointee = try Store.fileExists(c)
        return true
    }
}

@_cdecl("atoll_realm_delete_files")
public func atoll_realm_delete_files(_ config: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Bool>?) -> Bool {
    abiCall(false) {
        let deleted = try Store.deleteFiles(try configuration(config))
        out?.pointee = deleted
        return true
    }
}
