/// One step into an object: a property name, or an index into a list.
///
/// Keys compare byte for byte (a dictionary's keys are user text: `ExactText`).
public enum PathElement: Hashable, Sendable {
    case key(String)
    case index(Int)

    public static func == (a: PathElement, b: PathElement) -> Bool {
        switch (a, b) {
        case let (.key(x), .key(y)): return ExactText.same(x, y)
        case let (.index(x), .index(y)): return x == y
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .key(let k): hasher.combine(0); ExactText.hash(k, into: &hasher)
        case .index(let i): hasher.combine(1); hasher.combine(i)
        }
    }
}

/// One instruction of a change-log entry: what one write did to one object.
///
/// Every instruction names its object by class and primary key (for a class without a primary
/// key, by its row key as `.int`). Changes inside embedded objects name the top-level owner and
/// a `path` into it. Values are canonical: links are `.link`, embedded objects `.object`.
public struct Instruction: Hashable, Sendable {
    public enum Op: UInt8, Sendable, CaseIterable {
        /// A new object, with every property at its default; `set`s follow for given values.
        case create = 1
        /// The object is gone, with its embedded objects; links to it became null.
        case erase = 2
        /// `path` now holds `value`.
        case set = 3
        /// `value` was inserted into the list at `path`, at `index`.
        case listInsert = 4
        /// The element at `index` of the list at `path` was removed.
        case listErase = 5
        /// The element at `index` of the list at `path` is now `value`.
        case listSet = 6
        /// The element at `index` moved to `toIndex`.
        case listMove = 7
        /// The list at `path` was emptied.
        case listClear = 8
        // 9 is taken by the encoding (a create with its values; see ChangeRecorder).
        /// `value` was added to the set at `path`.
        case setInsert = 10
        /// `value` was removed from the set at `path`.
        case setErase = 11
        /// The set at `path` was emptied.
        case setClear = 12
        /// The dictionary at `path` minus its last element now holds `value` under that last
        /// element's key: `path` is `[property, key]`.
        case dictionarySet = 13
        /// The key that ends `path` was removed from its dictionary.
        case dictionaryErase = 14
        /// The dictionary at `path` was emptied.
        case dictionaryClear = 15
        /// The integer at `path` grew by `value` (a counter: concurrent adds add up).
        case addInteger = 16

        public var name: String {
            switch self {
            case .create: return "create"
            case .erase: return "erase"
            case .set: return "set"
            case .listInsert: return "listInsert"
            case .listErase: return "listErase"
            case .listSet: return "listSet"
            case .listMove: return "listMove"
            case .listClear: return "listClear"
            case .setInsert: return "setInsert"
            case .setErase: return "setErase"
            case .setClear: return "setClear"
            case .dictionarySet: return "dictionarySet"
            case .dictionaryErase: return "dictionaryErase"
            case .dictionaryClear: return "dictionaryClear"
            case .addInteger: return "addInteger"
            }
        }
    }

    public var op: Op
    public var className: String
    public var primaryKey: Value
    public var path: [PathElement]
    public var value: Value?
    public var index: Int?
    public var toIndex: Int?

    public init(_ op: Op, _ className: String, _ primaryKey: Value, path: [PathElement] = [],
                value: Value? = nil, index: Int? = nil, toIndex: Int? = nil) {
        self.op = op
        self.className = className
        self.primaryKey = primaryKey
        self.path = path
        self.value = value
        self.index = index
        self.toIndex = toIndex
    }
}

/// The instructions of one committed write transaction.
public struct ChangeSet: Hashable, Sendable {
    /// The version this commit produced: 1 for the first commit that changed something.
    public var version: UInt64
    /// When it was committed (by the clock of the process that committed it).
    public var timestamp: Timestamp
    public var instructions: [Instruction]
}

extension Instruction.Op {
    /// Whether the instruction has a `value`.
    public var carriesValue: Bool {
        switch self {
        case .set, .listInsert, .listSet, .setInsert, .setErase, .dictionarySet, .addInteger: return true
        default: return false
        }
    }
}
