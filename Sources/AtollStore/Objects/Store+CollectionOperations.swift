// Element operations on lists, sets and dictionaries (Realm's `List.insert/remove/move`,
// `MutableSet.insert/remove`, `Map[key] = value`), each recorded as its own instruction so that
// observers and sync see what happened to which element.
//
// A list's side-table rows keep positions 0..<count. Shifting a run of positions takes two
// updates through negative numbers, because (owner, position) is the table's primary key and
// SQLite checks it row by row.

extension Store {
    /// Inserts `value` into a list property at `index` (0...count).
    /// - Throws: `.notInWrite`, `.noSuchClass`, `.noSuchProperty`, `.notFound` (the object),
    ///   `.invalidArgument` (not a list, an index out of range), `.typeMismatch`, `.missingValue`.
    public func listInsert(_ className: String, primaryKey: Value, property: String, _ value: Value, at index: Int) throws {
        try collectionOperation("listInsert", className, primaryKey, property, .list) { info, p, owner, ref, conn, rec in
            let count = try collectionCount(info, p, owner, conn)
            try checkIndex(index, 0..<(count + 1), info, p)
            let stored = try resolveElement(p, value, info, conn, rec)
            try shift(info, p, owner, from: index, by: 1, conn)
            try insertCollection(info, p, owner, [CollectionItem(key: nil, stored: stored)], conn, firstPosition: index)
            rec.record(Instruction(.listInsert, info.name, ref, path: [.key(p.name)], value: stored.canonical, index: index))
        }
    }

    /// Replaces the element of a list property at `index` (0..<count).
    public func listSet(_ className: String, primaryKey: Value, property: String, _ value: Value, at index: Int) throws {
        try collectionOperation("listSet", className, primaryKey, property, .list) { info, p, owner, ref, conn, rec in
            try checkIndex(index, 0..<(try collectionCount(info, p, owner, conn)), info, p)
            try eraseOwnedElement(info, p, owner, "position", .integer(Int64(index)), conn)
            let stored = try resolveElement(p, value, info, conn, rec)
            try updateElement(info, p, owner, "position", .integer(Int64(index)), stored, conn)
            rec.record(Instruction(.listSet, info.name, ref, path: [.key(p.name)], value: stored.canonical, index: index))
        }
    }

    /// Removes the element of a list property at `index` (0..<count).
    public func listErase(_ className: String, primaryKey: Value, property: String, at index: Int) throws {
        try collectionOperation("listErase", className, primaryKey, property, .list) { info, p, owner, ref, conn, rec in
            let count = try collectionCount(info, p, owner, conn)
            try checkIndex(index, 0..<count, info, p)
            try removeElement(info, p, owner, at: index, conn)
            rec.record(Instruction(.listErase, info.name, ref, path: [.key(p.name)], index: index))
        }
    }

    /// Moves the element of a list property at `from` to `to` (both 0..<count).
    public func listMove(_ className: String, primaryKey: Value, property: String, from: Int, to: Int) throws {
        try collectionOperation("listMove", className, primaryKey, property, .list) { info, p, owner, ref, conn, rec in
            let count = try collectionCount(info, p, owner, conn)
            try checkIndex(from, 0..<count, info, p)
            try checkIndex(to, 0..<count, info, p)
            guard from != to else { return }
            // The moved value travels with the instruction (sync sends a move as erase + insert).
            var moved = Value.null
            if case .list(let items) = try readCollection(info, p, owner, conn), items.indices.contains(from) { moved = items[from] }
            let s = try conn.statement("UPDATE \(info.listTable(p)) SET position = -1 WHERE owner = ? AND position = ?")
            s.bind(1, owner)
            s.bind(2, Int64(from))
            try s.run()
            if from < to {
                try shift(info, p, owner, from: from + 1, through: to, by: -1, conn)
            } else {
                try shift(info, p, owner, from: to, through: from - 1, by: 1, conn)
            }
            let put = try conn.statement("UPDATE \(info.listTable(p)) SET position = ? WHERE owner = ? AND position = -1")
            put.bind(1, Int64(to))
            put.bind(2, owner)
            try put.run()
            rec.record(Instruction(.listMove, info.name, ref, path: [.key(p.name)], value: moved, index: from, toIndex: to))
        }
    }

    /// Adds `value` to a set property, unless an equal element is in it.
    /// - Returns: whether it was added.
    @discardableResult
    public func setInsert(_ className: String, primaryKey: Value, property: String, _ value: Value) throws -> Bool {
        try collectionOperation("setInsert", className, primaryKey, property, .set) { info, p, owner, ref, conn, rec in
            let stored = try resolveElement(p, value, info, conn, rec)
            guard try elementPosition(info, p, owner, stored, conn) == nil else { return false }
            let count = try collectionCount(info, p, owner, conn)
            try insertCollection(info, p, owner, [CollectionItem(key: nil, stored: stored)], conn, firstPosition: count)
            rec.record(Instruction(.setInsert, info.name, ref, path: [.key(p.name)], value: stored.canonical))
            return true
        }
    }

    /// Removes the element equal to `value` from a set property.
    /// - Returns: whether there was one. A link to an object that does not exist is in no set;
    ///   a linked object given whole is looked up by its primary key (never created).
    @discardableResult
    public func setErase(_ className: String, primaryKey: Value, property: String, _ value: Value) throws -> Bool {
        try collectionOperation("setErase", className, primaryKey, property, .set) { info, p, owner, ref, conn, rec in
            var value = value
            // A linked object given whole is looked up by its primary key, never created.
            if p.type == .object, case .object(let doc) = value, let target = classInfo(ifExists: p.objectType ?? ""),
               let pk = target.primaryKey {
                value = doc[pk.name] ?? .null
            }
            let stored: Stored
            do {
                stored = try resolveElement(p, value, info, conn, rec)
            } catch let e as AtollError where e.code == .notFound {
                return false
            }
            guard let position = try elementPosition(info, p, owner, stored, conn) else { return false }
            try removeElement(info, p, owner, at: position, conn)
            rec.record(Instruction(.setErase, info.name, ref, path: [.key(p.name)], value: stored.canonical))
            return true
        }
    }

    /// Sets `key` of a dictionary property to `value` (adding the key or replacing its value).
    public func dictionarySet(_ className: String, primaryKey: Value, property: String, key: String, _ value: Value) throws {
        try collectionOperation("dictionarySet", className, primaryKey, property, .dictionary) { info, p, owner, ref, conn, rec in
            try checkDictionaryKey(key, "property '\(info.name).\(p.name)'")
            let existed = try eraseOwnedElement(info, p, owner, "key", .text(key), conn)
            let stored = try resolveElement(p, value, info, conn, rec)
            if existed {
                try updateElement(info, p, owner, "key", .text(key), stored, conn)
            } else {
                try insertCollection(info, p, owner, [CollectionItem(key: key, stored: stored)], conn)
            }
            rec.record(Instruction(.dictionarySet, info.name, ref, path: [.key(p.name), .key(key)], value: stored.canonical))
        }
    }

    /// Removes `key` from a dictionary property.
    /// - Returns: whether it was there.
    @discardableResult
    public func dictionaryErase(_ className: String, primaryKey: Value, property: String, key: String) throws -> Bool {
        try collectionOperation("dictionaryErase", className, primaryKey, property, .dictionary) { info, p, owner, ref, conn, rec in
            try checkDictionaryKey(key, "property '\(info.name).\(p.name)'")
            guard try eraseOwnedElement(info, p, owner, "key", .text(key), conn) else { return false }
            let s = try conn.statement("DELETE FROM \(info.listTable(p)) WHERE owner = ? AND key = ?")
            s.bind(1, owner)
            s.bind(2, key)
            try s.run()
            rec.record(Instruction(.dictionaryErase, info.name, ref, path: [.key(p.name), .key(key)]))
            return true
        }
    }

    // MARK: - Counters

    /// Adds `delta` to an integer property (a counter): recorded as `addInteger`, so that sync
    /// adds concurrent increments up instead of keeping the last.
    /// - Throws: `.notInWrite`, `.noSuchClass`, `.noSuchProperty`, `.notFound` (the object),
    ///   `.invalidArgument` (not an int property, or one that is null), `.typeMismatch` (the key).
    public func addInteger(_ className: String, primaryKey: Value, property: String, _ delta: Int64) throws {
        try writeOperation("addInteger", multiStatement: false) { conn, state in
            let info = try classInfo(className)
            guard let p = info.schema[property: property] else {
                throw AtollError(.noSuchProperty, "class '\(className)' has no property '\(property)'")
            }
            guard p.type == .int, p.collection == .single, info.primaryKey?.name != property else {
                throw AtollError(.invalidArgument, "addInteger: '\(className).\(property)' is not an int property (it is \(p.typeName))")
            }
            guard !info.schema.isEmbedded else {
                throw AtollError(.invalidArgument, "addInteger: '\(className)' is embedded; change its owner")
            }
            guard let row = try rowKey(info, named: primaryKey, conn) else {
                throw AtollError(.notFound, "addInteger: no \(className) with primary key \(primaryKey.shortDescription)")
            }
            let read = try conn.statement("SELECT \(quote(p.name)) FROM \(info.table) WHERE \(info.rowKey) = ?")
            read.bind(1, row)
            guard try read.step(), !read.isNull(0) else {
                read.reset()
                throw AtollError(.invalidArgument, "addInteger: '\(className).\(property)' is null; set it first")
            }
            let (sum, overflow) = read.int64(0).addingReportingOverflow(delta)
            read.reset()
            guard !overflow else { throw AtollError(.invalidArgument, "addInteger: \(className).\(property) would overflow") }
            let write = try conn.statement("UPDATE \(info.table) SET \(quote(p.name)) = ? WHERE \(info.rowKey) = ?")
            write.bind(1, sum)
            write.bind(2, row)
            try write.run()
            state.recorder.record(Instruction(.addInteger, info.name, try reference(info, row, conn), path: [.key(p.name)], value: .int(delta)))
        }
    }

    // MARK: - Helpers

    /// Runs one collection operation atomically on the collection property of an object.
    private func collectionOperation<T>(_ name: String, _ className: String, _ primaryKey: Value, _ property: String,
                                        _ kind: CollectionKind,
                                        _ body: (ClassInfo, Property, Int64, Value, Connection, ChangeRecorder) throws -> T) throws -> T {
        try writeOperation(name) { conn, state in
            let info = try classInfo(className)
            guard let p = info.schema[property: property] else {
                throw AtollError(.noSuchProperty, "class '\(className)' has no property '\(property)'")
            }
            guard p.collection == kind, !p.isComputed else {
                throw AtollError(.invalidArgument, "\(name): '\(className).\(property)' is not a \(kind.rawValue) (it is \(p.typeName))")
            }
            guard !info.schema.isEmbedded else {
                throw AtollError(.invalidArgument, "\(name): '\(className)' is embedded; change its owner")
            }
            guard let owner = try rowKey(info, named: primaryKey, conn) else { throw AtollError(.notFound, "\(name): no \(className) with primary key \(primaryKey.shortDescription)") }
            return try body(info, p, owner, try reference(info, owner, conn), conn, state.recorder)
        }
    }

    private func checkIndex(_ index: Int, _ range: Range<Int>, _ info: ClassInfo, _ p: Property) throws {
        guard range.contains(index) else {
            let size = range.isEmpty ? "it is empty" : "valid indexes are \(range.lowerBound)...\(range.upperBound - 1)"
            throw AtollError(.invalidArgument, "index \(index) is out of range for '\(info.name).\(p.name)' (\(size))")
        }
    }

    /// One element resolved for storage (an embedded object is written; a linked object given
    /// whole is created, failing if its primary key exists).
    private func resolveElement(_ p: Property, _ value: Value, _ info: ClassInfo, _ conn: Connection,
                                _ rec: ChangeRecorder) throws -> Stored {
        if case .list = value, p.type != .mixed {
            throw AtollError(.typeMismatch, "property '\(info.name).\(p.name)' holds \(p.typeName); a list cannot be an element")
        }
        return try resolve(p, value, info, .error, conn, rec)
    }

    func collectionCount(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws -> Int {
        let s = try conn.statement("SELECT count(*) FROM \(info.listTable(p)) WHERE owner = ?")
        s.bind(1, owner)
        defer { s.reset() }
        _ = try s.step()
        return Int(s.int64(0))
    }

    /// Adds `by` to the positions in `from...through` (to the end when nil).
    private func shift(_ info: ClassInfo, _ p: Property, _ owner: Int64, from: Int, through: Int? = nil, by delta: Int,
                       _ conn: Connection) throws {
        let table = info.listTable(p)
        let first = try conn.statement("UPDATE \(table) SET position = -(position + ?3) - 2 WHERE owner = ?1 AND position >= ?2 AND position <= ?4")
        first.bind(1, owner)
        first.bind(2, Int64(from))
        first.bind(3, Int64(delta))
        first.bind(4, Int64(through ?? Int.max))
        try first.run()
        let second = try conn.statement("UPDATE \(table) SET position = -position - 2 WHERE owner = ? AND position <= -2")
        second.bind(1, owner)
        try second.run()
    }

    /// Removes the list or set element at `position` (with the embedded object it owns) and
    /// closes the gap.
    private func removeElement(_ info: ClassInfo, _ p: Property, _ owner: Int64, at position: Int, _ conn: Connection) throws {
        try eraseOwnedElement(info, p, owner, "position", .integer(Int64(position)), conn)
        let s = try conn.statement("DELETE FROM \(info.listTable(p)) WHERE owner = ? AND position = ?")
        s.bind(1, owner)
        s.bind(2, Int64(position))
        try s.run()
        try shift(info, p, owner, from: position + 1, by: -1, conn)
    }

    /// Erases the embedded object an element owns (for collections of embedded objects).
    /// - Returns: whether the element exists.
    @discardableResult
    private func eraseOwnedElement(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ keyColumn: String, _ key: SQLValue,
                                   _ conn: Connection) throws -> Bool {
        let s = try conn.statement("SELECT value FROM \(info.listTable(p)) WHERE owner = ? AND \(keyColumn) = ?")
        s.bind(1, owner)
        s.bind(2, key)
        guard try s.step() else {
            s.reset()
            return false
        }
        let old = s.isNull(0) ? nil : s.int64(0)
        s.reset()
        if let target = embeddedTarget(p), let old { try eraseRow(target, old, conn) }
        return true
    }

    /// Stores a new value for an existing element.
    private func updateElement(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ keyColumn: String, _ key: SQLValue,
                               _ stored: Stored, _ conn: Connection) throws {
        let mixed = p.type == .mixed
        let s = try conn.statement("UPDATE \(info.listTable(p)) SET value = ?3\(mixed ? ", type = ?4" : "") WHERE owner = ?1 AND \(keyColumn) = ?2")
        s.bind(1, owner)
        s.bind(2, key)
        s.bind(3, stored.sql)
        if mixed { s.bind(4, stored.type) }
        try s.run()
    }

    /// The position of the set element stored as `stored` (nil when absent).
    private func elementPosition(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ stored: Stored,
                                 _ conn: Connection) throws -> Int? {
        let mixed = p.type == .mixed
        let s = try conn.statement("SELECT position FROM \(info.listTable(p)) WHERE owner = ?1 AND value IS ?2\(mixed ? " AND type IS ?3" : "")")
        s.bind(1, owner)
        s.bind(2, stored.sql)
        if mixed { s.bind(3, stored.type) }
        defer { s.reset() }
        return try s.step() ? Int(s.int64(0)) : nil
    }
}
