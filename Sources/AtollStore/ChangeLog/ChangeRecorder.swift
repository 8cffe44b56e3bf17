/// Collects the instructions of one write transaction and writes them to the change log.
///
/// Instructions are encoded as they are recorded (format in `docs/changelog.md`): class and
/// property names are written once per chunk and then by number, and a new object's initial
/// values travel in one `create` record that reads back as `create` plus one `set` each. The
/// buffer is written out as a chunk row of `_atoll_changes` when it grows large (between write
/// operations, never inside one) and at commit. A failed operation rolls the buffer back to its
/// mark; chunks are only flushed between operations, so a mark never lies before a flushed chunk
/// of the same operation.
final class ChangeRecorder {
    private var writer = BinaryWriter()
    private var pendingCount = 0
    private var flushedCount = 0
    private var chunk = 0
    /// Whether records carry values (format 2) or only what changed (format 3: ops, objects,
    /// paths and indexes, which is all observers read). See `Store.recordsChangeLogValues`.
    let keepsValues: Bool

    /// Record kinds. 1–8 and 10–15 are `Instruction.Op`; 9 is a create with its initial values;
    /// 0 only defines names.
    private static let createWithValues: UInt8 = 9
    private static let defineNames: UInt8 = 0

    init(keepsValues: Bool) {
        self.keepsValues = keepsValues
        writer.byte(format)
    }

    /// The format byte of this recorder's chunks.
    private var format: UInt8 { keepsValues ? changeLogFormat : changeLogFormatWithoutValues }

    /// All instructions recorded in this transaction (as read back: a create with values counts
    /// one per value and one for the create).
    var total: Int { flushedCount + pendingCount }
    var pendingBytes: Int { writer.bytes.count }

    /// Name numbers already given to a class and its columns in this chunk: saves hashing the
    /// names for every object of a bulk insert.
    private var columnNumbers: [ObjectIdentifier: (className: Int, columns: [(index: Int, number: Int)])] = [:]

    /// A new object with the values of its columns, `values[i]` for `info.columns[i]` (a `set`
    /// each when read back; the primary key's column is left out). Without values, `values`
    /// is not read (callers may pass none).
    func recordCreate(_ info: ClassInfo, _ primaryKey: Value, values: [Value]) {
        let id = ObjectIdentifier(info)
        let numbers: (className: Int, columns: [(index: Int, number: Int)])
        if let known = columnNumbers[id] {
            numbers = known
        } else {
            // A record that only names the class and its columns.
            let names = [info.name] + info.columns.map(\.name)
            writer.byte(Self.defineNames)
            writer.varint(UInt64(names.count))
            for name in names { writer.name(name) }
            // The columns but the primary key's, by position and name number.
            let pkName = info.primaryKey?.name
            numbers = (writer.nameNumbers[info.name] ?? 0, info.columns.enumerated().filter { $0.element.name != pkName }
                .map { ($0.offset, writer.nameNumbers[$0.element.name] ?? 0) })
            columnNumbers[id] = numbers
        }
        guard keepsValues else {
            // Observers need only that the object is new: its properties do not count as
            // changed for them (an object created in a range is an insertion).
            writer.byte(Instruction.Op.create.rawValue)
            writer.varint(UInt64(numbers.className + 1))
            writer.value(primaryKey)
            pendingCount += 1
            return
        }
        writer.byte(Self.createWithValues)
        writer.varint(UInt64(numbers.className + 1))
        writer.value(primaryKey)
        writer.varint(UInt64(numbers.columns.count))
        for (i, number) in numbers.columns {
            writer.varint(UInt64(number + 1))
            writer.value(values[i])
        }
        pendingCount += numbers.columns.count + 1
    }

    func record(_ ins: Instruction) {
        writer.byte(ins.op.rawValue)
        writer.name(ins.className)
        writer.value(ins.primaryKey)
        if ins.op == .create || ins.op == .erase {
            pendingCount += 1
            return
        }
        writer.varint(UInt64(ins.path.count))
        for element in ins.path {
            switch element {
            case .key(let k): writer.byte(0); writer.name(k)
            case .index(let i): writer.byte(1); writer.signed(Int64(i))
            }
        }
        switch ins.op {
        case .listInsert, .listErase, .listSet, .listMove: writer.signed(Int64(ins.index ?? 0))
        default: break
        }
        if ins.op == .listMove { writer.signed(Int64(ins.toIndex ?? 0)) }
        if keepsValues, ins.op.carriesValue || ins.op == .listMove { writer.value(ins.value ?? .null) }
        pendingCount += 1
    }

    /// `listInsert`s at indexes 0, 1, ... (or `setInsert`s) of `values` into one collection of
    /// one object: the records `record` would write, with the names and the key encoded once.
    func recordInserts(_ op: Instruction.Op, _ className: String, _ primaryKey: Value, property: String, _ values: [Value]) {
        guard let first = values.first else { return }
        let indexed = op == .listInsert
        // The first record defines the names this chunk has not seen yet; the rest reuse their
        // numbers and the primary key's bytes (a primary key is a scalar: no names inside).
        record(Instruction(op, className, primaryKey, path: [.key(property)], value: first, index: indexed ? 0 : nil))
        guard values.count > 1, let classNumber = writer.nameNumbers[className],
              let propertyNumber = writer.nameNumbers[property] else {
            for (i, v) in values.enumerated().dropFirst() {
                record(Instruction(op, className, primaryKey, path: [.key(property)], value: v, index: indexed ? i : nil))
            }
            return
        }
        var key = BinaryWriter()
        key.value(primaryKey)
        for i in 1..<values.count {
            writer.byte(op.rawValue)
            writer.varint(UInt64(classNumber + 1))
            writer.bytes.append(contentsOf: key.bytes)
            writer.varint(1)
            writer.byte(0)
            writer.varint(UInt64(propertyNumber + 1))
            if indexed { writer.signed(Int64(i)) }
            if keepsValues { writer.value(values[i]) }
        }
        pendingCount += values.count - 1
    }

    struct Mark { let bytes: Int; let count: Int; let names: Int }

    func mark() -> Mark { Mark(bytes: writer.bytes.count, count: pendingCount, names: writer.names.count) }

    func rollback(to mark: Mark) {
        writer.bytes.removeSubrange(mark.bytes...)
        writer.forgetNames(after: mark.names)
        columnNumbers = [:]
        pendingCount = mark.count
    }

    /// The chunk number of a version's effects: what its instructions implied without saying
    /// it (links nulled because their target was erased). Observers read them; the change log
    /// proper (`Store.changes`, sync) does not.
    static let effectsChunk: Int64 = -1

    /// Writes the pending instructions as the next chunk of `version` (or as the chunk given).
    func flush(_ conn: Connection, version: UInt64, chunk fixed: Int64? = nil) throws {
        guard pendingCount > 0 else { return }
        let s = try conn.statement("INSERT INTO _atoll_changes(version, chunk, instructions) VALUES (?, ?, ?)")
        s.bind(1, Int64(version))
        s.bind(2, fixed ?? Int64(chunk))
        s.bind(3, writer.bytes)
        try s.run()
        if fixed == nil { chunk += 1 }
        flushedCount += pendingCount
        pendingCount = 0
        writer = BinaryWriter()
        writer.byte(format)
        columnNumbers = [:]
    }

    /// Whether a chunk's records carry values (formats 1 and 2 do; 3 does not).
    static func hasValues(_ bytes: [UInt8]) -> Bool { bytes.first != changeLogFormatWithoutValues }

    /// The instructions of one chunk (of a chunk without values: instructions without values).
    static func decode(_ bytes: [UInt8]) throws -> [Instruction] {
        var reader = BinaryReader(bytes)
        guard !reader.atEnd else { throw AtollError(.file, "the change log has an unknown format") }
        let format = try reader.byte()
        guard format == 1 || format == changeLogFormat || format == changeLogFormatWithoutValues else {
            throw AtollError(.file, "the change log has an unknown format")
        }
        let hasValues = format != changeLogFormatWithoutValues
        var out = [Instruction]()
        var paths = [[PathElement]?]()
        var reserved = false
        while !reader.atEnd {
            // Room for the rest, as many per byte as so far: a large chunk's array is not
            // copied as it grows.
            if !reserved, out.count >= 1_024 {
                reserved = true
                out.reserveCapacity(Int(Double(out.count) * Double(bytes.count) / Double(reader.offset) * 1.05))
            }
            let kind = try reader.byte()
            if kind == defineNames {
                let n = try reader.varint()
                guard n <= UInt64(bytes.count) else { throw reader.corrupt() }
                for _ in 0..<n { _ = try reader.name() }
                continue
            }
            let className = try reader.name()
            let pk = try reader.value()
            if kind == createWithValues {
                out.append(Instruction(.create, className, pk))
                let n = try reader.varint()
                guard n <= UInt64(bytes.count) else { throw reader.corrupt() }
                for _ in 0..<n {
                    // One path array per property name, shared by every object's set.
                    let number = try reader.nameNumber()
                    if number >= paths.count { paths += Array(repeating: nil, count: number + 1 - paths.count) }
                    let path = paths[number] ?? [.key(reader.names[number])]
                    paths[number] = path
                    out.append(Instruction(.set, className, pk, path: path, value: try reader.value()))
                }
                continue
            }
            guard let op = Instruction.Op(rawValue: kind) else { throw reader.corrupt() }
            var ins = Instruction(op, className, pk)
            if op != .create, op != .erase {
                let n = try reader.varint()
                guard n <= UInt64(bytes.count) else { throw reader.corrupt() }
                for _ in 0..<n {
                    switch try reader.byte() {
                    case 0: ins.path.append(.key(try reader.name()))
                    case 1: ins.path.append(.index(Int(try reader.signed())))
                    default: throw reader.corrupt()
                    }
                }
                switch op {
                case .listInsert, .listErase, .listSet, .listMove: ins.index = Int(try reader.signed())
                default: break
                }
                if op == .listMove { ins.toIndex = Int(try reader.signed()) }
                if hasValues, op.carriesValue || (op == .listMove && format >= 2) { ins.value = try reader.value() }
            }
            out.append(ins)
        }
        return out
    }
}
