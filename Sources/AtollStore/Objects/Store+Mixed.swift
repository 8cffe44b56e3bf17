// How mixed values are checked, stored and read back.
//
// A mixed value is stored as two SQL values: the value itself, in the SQL form of its type
// (so that comparisons and indexes work on it as on a typed column), and a type tag (TEXT):
//
// | value                      | type tag            | SQL value                                   |
// | -------------------------- | ------------------- | ------------------------------------------- |
// | null                       | NULL                | NULL                                        |
// | bool, int, ..., decimal128 | the type's name     | as in a column of that type                 |
// | a link to a `Dog`          | `link:Dog`          | the target's row key                        |
// | a nested list              | `list`              | BLOB: the change-log encoding of the list   |
// | a nested dictionary        | `dictionary`        | BLOB: the change-log encoding of the object |
//
// Type names are those of `PropertyType` ("int", "decimal128", ...). Nested collections keep
// links as class and primary key.

/// The type tags of stored mixed values.
enum MixedTag {
    static let list = "list"
    static let dictionary = "dictionary"
    static let linkPrefix = "link:"

    /// The scalar property type a tag names, if it names one.
    static func scalarType(_ tag: String) -> PropertyType? {
        guard let t = PropertyType(rawValue: tag), t != .object, t != .mixed, t != .linkingObjects else { return nil }
        return t
    }
}

extension Value {
    /// The property type of a scalar value (nil for null, links and collections).
    var scalarType: PropertyType? {
        switch self {
        case .bool: return .bool
        case .int: return .int
        case .float: return .float
        case .double: return .double
        case .string: return .string
        case .data: return .data
        case .date: return .date
        case .objectId: return .objectId
        case .uuid: return .uuid
        case .decimal: return .decimal128
        case .null, .link, .list, .object: return nil
        }
    }
}

extension Store {
    /// Dictionary keys, in dictionary properties and in mixed values: not empty, no `.`, no
    /// leading `$` (as in Realm: such keys would be ambiguous in key paths and Extended JSON).
    func checkDictionaryKey(_ key: String, _ at: String) throws {
        if key.isEmpty || key.contains(".") || key.hasPrefix("$") || key.contains("\0") {
            throw AtollError(.invalidArgument, "\(at): dictionary key '\(key)' is not allowed (keys are non-empty and contain no '.', no NUL and no leading '$')")
        }
    }

    /// A mixed value resolved for storage. Links must exist (given as `.link`: class and primary
    /// key); a list is a nested list, an object a nested dictionary.
    func resolveMixed(_ raw: Value, _ at: String, _ conn: Connection) throws -> Stored {
        switch raw {
        case .null:
            return Stored(sql: .null, type: .null, canonical: .null)
        case .link(let l):
            let target = try classInfo(l.className)
            guard !target.schema.isEmbedded else {
                throw AtollError(.typeMismatch, "\(at): a mixed value cannot hold an embedded object ('\(l.className)')")
            }
            let (key, pk) = try linkedObject(target, l.primaryKey, at, conn)
            return Stored(sql: .integer(key), type: .text(MixedTag.linkPrefix + target.name),
                          canonical: .link(ObjectLink(className: target.name, primaryKey: pk)))
        case .list, .object:
            let canonical = try canonicalNested(raw, at, conn)
            var w = BinaryWriter()
            w.value(canonical)
            return Stored(sql: .blob(w.bytes), type: .text(raw.listValue != nil ? MixedTag.list : MixedTag.dictionary),
                          canonical: canonical)
        default:
            let type = raw.scalarType!
            return Stored(sql: type.sqlValue(raw), type: .text(type.rawValue), canonical: raw)
        }
    }

    /// A nested list or dictionary of a mixed value, checked: links resolved to class and
    /// primary key, keys checked, depth bounded.
    private func canonicalNested(_ raw: Value, _ at: String, _ conn: Connection) throws -> Value {
        nesting += 1
        defer { nesting -= 1 }
        guard nesting <= Store.maxNesting else {
            throw AtollError(.invalidArgument, "\(at): values are nested more than \(Store.maxNesting) levels deep")
        }
        switch raw {
        case .list(let items):
            return .list(try items.map { try canonicalNested($0, at, conn) })
        case .object(let doc):
            var out = [(String, Value)]()
            for (k, v) in doc {
                try checkDictionaryKey(k, at)
                out.append((k, try canonicalNested(v, at, conn)))
            }
            return .object(Document(uniqueKeys: out.sorted { $0.0 < $1.0 }))
        case .link:
            return try resolveMixed(raw, at, conn).canonical
        default:
            return raw
        }
    }

    /// A stored mixed value as users see it.
    func readMixed(_ sql: SQLValue, _ tag: SQLValue, _ conn: Connection) throws -> Value {
        guard case .text(let t) = tag else { return .null }
        if let type = MixedTag.scalarType(t) { return type.value(sql) }
        if t.hasPrefix(MixedTag.linkPrefix) {
            guard case .integer(let key) = sql, let target = classes[String(t.dropFirst(MixedTag.linkPrefix.count))] else { return .null }
            return .link(ObjectLink(className: target.name, primaryKey: try reference(target, key, conn)))
        }
        guard case .blob(let bytes) = sql else { return .null }
        var reader = BinaryReader(bytes)
        return try reader.value()
    }

    /// Whether a row key names an object of a class.
    func rowExists(_ info: ClassInfo, _ rowKey: Int64, _ conn: Connection) throws -> Bool {
        let s = try conn.statement("SELECT 1 FROM \(info.table) WHERE \(info.rowKey) = ?")
        s.bind(1, rowKey)
        defer { s.reset() }
        return try s.step()
    }
}
