/// The type of a property's values.
public enum PropertyType: String, Sendable, CaseIterable {
    case bool, int, float, double, string, data, date, objectId, uuid, decimal128
    /// A link to an object of `Property.objectType` (an embedded object when that class is
    /// embedded).
    case object

    /// Types a primary key may have.
    var canBePrimaryKey: Bool { self == .int || self == .string || self == .objectId || self == .uuid }
}

/// Whether a property holds one value or a collection of them.
public enum CollectionKind: String, Sendable {
    case single
    case list
}

/// One property of a class.
public struct Property: Hashable, Sendable {
    public var name: String
    public var type: PropertyType
    /// The target class of `.object` properties.
    public var objectType: String?
    public var collection: CollectionKind
    /// Whether the value (or, for lists, each element) may be null. To-one links always may.
    public var isOptional: Bool
    public var isIndexed: Bool
    /// The value given to new objects that leave the property out.
    public var defaultValue: Value?

    public init(name: String, type: PropertyType, objectType: String? = nil, collection: CollectionKind = .single,
                isOptional: Bool = false, isIndexed: Bool = false, defaultValue: Value? = nil) {
        self.name = name
        self.type = type
        self.objectType = objectType
        self.collection = collection
        self.isOptional = isOptional || (type == .object && collection == .single)
        self.isIndexed = isIndexed
        self.defaultValue = defaultValue
    }

    public var isList: Bool { collection == .list }
    public var isLink: Bool { type == .object }

    /// The Realm JS short notation: "int?", "string[]", "Person?", "Toy[]".
    public var typeName: String {
        let base = type == .object ? (objectType ?? "") : type.rawValue
        let optional = isOptional && !(type == .object && collection == .list) ? "?" : ""
        return base + optional + (collection == .list ? "[]" : "")
    }
}

/// One class: its name, primary key, properties, and whether it is embedded.
public struct ObjectSchema: Hashable, Sendable {
    public var name: String
    public var primaryKey: String?
    /// Embedded objects belong to one owner, have no primary key, and are deleted with it.
    public var isEmbedded: Bool
    public var properties: [Property]

    public init(name: String, primaryKey: String? = nil, isEmbedded: Bool = false, properties: [Property]) {
        self.name = name
        self.primaryKey = primaryKey
        self.isEmbedded = isEmbedded
        self.properties = properties
    }

    public subscript(property name: String) -> Property? { properties.first { $0.name == name } }

    public var primaryKeyProperty: Property? { primaryKey.flatMap { self[property: $0] } }
}

/// A realm's classes.
public struct Schema: Hashable, Sendable {
    public var classes: [ObjectSchema]

    public init(_ classes: [ObjectSchema] = []) { self.classes = classes }

    public subscript(name: String) -> ObjectSchema? { classes.first { $0.name == name } }

    /// Checks names, types, primary keys, link targets and defaults.
    /// - Throws: `AtollError` with code `.schema`, naming the class and property.
    public func validate() throws {
        var seen = Set<String>()
        for cls in classes {
            try validateName(cls.name, what: "class", maxBytes: 57)
            if cls.name.hasPrefix("_atoll_") || cls.name.lowercased().hasPrefix("sqlite_") {
                throw AtollError(.schema, "class name '\(cls.name)' is reserved")
            }
            guard seen.insert(cls.name.lowercased()).inserted else {
                let other = classes.first { $0.name != cls.name && $0.name.lowercased() == cls.name.lowercased() }
                if let other {
                    throw AtollError(.schema, "classes '\(other.name)' and '\(cls.name)' differ only in case, which SQLite's table names do not tell apart")
                }
                throw AtollError(.schema, "class '\(cls.name)' is defined twice")
            }
            var names = Set<String>()
            for p in cls.properties {
                let at = "\(cls.name).\(p.name)"
                try validateName(p.name, what: "property '\(cls.name).\(p.name)'", maxBytes: 63)
                if p.name.hasPrefix("_atoll_") { throw AtollError(.schema, "property name '\(at)' is reserved") }
                guard names.insert(p.name.lowercased()).inserted else {
                    if cls.properties.contains(where: { $0.name != p.name && $0.name.lowercased() == p.name.lowercased() }) {
                        throw AtollError(.schema, "property '\(at)' differs from another of '\(cls.name)' only in case, which SQLite's column names do not tell apart")
                    }
                    throw AtollError(.schema, "property '\(at)' is defined twice")
                }
                if p.type == .object {
                    guard let target = p.objectType, let targetClass = self[target] else {
                        throw AtollError(.schema, "property '\(at)' links to class '\(p.objectType ?? "")', which is not in the schema")
                    }
                    if p.isList, p.isOptional {
                        throw AtollError(.schema, "property '\(at)': lists of objects cannot hold null")
                    }
                    if p.isIndexed { throw AtollError(.schema, "property '\(at)': links cannot be indexed") }
                    if p.defaultValue != nil, p.defaultValue != .null {
                        throw AtollError(.schema, "property '\(at)': links cannot have a default")
                    }
                    _ = targetClass
                } else if p.objectType != nil {
                    throw AtollError(.schema, "property '\(at)' of type \(p.type.rawValue) cannot have an objectType")
                }
                if let d = p.defaultValue, p.type != .object {
                    do { _ = try p.coerce(d, className: cls.name) } catch let e as AtollError {
                        throw AtollError(.schema, "default of '\(at)': \(e.message)")
                    }
                }
            }
            if let pk = cls.primaryKey {
                guard !cls.isEmbedded else {
                    throw AtollError(.schema, "embedded class '\(cls.name)' cannot have a primary key")
                }
                guard let p = cls[property: pk] else {
                    throw AtollError(.schema, "primary key '\(pk)' of class '\(cls.name)' is not one of its properties")
                }
                guard p.collection == .single, p.type.canBePrimaryKey else {
                    throw AtollError(.schema, "primary key '\(cls.name).\(pk)' must be int, string, objectId or uuid, not \(p.typeName)")
                }
                guard !p.isOptional else {
                    throw AtollError(.schema, "primary key '\(cls.name).\(pk)' cannot be optional")
                }
            }
        }
    }

    private func validateName(_ name: String, what: String, maxBytes: Int) throws {
        guard !name.isEmpty else { throw AtollError(.schema, "\(what) has an empty name") }
        guard name.utf8.count <= maxBytes else {
            throw AtollError(.schema, "\(what) name '\(name)' is longer than \(maxBytes) bytes")
        }
        let bad = name.unicodeScalars.first {
            $0 == "." || $0 == "\"" || $0 == "@" || $0 == "$" || $0.properties.isWhitespace || $0.value < 0x20
        }
        if let bad { throw AtollError(.schema, "\(what) name '\(name)' contains '\(bad.escaped(asASCII: true))'") }
    }
}
