import AtollJSON
import AtollStore
import Foundation

/// Why a message could not be read: the protocol's `badMessage`.
public struct ProtocolError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The `type` and `session` of the message that could not be read, where those could be.
    public var messageType: String?
    public var session: Int64?
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Reading fields of a JSON object, with errors that name the field.
public struct Fields: Sendable {
    public let document: Document
    let context: String

    public init(_ value: Value, _ context: String) throws {
        guard case .object(let d) = value else { throw ProtocolError("\(context): expected a JSON object") }
        document = d
        self.context = context
    }

    public subscript(_ key: String) -> Value? {
        let v = document[key]
        if case .null? = v { return nil }
        return v
    }

    public func string(_ key: String) throws -> String {
        guard case .string(let s)? = self[key] else { throw ProtocolError("\(context): \"\(key)\" must be a string") }
        return s
    }

    public func optionalString(_ key: String) throws -> String? {
        guard let v = self[key] else { return nil }
        guard case .string(let s) = v else { throw ProtocolError("\(context): \"\(key)\" must be a string") }
        return s
    }

    public func int(_ key: String) throws -> Int64 {
        guard case .int(let i)? = self[key] else { throw ProtocolError("\(context): \"\(key)\" must be an integer") }
        return i
    }

    public func uint(_ key: String, default fallback: UInt64? = nil) throws -> UInt64 {
        if self[key] == nil, let fallback { return fallback }
        guard case .int(let i)? = self[key], i >= 0 else {
            throw ProtocolError("\(context): \"\(key)\" must be an integer >= 0")
        }
        return UInt64(i)
    }

    public func bool(_ key: String, default fallback: Bool) throws -> Bool {
        guard let v = self[key] else { return fallback }
        guard case .bool(let b) = v else { throw ProtocolError("\(context): \"\(key)\" must be true or false") }
        return b
    }

    public func list(_ key: String) throws -> [Value] {
        guard let v = self[key] else { return [] }
        guard case .list(let items) = v else { throw ProtocolError("\(context): \"\(key)\" must be an array") }
        return items
    }
}

extension SyncInstruction {
    /// The wire form's JSON text.
    public var wireText: String { Wire.encode(wireValue) }

    /// The wire form (docs/protocol.md).
    public var wireValue: Value {
        var d = Document()
        d["op"] = .string(op.rawValue)
        d["class"] = .string(className)
        d["primaryKey"] = primaryKey
        if !path.isEmpty {
            d["path"] = .list(path.map { e -> Value in
                switch e {
                case .key(let k): return .string(k)
                case .index(let i): return .int(Int64(i))
                }
            })
        }
        if let value { d["value"] = value }
        if let element { d["element"] = element.value }
        if op == .listInsert { d["after"] = after?.value ?? .null }
        if let object { d["object"] = .object(object) }
        if let clock { d["clock"] = clock.value }
        if !fieldClocks.isEmpty {
            var f = Document()
            for (k, c) in fieldClocks.sorted(by: { $0.key < $1.key }) { f[k.text] = c.value }
            d["fieldClocks"] = .object(f)
        }
        if !lists.isEmpty {
            var l = Document(), erased = Document(), hidden = Document(), cleared = Document()
            for (k, seq) in lists.sorted(by: { $0.key < $1.key }) {
                // An element whose value was set after its insert carries the set's clock too.
                l[k] = .list(seq.entries.map { e in
                    guard e.valueClock != e.id.clock, case .list(let id) = e.id.value else { return e.id.value }
                    return .list(id + [.int(e.valueClock.milliseconds), .int(e.valueClock.counter), .int(e.valueClock.node)])
                })
                let dead = seq.erasedIDs
                if !dead.isEmpty { erased[k] = .list(dead.map(\.value)) }
                let unseen = seq.hiddenIDs
                if !unseen.isEmpty { hidden[k] = .list(unseen.map(\.value)) }
                if let c = seq.clearedBefore { cleared[k] = c.value }
            }
            d["lists"] = .object(l)
            if !erased.isEmpty { d["erased"] = .object(erased) }
            if !hidden.isEmpty { d["hidden"] = .object(hidden) }
            if !cleared.isEmpty { d["cleared"] = .object(cleared) }
        }
        if let erasedAt { d["erasedAt"] = erasedAt.value }
        return .object(d)
    }

    /// An instruction from its wire form.
    /// - Throws: `ProtocolError` naming what is wrong.
    public init(wire value: Value) throws {
        let f = try Fields(value, "instruction")
        guard let op = SyncOp(rawValue: try f.string("op")) else {
            throw ProtocolError("instruction: unknown op \(f["op"].map { "\($0)" } ?? "")")
        }
        let className = try f.string("class")
        guard let pk = f.document["primaryKey"] else { throw ProtocolError("instruction: \"primaryKey\" is missing") }
        self.init(op, className, pk)
        for e in try f.list("path") {
            switch e {
            case .string(let k): path.append(.key(k))
            case .int(let i): path.append(.index(Int(i)))
            default: throw ProtocolError("instruction: a path holds property names and indexes")
            }
        }
        switch op {
        case .create, .erase, .evict, .upsert, .keep, .listClear, .setClear, .dictionaryClear:
            break
        default:
            guard !path.isEmpty else { throw ProtocolError("instruction \(op.rawValue): \"path\" is missing") }
        }
        if op == .dictionarySet || op == .dictionaryErase, path.count < 2 {
            throw ProtocolError("instruction \(op.rawValue): \"path\" must be [property, key]")
        }
        if op.carriesValue {
            guard let v = f.document["value"] else { throw ProtocolError("instruction \(op.rawValue): \"value\" is missing") }
            self.value = v
        }
        if op.addressesElement {
            guard let e = ElementID(f["element"]) else {
                throw ProtocolError("instruction \(op.rawValue): \"element\" must be [ms, counter, ident, n]")
            }
            element = e
        }
        if op == .listClear, let point = f["element"] {
            guard let e = ElementID(point) else { throw ProtocolError("instruction listClear: \"element\" must be [ms, counter, ident, n]") }
            element = e
        }
        if op == .listInsert, let a = f["after"] {
            guard let id = ElementID(a) else { throw ProtocolError("instruction listInsert: \"after\" must be an element or null") }
            after = id
        }
        if op == .upsert {
            guard case .object(let o)? = f["object"] else { throw ProtocolError("instruction upsert: \"object\" is missing") }
            object = o
            guard let c = Clock(f["clock"]) else { throw ProtocolError("instruction upsert: \"clock\" is missing") }
            clock = c
            if case .object(let fc)? = f["fieldClocks"] {
                for (k, v) in fc {
                    guard let c = Clock(v) else { throw ProtocolError("instruction upsert: a field clock is not a clock") }
                    fieldClocks[ExactText(k)] = c
                }
            }
            func identities(_ field: String, _ v: Value, valueClocks: UnsafeMutablePointer<[ElementID: Clock]>? = nil) throws -> [ElementID] {
                guard case .list(let ids) = v else { throw ProtocolError("instruction upsert: \"\(field)\" holds arrays") }
                return try ids.map { id in
                    // [ms, counter, node, n] or, with the clock of a later set, 7 integers.
                    if case .list(let parts) = id, parts.count == 7, let e = ElementID(.list(Array(parts.prefix(4)))),
                       let c = Clock(.list(Array(parts.suffix(3)))) {
                        valueClocks?.pointee[e] = c
                        return e
                    }
                    guard let e = ElementID(id) else { throw ProtocolError("instruction upsert: a list element is not an element identity") }
                    return e
                }
            }
            var erased = [String: Set<ElementID>]()
            if case .object(let es)? = f["erased"] {
                for (k, v) in es { erased[k] = Set(try identities("erased", v)) }
            }
            var hidden = [String: Set<ElementID>]()
            if case .object(let hs)? = f["hidden"] {
                for (k, v) in hs { hidden[k] = Set(try identities("hidden", v)) }
            }
            var cleared = [String: ElementID]()
            if case .object(let cs)? = f["cleared"] {
                for (k, v) in cs {
                    guard let e = ElementID(v) else { throw ProtocolError("instruction upsert: \"cleared\" holds element identities") }
                    cleared[k] = e
                }
            }
            if case .object(let ls)? = f["lists"] {
                for (k, v) in ls {
                    var valueClocks = [ElementID: Clock]()
                    let ids = try identities("lists", v, valueClocks: &valueClocks)
                    lists[k] = ListSequence(ids: ids, erased: erased[k] ?? [], hidden: hidden[k] ?? [], valueClocks: valueClocks,
                                            clearedBefore: cleared[k])
                }
            }
            if let e = f["erasedAt"] {
                guard let clock = Clock(e) else { throw ProtocolError("instruction upsert: \"erasedAt\" must be a clock") }
                erasedAt = clock
            }
        }
    }
}

extension SyncInstruction {
    /// The wire forms of a run of instructions, with each `create` followed directly by `set`s
    /// of its object's own properties folded into one `create` with an `"object"` of those
    /// values, and each run of such creates of one class that set the same properties as one
    /// `creates` group: the names once, each object an array of values (docs/protocol.md,
    /// "Instructions"). What a new object costs on the wire, once. `instructions(wire:)`
    /// unfolds them into the same instructions, in the same order.
    public static func wireValues(_ instructions: [SyncInstruction]) -> [Value] { wireValues(instructions[...]) }

    /// The same, for a part of an array. (Concrete types, not a generic collection: a generic
    /// function called from another module runs unspecialized, several times slower.)
    public static func wireValues(_ instructions: ArraySlice<SyncInstruction>) -> [Value] {
        var out = [Value]()
        out.reserveCapacity(instructions.count)
        var run = CreateRun()
        var i = instructions.startIndex
        while i != instructions.endIndex {
            let ins = instructions[i]
            instructions.formIndex(after: &i)
            guard ins.op == .create, ins.path.isEmpty, ins.object == nil, ins.value == nil, ins.clock == nil, ins.element == nil else {
                run.close(into: &out)
                out.append(ins.wireValue)
                continue
            }
            var object = Document()
            while i != instructions.endIndex {
                let next = instructions[i]
                guard next.op == .set, next.className == ins.className, next.primaryKey == ins.primaryKey, next.path.count == 1,
                      case .key(let name)? = next.path.first, let value = next.value, object[name] == nil else { break }
                object[name] = value
                instructions.formIndex(after: &i)
            }
            if !run.extend(ins.className, ins.primaryKey, object) {
                run.close(into: &out)
                _ = run.extend(ins.className, ins.primaryKey, object)
            }
        }
        run.close(into: &out)
        return out
    }

    /// New objects of one class that set the same properties, on their way to the wire.
    private struct CreateRun {
        var className = ""
        var fields: [String] = []
        var keys: [Value] = []
        var rows: [Value] = []
        var first = Document()

        /// Adds a new object when it fits the run (or the run is empty); false when it does not.
        mutating func extend(_ cls: String, _ key: Value, _ object: Document) -> Bool {
            if keys.isEmpty {
                className = cls
                fields = object.keys
                first = object
            } else if cls != className || object.keys != fields {
                return false
            }
            keys.append(key)
            rows.append(.list(object.values))
            return true
        }

        /// The run's wire form (a folded `create` for one object, a `creates` group for more),
        /// and an empty run again.
        mutating func close(into out: inout [Value]) {
            defer { self = CreateRun() }
            guard let key = keys.first else { return }
            guard keys.count > 1 else {
                var d = Document()
                d["op"] = .string(SyncOp.create.rawValue)
                d["class"] = .string(className)
                d["primaryKey"] = key
                if !first.isEmpty { d["object"] = .object(first) }
                out.append(.object(d))
                return
            }
            out.append(.doc(["op": .string("creates"), "class": .string(className), "fields": .list(fields.map(Value.string)),
                             "primaryKeys": .list(keys), "objects": .list(rows)]))
        }
    }

    /// Whether an upsert can travel in an `upserts` group: its object whole, one clock for all
    /// of it, no list identities, and its primary key under `primaryKey`.
    private func groupable(primaryKey: String) -> Bool {
        guard op == .upsert, let object, clock != nil, fieldClocks.isEmpty, lists.isEmpty, erasedAt == nil else { return false }
        return object[primaryKey] == self.primaryKey
    }

    /// The wire forms of a class's upserts (a bootstrap's page), with each run of upserts that
    /// share their property names and need nothing but a clock as one `upserts` instruction:
    /// the names once, each object an array of values (docs/protocol.md, "Instructions"). What
    /// a bootstrap's objects cost on the wire and to read. Each form comes with the range of
    /// `upserts` it stands for (a group too large for one message is split by the caller).
    public static func groupedWireValues(_ upserts: ArraySlice<SyncInstruction>, primaryKey: String)
        -> [(value: Value, range: Range<Int>)] {
        var out = [(value: Value, range: Range<Int>)]()
        var i = upserts.startIndex
        while i < upserts.endIndex {
            let first = upserts[i]
            guard first.groupable(primaryKey: primaryKey), let fields = first.object?.keys else {
                out.append((first.wireValue, i..<(i + 1)))
                i += 1
                continue
            }
            var j = i
            var rows = [Value]()
            var clocks = [Value]()
            var clockIndex = [Clock: Int]()
            var clockOfRow = [Value]()
            while j < upserts.endIndex, upserts[j].className == first.className, upserts[j].groupable(primaryKey: primaryKey),
                  let object = upserts[j].object, object.keys == fields, let clock = upserts[j].clock {
                rows.append(.list(object.values))
                let index: Int
                if let known = clockIndex[clock] {
                    index = known
                } else {
                    index = clocks.count
                    clockIndex[clock] = index
                    clocks.append(clock.value)
                }
                clockOfRow.append(.int(Int64(index)))
                j += 1
            }
            if j - i == 1 {
                out.append((first.wireValue, i..<j))
            } else {
                out.append((.doc(["op": .string("upserts"), "class": .string(first.className), "key": .string(primaryKey),
                                  "fields": .list(fields.map(Value.string)), "objects": .list(rows),
                                  "clocks": .list(clocks), "clock": .list(clockOfRow)]), i..<j))
            }
            i = j
        }
        return out
    }

    /// The `fields` of a group: distinct property names.
    private static func fieldNames(_ f: Fields, _ op: String) throws -> [String] {
        var fields = [String]()
        for name in try f.list("fields") {
            guard case .string(let s) = name, !fields.contains(s) else {
                throw ProtocolError("instruction \(op): \"fields\" must be distinct property names")
            }
            fields.append(s)
        }
        return fields
    }

    /// The upserts of an `upserts` instruction, in order.
    /// - Throws: `ProtocolError` naming what is wrong.
    static func upserts(wire f: Fields) throws -> [SyncInstruction] {
        let className = try f.string("class")
        let key = try f.string("key")
        let fields = try fieldNames(f, "upserts")
        guard let keyIndex = fields.firstIndex(of: key) else {
            throw ProtocolError("instruction upserts: \"key\" must be one of \"fields\"")
        }
        var clocks = [Clock]()
        for c in try f.list("clocks") {
            guard let clock = Clock(c) else { throw ProtocolError("instruction upserts: \"clocks\" holds clocks") }
            clocks.append(clock)
        }
        let objects = try f.list("objects")
        let clockOfObject = try f.list("clock")
        guard clockOfObject.count == objects.count else {
            throw ProtocolError("instruction upserts: \"clock\" must name one clock per object")
        }
        var out = [SyncInstruction]()
        out.reserveCapacity(objects.count)
        for (row, c) in zip(objects, clockOfObject) {
            guard case .list(let values) = row, let object = Document(uniqueKeys: fields, values: values) else {
                throw ProtocolError("instruction upserts: each object must be an array of one value per field")
            }
            guard case .int(let index) = c, index >= 0, index < clocks.count else {
                throw ProtocolError("instruction upserts: \"clock\" holds indexes into \"clocks\"")
            }
            var ins = SyncInstruction(.upsert, className, values[keyIndex])
            ins.object = object
            ins.clock = clocks[Int(index)]
            out.append(ins)
        }
        return out
    }

    /// The instructions of a `creates` group: for each object, its `create` and a `set` of each
    /// of its values, in order.
    /// - Throws: `ProtocolError` naming what is wrong.
    static func creates(wire f: Fields) throws -> [SyncInstruction] {
        let className = try f.string("class")
        let fields = try fieldNames(f, "creates")
        let keys = try f.list("primaryKeys")
        let objects = try f.list("objects")
        guard keys.count == objects.count else {
            throw ProtocolError("instruction creates: \"primaryKeys\" must name one primary key per object")
        }
        var out = [SyncInstruction]()
        out.reserveCapacity(objects.count * (fields.count + 1))
        // One path array per field, shared by every object's set.
        let paths = fields.map { [PathElement.key($0)] }
        for (key, row) in zip(keys, objects) {
            guard case .list(let values) = row, values.count == fields.count else {
                throw ProtocolError("instruction creates: each object must be an array of one value per field")
            }
            out.append(SyncInstruction(.create, className, key))
            for (path, value) in zip(paths, values) {
                out.append(SyncInstruction(.set, className, key, path: path, value: value))
            }
        }
        return out
    }

    /// Instructions from their wire forms: a `create` with an `"object"` becomes the `create`
    /// and a `set` of each of its values, in order; a `creates` group, those of each of its
    /// objects; an `upserts` group, its upserts.
    /// - Throws: `ProtocolError` naming what is wrong.
    public static func instructions(wire values: [Value]) throws -> [SyncInstruction] {
        var out = [SyncInstruction]()
        out.reserveCapacity(values.count)
        for value in values {
            if case .object(let d) = value, case .string(let op)? = d["op"], op == "upserts" || op == "creates" {
                let fields = try Fields(value, "instruction")
                let group = op == "upserts" ? try upserts(wire: fields) : try creates(wire: fields)
                // A message of one large group: its array is taken, not copied.
                if out.isEmpty { out = group } else { out += group }
                continue
            }
            let ins = try SyncInstruction(wire: value)
            guard ins.op == .create, case .object(let d) = value, let folded = d["object"] else {
                out.append(ins)
                continue
            }
            guard case .object(let object) = folded else { throw ProtocolError("instruction create: \"object\" must be an object") }
            out.append(ins)
            for (name, v) in object {
                out.append(SyncInstruction(.set, ins.className, ins.primaryKey, path: [.key(name)], value: v))
            }
        }
        return out
    }
}

extension SyncChangeset {
    public var wireValue: Value {
        var d = Document()
        if clientVersion > 0 { d["clientVersion"] = .int(Int64(clientVersion)) }
        if lastServerVersion > 0 || clientVersion > 0 { d["lastServerVersion"] = .int(Int64(lastServerVersion)) }
        if serverVersion > 0 { d["serverVersion"] = .int(Int64(serverVersion)) }
        d["clock"] = clock.value
        d["instructions"] = .list(SyncInstruction.wireValues(instructions))
        return .object(d)
    }

    public init(wire value: Value) throws {
        let f = try Fields(value, "changeset")
        guard let clock = Clock(f["clock"]) else { throw ProtocolError("changeset: \"clock\" must be [ms, counter, ident]") }
        self.init(clientVersion: try f.uint("clientVersion", default: 0),
                  lastServerVersion: try f.uint("lastServerVersion", default: 0),
                  serverVersion: try f.uint("serverVersion", default: 0),
                  clock: clock, instructions: try SyncInstruction.instructions(wire: f.list("instructions")))
    }
}

extension Value {
    /// Shorthand for building wire messages: `.doc(["type": .string("ping")])`.
    public static func doc(_ pairs: KeyValuePairs<String, Value>) -> Value {
        var d = Document()
        for (k, v) in pairs { d[k] = v }
        return .object(d)
    }
}

/// JSON text of a wire value, and back.
public enum Wire {
    public static func encode(_ value: Value) -> String { EJSON.serialize(value) }

    /// - Throws: `ProtocolError` for text that is not a JSON object.
    public static func decode(_ text: String) throws -> Fields {
        let value: Value
        do { value = try EJSON.parse(text) } catch { throw ProtocolError("a message that is not JSON: \(error)") }
        return try Fields(value, "message")
    }
}

extension ProtocolError: LocalizedError {
    /// The message, as `localizedDescription` gives it (Foundation's default names only the type).
    public var errorDescription: String? { description }
}
