/// The type of a property's values.
public enum PropertyType: String, Sendable, CaseIterable {
    case bool, int, float, double, string, data, date, objectId, uuid, decimal128
    /// A link to an object of `Property.objectType` (an embedded object when that class is
    /// embedded).
    case object
    /// Any value: null, a scalar of any type above, a link to an object of any class, or a
    /// nested list or dictionary of such values (Realm's `AnyRealmValue`).
    case mixed
    /// The objects of `Property.objectType` whose property `Property.linkOriginProperty` links
    /// to this object: computed from those links, never stored or written.
    case linkingObjects

    /// Types a primary key may have.
    var canBePrimaryKey: Bool { self == .int || self == .string || self == .objectId || self == .uuid }
}

/// Whether a property holds one value or a collection of them.
public enum CollectionKind: String, Sendable {
    case single
    /// Ordered values; duplicates allowed.
    case list
    /// Distinct values (reads give them in insertion order).
    case set
    /// Values under distinct string keys (reads give them in key order).
    case dictionary
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
    /// For `.linkingObjects`: the link property of `objectType` that points here.
    public var linkOriginProperty: String?

    public init(name: String, type: PropertyType, objectType: String? = nil, collection: CollectionKind = .single,
                isOptional: Bool = false, isIndexed: Bool = false, defaultValue: Value? = nil,
                linkOriginProperty: String? = nil) {
        self.name = name
        self.type = type
        self.objectType = objectType
        self.collection = type == .linkingObjects ? .single : collection
        // To-one links, mixed values and dictionaries of links may always be null.
        self.isOptional = isOptional || type == .mixed
            || (type == .object && (collection == .single || collection == .dictionary))
        self.isIndexed = isIndexed
        self.defaultValue = defaultValue
        self.linkOriginProperty = linkOriginProperty
    }

    /// A list, set or dictionary: stored in a side table.
    public var isCollection: Bool { collection != .single }
    public var isList: Bool { collection == .list }
    public var isLink: Bool { type == .object }
    /// Computed from other objects' links (`linkingObjects`): not stored, not written.
    public var isComputed: Bool { type == .linkingObjects }

    /// The Realm JS short notation: "int?", "string[]", "Person?", "Toy[]", "int<>", "mixed{}",
    /// "linkingObjects<Person.dogs>".
    public var typeName: String {
        if type == .linkingObjects { return "linkingObjects<\(objectType ?? "").\(linkOriginProperty ?? "")>" }
        let base = type == .object ? (objectType ?? "") : type.rawValue
        let implicit = type == .mixed || (type == .object && collection != .single)
        let optional = isOptional && !implicit ? "?" : ""
        let suffix: String
        switch collection {
        case .single: suffix = ""
        case .list: suffix = "[]"
        case .set: suffix = "<>"
        case .dictionary: suffix = "{}"
        }
        return base + optional + suffix
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
                if p.type == .linkingObjects {
                    try validateBacklink(p, of: cls)
                } else if p.type == .object {
                    guard let target = p.objectType, let targetClass = self[target] else {
                        throw AtollError(.schema, "property '\(at)' links to class '\(p.objectType ?? "")', which is not in the schema")
                    }
                    if (p.isList || p.collection == .set), p.isOptional {
                        throw AtollError(.schema, "property '\(at)': lists and sets of objects cannot hold null")
                    }
                    if p.collection == .set, targetClass.isEmbedded {
                        throw AtollError(.schema, "property '\(at)': sets cannot hold embedded objects ('\(target)' is embedded)")
                    }
                    if p.isIndexed { throw AtollError(.schema, "property '\(at)': links cannot be indexed") }
                    if p.defaultValue != nil, p.defaultValue != .null {
                        throw AtollError(.schema, "property '\(at)': links cannot have a default")
                    }
                } else if p.objectType != nil {
                    throw AtollError(.schema, "property '\(at)' of type \(p.type.rawValue) cannot have an objectType")
                }
                if p.isIndexed, p.isCollection {
                    throw AtollError(.schema, "property '\(at)': only single values can be indexed, not a \(p.collection.rawValue)")
                }
                if let d = p.defaultValue, p.type != .object {
                    guard !p.isCollection, !p.isComputed else {
                        throw AtollError(.schema, "property '\(at)': a \(p.isComputed ? "linkingObjects property" : p.collection.rawValue) cannot have a default")
                    }
                    if p.type == .mixed {
                        guard d.isScalar else { throw AtollError(.schema, "default of '\(at)': a mixed default must be a single value") }
                    } else {
                        do { _ = try p.coerce(d, className: cls.name) } catch let e as AtollError {
                            throw AtollError(.schema, "default of '\(at)': \(e.message)")
                        }
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

    /// A `linkingObjects` property must name a link property of its class that points back.
    private func validateBacklink(_ p: Property, of cls: ObjectSchema) throws {
        let at = "\(cls.name).\(p.name)"
        guard let sourceName = p.objectType, let source = self[sourceName] else {
            throw AtollError(.schema, "property '\(at)': linkingObjects from class '\(p.objectType ?? "")', which is not in the schema")
        }
        guard let originName = p.linkOriginProperty, let origin = source[property: originName] else {
            throw AtollError(.schema, "property '\(at)': class '\(sourceName)' has no property '\(p.linkOriginProperty ?? "")' to link back through")
        }
        guard origin.type == .object, origin.objectType == cls.name else {
            throw AtollError(.schema, "property '\(at)': '\(sourceName).\(originName)' is \(origin.typeName), not a link to '\(cls.name)'")
        }
        if p.isIndexed || p.defaultValue != nil {
            throw AtollError(.schema, "property '\(at)': linkingObjects properties cannot be indexed or have a default")
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
