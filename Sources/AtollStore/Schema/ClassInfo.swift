/// How one class is laid out in SQLite, with the SQL that reads and writes it.
///
/// - One STRICT table per class, named after the class. Its row key is an `INTEGER PRIMARY KEY`:
///   the primary key itself for classes with an int primary key, else a hidden `_atoll_key`.
/// - Other primary keys are a `UNIQUE NOT NULL` column. Scalars and to-one links (the target's
///   row key) are columns; a mixed value is two columns, its value and `"<property>.type"`.
///   Lists and sets live in side tables `"<Class>.<property>"` keyed by (owner, position),
///   dictionaries in side tables keyed by (owner, key).
/// - Embedded objects are rows of their class's table, owned by exactly one link.
final class ClassInfo {
    let schema: ObjectSchema
    let name: String
    let table: String
    let rowKey: String
    let primaryKey: Property?
    let primaryKeyIsRowKey: Bool
    /// Properties stored as columns (single values: scalars, links, mixed), in schema order.
    let columns: [Property]
    /// The mixed columns: each has a second column `"<name>.type"` with its value's type.
    let mixedColumns: [Property]
    /// Lists, sets and dictionaries, each in its side table.
    let collections: [Property]
    /// Computed `linkingObjects` properties.
    let backlinks: [Property]
    /// The names of all properties, and of those whose writes may take several statements
    /// (links, mixed values that may be links, collections).
    let propertyNames: Set<String>
    let linkOrListNames: Set<String>
    /// Every stored property in schema order, with its column's position in `selectColumns`
    /// rows (1-based after the row key; nil for collections) and, for mixed, its type column's.
    let layout: [(property: Property, column: Int?, typeColumn: Int?)]
    /// The number of columns of a `selectColumns` row.
    let width: Int
    /// `SELECT rowkey, columns..., mixed type columns... FROM table` (append a WHERE clause).
    let selectColumns: String
    /// `SELECT t.rowkey, t.columns...` (append a FROM clause with the table as `t`).
    let selectList: String
    let insertSQL: String
    /// Rows to one `INSERT` of `createMany` (`insertManySQL`): more than 1 only for classes with
    /// a primary key whose columns are all scalars and which have no collections, whose
    /// objects are each one row and nothing else; as many as fit SQLite's limit on parameters.
    let rowsPerInsert: Int
    /// `INSERT OR FAIL INTO table (columns) VALUES (…), (…), …` with `rowsPerInsert` rows.
    let insertManySQL: String
    /// `INSERT` with the row key given first (for objects of classes without primary key that
    /// are given their key).
    let insertWithKeySQL: String
    /// `SELECT rowkey FROM table WHERE pk = ?`
    let lookupSQL: String
    /// `selectColumns WHERE rowkey = ?`
    let readSQL: String
    /// `selectColumns WHERE pk = ?`
    let readByPrimaryKeySQL: String
    /// `SELECT pk FROM table WHERE rowkey = ?`
    let referenceSQL: String
    let deleteSQL: String
    init(_ schema: ObjectSchema) {
        self.schema = schema
        name = schema.name
        table = quote(schema.name)
        primaryKey = schema.primaryKeyProperty
        primaryKeyIsRowKey = primaryKey?.type == .int
        rowKey = primaryKeyIsRowKey ? quote(primaryKey!.name) : quote("_atoll_key")
        columns = schema.properties.filter { !$0.isCollection && !$0.isComputed }
        mixedColumns = columns.filter { $0.type == .mixed }
        collections = schema.properties.filter { $0.isCollection && !$0.isComputed }
        backlinks = schema.properties.filter(\.isComputed)
        propertyNames = Set(schema.properties.filter { !$0.isComputed }.map(\.name))
        linkOrListNames = Set(schema.properties.filter { $0.isCollection || $0.type == .object || $0.type == .mixed }.map(\.name))
        var column = 0
        var typeColumn = columns.count
        layout = schema.properties.filter { !$0.isComputed }.map { p in
            if p.isCollection { return (p, nil, nil) }
            column += 1
            if p.type == .mixed {
                typeColumn += 1
                return (p, column, typeColumn)
            }
            return (p, column, nil)
        }
        width = 1 + columns.count + mixedColumns.count
        let columnList = columns.map { "t." + quote($0.name) } + mixedColumns.map { "t." + mixedTypeColumn($0) }
        selectList = "SELECT " + (["t." + rowKey] + columnList).joined(separator: ", ")
        selectColumns = selectList + " FROM \(table) AS t"
        let pkColumn = primaryKey.map { quote($0.name) } ?? rowKey
        lookupSQL = "SELECT \(rowKey) FROM \(table) WHERE \(pkColumn) = ?"
        readSQL = selectColumns + " WHERE t.\(rowKey) = ?"
        readByPrimaryKeySQL = selectColumns + " WHERE t.\(pkColumn) = ?"
        referenceSQL = "SELECT \(pkColumn) FROM \(table) WHERE \(rowKey) = ?"
        deleteSQL = "DELETE FROM \(table) WHERE \(rowKey) = ?"
        let names = (columns.map { quote($0.name) } + mixedColumns.map { mixedTypeColumn($0) }).joined(separator: ", ")
        let params = Array(repeating: "?", count: columns.count + mixedColumns.count).joined(separator: ", ")
        insertSQL = columns.isEmpty ? "INSERT INTO \(table) DEFAULT VALUES"
            : "INSERT INTO \(table) (\(names)) VALUES (\(params))"
        insertWithKeySQL = columns.isEmpty ? "INSERT INTO \(table) (\(rowKey)) VALUES (?)"
            : "INSERT INTO \(table) (\(rowKey), \(names)) VALUES (?, \(params))"
        let onePerInsert = primaryKey == nil || schema.isEmbedded || !collections.isEmpty
            || columns.contains { $0.type == .object || $0.type == .mixed }
        rowsPerInsert = onePerInsert ? 1 : max(1, min(64, 32_000 / max(1, columns.count)))
        // OR FAIL: a statement of many rows that a failure must undo whole makes SQLite copy
        // every page it touches first (a statement journal, written to a temporary file once
        // it outgrows 64 KB: at a million objects, gigabytes). With OR FAIL a failure keeps the
        // rows before the failing one, which `createMany` accounts for, inside its savepoint.
        insertManySQL = rowsPerInsert == 1 ? insertSQL
            : "INSERT OR FAIL INTO \(table) (\(names)) VALUES " + Array(repeating: "(\(params))", count: rowsPerInsert).joined(separator: ", ")
    }

    private var valueSQLCache: [String: String] = [:]
    private var columnsSQLCache: [String: String] = [:]

    /// `SELECT rowkey, columns... FROM table WHERE pk = ?` for some columns. Used under the
    /// store's lock, like every cache here.
    func currentValuesSQL(_ columns: [Property], byRowKey: Bool = false) -> String {
        let key = (byRowKey ? "R\u{1}" : "S\u{1}") + columns.map(\.name).joined(separator: "\u{1}")
        if let sql = columnsSQLCache[key] { return sql }
        let sql = "SELECT " + ([rowKey] + columns.map { quote($0.name) }
                               + columns.filter { $0.type == .mixed }.map { mixedTypeColumn($0) }).joined(separator: ", ")
            + " FROM \(table) WHERE \(byRowKey ? rowKey : primaryKeyColumn) = ?"
        columnsSQLCache[key] = sql
        return sql
    }

    /// `UPDATE table SET a = ?1, b = ?2 WHERE pk = ?3 [RETURNING rowkey]` (RETURNING unless the
    /// primary key is the row key); with `onlyIfChanged`
    /// (one column), `AND a IS NOT ?1` too, so that an unchanged value updates nothing.
    func updateReturningSQL(_ columns: [Property], onlyIfChanged: Bool) -> String {
        let key = (onlyIfChanged ? "M\u{1}" : "A\u{1}") + columns.map(\.name).joined(separator: "\u{1}")
        if let sql = columnsSQLCache[key] { return sql }
        let sets = columns.enumerated().map { "\(quote($0.element.name)) = ?\($0.offset + 1)" }.joined(separator: ", ")
        var sql = "UPDATE \(table) SET \(sets) WHERE \(primaryKeyColumn) = ?\(columns.count + 1)"
        if onlyIfChanged { sql += " AND \(quote(columns[0].name)) IS NOT ?1" }
        if !primaryKeyIsRowKey { sql += " RETURNING \(rowKey)" }
        columnsSQLCache[key] = sql
        return sql
    }

    /// `UPDATE table SET a = ?, b = ? WHERE rowkey = ?` (a mixed column takes two parameters:
    /// its value, then its type).
    func updateSQL(_ columns: [Property]) -> String {
        let key = "U\u{1}" + columns.map(\.name).joined(separator: "\u{1}")
        if let sql = columnsSQLCache[key] { return sql }
        let sql = "UPDATE \(table) SET " + columns.map {
            $0.type == .mixed ? "\(quote($0.name)) = ?, \(mixedTypeColumn($0)) = ?" : "\(quote($0.name)) = ?"
        }.joined(separator: ", ") + " WHERE \(rowKey) = ?"
        columnsSQLCache[key] = sql
        return sql
    }

    /// `SELECT rowkey, column FROM table WHERE pk = ?` for one property (the row key again for
    /// lists, whose values live in their side table). Used under the store's lock.
    func valueSQL(_ p: Property) -> String {
        if let sql = valueSQLCache[p.name] { return sql }
        let column = p.isCollection ? rowKey : p.type == .mixed ? "\(quote(p.name)), \(mixedTypeColumn(p))" : quote(p.name)
        let sql = "SELECT \(rowKey), \(column) FROM \(table) WHERE \(primaryKeyColumn) = ?"
        valueSQLCache[p.name] = sql
        return sql
    }

    /// The most collection elements one INSERT writes.
    static let insertBatch = 32

    /// `INSERT INTO side (owner, position|key, value[, type]) VALUES (?, ?, ?[, ?]), ...` for
    /// `rows` elements (at most `insertBatch`).
    func collectionInsertSQL(_ p: Property, rows: Int) -> String {
        let key = "I\(rows)\u{1}" + p.name
        if let sql = columnsSQLCache[key] { return sql }
        let mixed = p.type == .mixed
        let keyColumn = p.collection == .dictionary ? "key" : "position"
        let row = mixed ? "(?, ?, ?, ?)" : "(?, ?, ?)"
        let sql = "INSERT INTO \(listTable(p)) (owner, \(keyColumn), value\(mixed ? ", type" : "")) VALUES "
            + Array(repeating: row, count: rows).joined(separator: ", ")
        columnsSQLCache[key] = sql
        return sql
    }

    /// `SELECT [key,] value[, type] FROM side WHERE owner = ? ORDER BY position|key`
    func collectionSelectSQL(_ p: Property) -> String {
        let key = "C\u{1}" + p.name
        if let sql = columnsSQLCache[key] { return sql }
        let dictionary = p.collection == .dictionary
        let columns = (dictionary ? "key, " : "") + "value" + (p.type == .mixed ? ", type" : "")
        let sql = "SELECT \(columns) FROM \(listTable(p)) WHERE owner = ? ORDER BY \(dictionary ? "key" : "position")"
        columnsSQLCache[key] = sql
        return sql
    }

    /// The side table of a list, set or dictionary.
    func listTable(_ p: Property) -> String { quote("\(name).\(p.name)") }



    func indexName(_ p: Property) -> String { quote("\(name).\(p.name).index") }

    /// `WHERE` clause text that finds an object by primary key.
    var primaryKeyColumn: String { primaryKey.map { quote($0.name) } ?? rowKey }
}

/// The column that holds a mixed property's value type (see `MixedType`).
func mixedTypeColumn(_ p: Property) -> String { quote("\(p.name).type") }

extension PropertyType {
    /// A SQL literal of a canonical value, for DEFAULT clauses.
    func sqlLiteral(_ value: Value) -> String {
        switch sqlValue(value) {
        case .null: return "NULL"
        case .integer(let i): return String(i)
        case .real(let d): return d.isFinite ? "\(d)" : (d > 0 ? "9e999" : (d < 0 ? "-9e999" : "NULL"))
        case .text(let s): return "'" + s.replacingOccurrences(of: "'", with: "''") + "'"
        case .blob(let b):
            let hex = b.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
            return "X'\(hex)'"
        }
    }
}
