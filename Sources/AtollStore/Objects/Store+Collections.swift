// Lists, sets and dictionaries: their side tables, written whole and read whole (element
// operations are in Store+CollectionOperations.swift).
//
// A list or set property `Class.p` lives in the table `"Class.p"` of (owner, position, value),
// a dictionary in `"Class.p"` of (owner, key, value); collections of mixed values have a `type`
// column as well (see Store+Mixed.swift). A set keeps the first of equal elements, in the order
// given; a dictionary's entries read in key order.

/// One element of a collection being written: its key (dictionaries) and its stored value.
struct CollectionItem: Equatable {
    var key: String?
    var stored: Stored
}

/// One stored row of a collection.
struct CollectionRow: Equatable {
    var key: String?
    var sql: SQLValue
    var type: SQLValue
}

extension Store {
    /// The elements of a collection property's new value, resolved: a list or set is given as
    /// a list, a dictionary as an object.
    func resolveCollection(_ p: Property, _ raw: Value, _ info: ClassInfo, _ policy: UpdatePolicy,
                           _ conn: Connection, _ rec: ChangeRecorder) throws -> [CollectionItem] {
        let at = "property '\(info.name).\(p.name)'"
        if p.collection == .dictionary {
            guard case .object(let doc) = raw else {
                throw AtollError(.typeMismatch, "\(at) is a dictionary (\(p.typeName)); give it as an object, not \(raw.kindName) \(raw.shortDescription)")
            }
            var items = [CollectionItem]()
            items.reserveCapacity(doc.count)
            for (k, v) in doc {
                try checkDictionaryKey(k, at)
                do { items.append(CollectionItem(key: k, stored: try resolve(p, v, info, policy, conn, rec))) } catch let e as AtollError {
                    throw e.prefixed("key '\(k)'")
                }
            }
            return items.sorted { $0.key! < $1.key! }
        }
        guard case .list(let elements) = raw else {
            throw AtollError(.typeMismatch, "\(at) is a \(p.collection.rawValue) (\(p.typeName)); got \(raw.kindName) \(raw.shortDescription)")
        }
        var items = [CollectionItem]()
        items.reserveCapacity(elements.count)
        var seen = Set<Stored>()
        for (i, element) in elements.enumerated() {
            let stored: Stored
            do { stored = try resolve(p, element, info, policy, conn, rec) } catch let e as AtollError {
                throw e.prefixed("element \(i)")
            }
            if p.collection == .set {
                // Equal elements: as stored (a link by its row key; a mixed value with its type).
                guard seen.insert(Stored(sql: stored.sql, type: stored.type, canonical: .null)).inserted else { continue }
            }
            items.append(CollectionItem(key: nil, stored: stored))
        }
        return items
    }

    /// Inserts the items' rows; list and set positions start at `firstPosition`.
    func insertCollection(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ items: [CollectionItem],
                          _ conn: Connection, firstPosition: Int = 0) throws {
        let mixed = p.type == .mixed
        // Several rows per statement: one step for up to `insertBatch` elements.
        var start = 0
        while start < items.count {
            let count = min(ClassInfo.insertBatch, items.count - start)
            let s = try conn.statement(info.collectionInsertSQL(p, rows: count))
            var n: Int32 = 1
            for i in start..<(start + count) {
                let item = items[i]
                s.bind(n, owner)
                if let key = item.key { s.bind(n + 1, key) } else { s.bind(n + 1, Int64(firstPosition + i)) }
                s.bind(n + 2, item.stored.sql)
                n += 3
                if mixed {
                    s.bind(n, item.stored.type)
                    n += 1
                }
            }
            try s.run()
            start += count
        }
    }

    /// Removes every element, with the embedded objects a collection of them owns.
    func clearCollection(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws {
        if let target = embeddedTarget(p) {
            for row in try readCollectionRows(info, p, owner, conn) {
                if let key = row.sql.int64 { try eraseRow(target, key, conn) }
            }
        }
        let s = try conn.statement("DELETE FROM \(info.listTable(p)) WHERE owner = ?")
        s.bind(1, owner)
        try s.run()
    }

    /// Whether the collection holds what `items` would write (for `.modified`). New embedded
    /// objects were inserted by resolving them: when equal to the old ones, they are erased again.
    func collectionUnchanged(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ items: [CollectionItem],
                             _ conn: Connection) throws -> Bool {
        let old = try readCollectionRows(info, p, owner, conn)
        guard let target = embeddedTarget(p) else {
            return old == items.map { CollectionRow(key: $0.key, sql: $0.stored.sql, type: $0.stored.type) }
        }
        let newKeys = items.map(\.stored.sql.int64)
        let oldDocs = try old.map { row in try row.sql.int64.flatMap { try readObject(target, $0, conn) } }
        let newDocs = try newKeys.map { key in try key.flatMap { try readObject(target, $0, conn) } }
        guard oldDocs == newDocs, old.map(\.key) == items.map(\.key) else { return false }
        for key in newKeys.compactMap({ $0 }) { try eraseRow(target, key, conn) }
        return true
    }

    /// Records a collection's new content: (a clear, then) one insert per element.
    func recordCollection(_ info: ClassInfo, _ p: Property, _ ref: Value, _ items: [CollectionItem], cleared: Bool,
                          _ rec: ChangeRecorder) {
        let path: [PathElement] = [.key(p.name)]
        switch p.collection {
        case .single:
            return
        case .list:
            if cleared { rec.record(Instruction(.listClear, info.name, ref, path: path)) }
            rec.recordInserts(.listInsert, info.name, ref, property: p.name, items.map(\.stored.canonical))
        case .set:
            if cleared { rec.record(Instruction(.setClear, info.name, ref, path: path)) }
            rec.recordInserts(.setInsert, info.name, ref, property: p.name, items.map(\.stored.canonical))
        case .dictionary:
            if cleared { rec.record(Instruction(.dictionaryClear, info.name, ref, path: path)) }
            for item in items {
                rec.record(Instruction(.dictionarySet, info.name, ref, path: path + [.key(item.key ?? "")], value: item.stored.canonical))
            }
        }
    }

    /// A collection's stored rows: in position order (lists, sets) or key order (dictionaries).
    func readCollectionRows(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws -> [CollectionRow] {
        let dictionary = p.collection == .dictionary
        let mixed = p.type == .mixed
        let s = try conn.statement(info.collectionSelectSQL(p))
        s.bind(1, owner)
        var rows = [CollectionRow]()
        let v: Int32 = dictionary ? 1 : 0
        while try s.step() {
            rows.append(CollectionRow(key: dictionary ? s.string(0) : nil, sql: s.sqlValue(v), type: mixed ? s.sqlValue(v + 1) : .null))
        }
        s.reset()
        return rows
    }

    /// A collection as users see it: a list or set as `.list`, a dictionary as `.object`.
    func readCollection(_ info: ClassInfo, _ p: Property, _ owner: Int64, _ conn: Connection) throws -> Value {
        let rows = try readCollectionRows(info, p, owner, conn)
        let values = try rows.map { row in
            (row.key, p.type == .mixed ? try readMixed(row.sql, row.type, conn) : try readValue(p, row.sql, conn))
        }
        return collectionValue(p, values)
    }

    func collectionValue(_ p: Property, _ items: [(String?, Value)]) -> Value {
        if p.collection == .dictionary { return .object(Document(uniqueKeys: items.map { ($0.0 ?? "", $0.1) })) }
        return .list(items.map(\.1))
    }
}
