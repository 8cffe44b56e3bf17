import AtollStore
import CJansson

/// Reads and writes schemas in the Realm JS object-schema notation (docs/schema.md):
///
/// ```json
/// {"name": "Dog", "primaryKey": "_id", "embedded": false,
///  "properties": {"_id": "objectId", "age": "int?", "owner": "Person?", "tags": "string[]",
///                 "name": {"type": "string", "indexed": true, "default": "Rex"}}}
/// ```
public enum SchemaJSON {
    /// A schema from a JSON array of object schemas (not yet validated: `Schema.validate()`).
    /// - Throws: `.schema` naming the class and property that cannot be read.
    public static func schema(_ json: JSONRef) throws -> Schema {
        guard json.pointee.type == JSON_ARRAY else {
            throw AtollError(.schema, "the schema must be an array of object schemas, not \(EJSON.kind(json))")
        }
        var classes = [ObjectSchema]()
        for i in 0..<json_array_size(json) {
            classes.append(try objectSchema(json_array_get(json, i), index: i))
        }
        return Schema(classes)
    }

    private static func objectSchema(_ json: JSONRef, index: Int) throws -> ObjectSchema {
        guard json.pointee.type == JSON_OBJECT else {
            throw AtollError(.schema, "schema entry \(index) must be an object, not \(EJSON.kind(json))")
        }
        guard let nameRef = json_object_get(json, "name"), nameRef.pointee.type == JSON_STRING else {
            throw AtollError(.schema, "schema entry \(index) needs a \"name\" string")
        }
        let name = try EJSON.validString(nameRef)
        for key in keys(json) where !["name", "primaryKey", "embedded", "properties", "asymmetric"].contains(key) {
            throw AtollError(.schema, "class '\(name)': unknown key '\(key)'")
        }
        var primaryKey: String?
        if let pk = json_object_get(json, "primaryKey"), pk.pointee.type != JSON_NULL {
            guard pk.pointee.type == JSON_STRING else { throw AtollError(.schema, "class '\(name)': \"primaryKey\" must be a string") }
            primaryKey = try EJSON.validString(pk)
        }
        let embedded = try flag(json, "embedded", "class '\(name)'")
        if try flag(json, "asymmetric", "class '\(name)'") {
            throw AtollError(.schema, "class '\(name)': asymmetric classes are not supported")
        }
        guard let props = json_object_get(json, "properties"), props.pointee.type == JSON_OBJECT else {
            throw AtollError(.schema, "class '\(name)' needs a \"properties\" object")
        }
        var properties = [Property]()
        var iter = json_object_iter(props)
        while let it = iter {
            let pname = String(cString: json_object_iter_key(it))
            properties.append(try property(pname, json_object_iter_value(it), className: name))
            iter = json_object_iter_next(props, it)
        }
        return ObjectSchema(name: name, primaryKey: primaryKey, isEmbedded: embedded, properties: properties)
    }

    private static func keys(_ json: JSONRef) -> [String] {
        var out = [String]()
        var iter = json_object_iter(json)
        while let it = iter {
            out.append(String(cString: json_object_iter_key(it)))
            iter = json_object_iter_next(json, it)
        }
        return out
    }

    private static func flag(_ json: JSONRef, _ key: String, _ context: String) throws -> Bool {
        guard let v = json_object_get(json, key), v.pointee.type != JSON_NULL else { return false }
        guard v.pointee.type == JSON_TRUE || v.pointee.type == JSON_FALSE else {
            throw AtollError(.schema, "\(context): \"\(key)\" must be true or false")
        }
        return v.pointee.type == JSON_TRUE
    }

    private static let scalarTypes: [String: PropertyType] = [
        "bool": .bool, "int": .int, "float": .float, "double": .double, "string": .string, "data": .data,
        "date": .date, "objectId": .objectId, "uuid": .uuid, "decimal128": .decimal128, "decimal": .decimal128,
        "mixed": .mixed,
    ]

    private static let unsupported: Set<String> = ["counter"]
    private static let collectionTypes: [String: CollectionKind] = ["list": .list, "set": .set, "dictionary": .dictionary]

    private static func property(_ name: String, _ json: JSONRef, className: String) throws -> Property {
        let at = "property '\(className).\(name)'"
        if json.pointee.type == JSON_STRING {
            return try shorthand(name, try EJSON.validString(json), at: at)
        }
        guard json.pointee.type == JSON_OBJECT else {
            throw AtollError(.schema, "\(at) must be a type string or an object, not \(EJSON.kind(json))")
        }
        for key in keys(json) where !["type", "objectType", "optional", "indexed", "default", "mapTo", "property"].contains(key) {
            throw AtollError(.schema, "\(at): unknown key '\(key)'")
        }
        guard let typeRef = json_object_get(json, "type"), typeRef.pointee.type == JSON_STRING else {
            throw AtollError(.schema, "\(at) needs a \"type\" string")
        }
        let typeName = try EJSON.validString(typeRef)
        var objectType: String?
        if let o = json_object_get(json, "objectType"), o.pointee.type != JSON_NULL {
            guard o.pointee.type == JSON_STRING else { throw AtollError(.schema, "\(at): \"objectType\" must be a string") }
            objectType = try EJSON.validString(o)
        }
        let optionalGiven = json_object_get(json, "optional") != nil
        let optional = try flag(json, "optional", at)
        let indexed = try flag(json, "indexed", at)
        var defaultValue: Value?
        if let d = json_object_get(json, "default") {
            do { defaultValue = try EJSON.value(d) } catch let e as AtollError {
                throw AtollError(.schema, "\(at): default: \(e.message)")
            }
        }
        var p: Property
        if let collection = collectionTypes[typeName] {
            guard let element = objectType else { throw AtollError(.schema, "\(at): a \(typeName) needs an \"objectType\"") }
            if let scalar = scalarTypes[element] {
                p = Property(name: name, type: scalar, collection: collection, isOptional: optional)
            } else if unsupported.contains(element) || collectionTypes[element] != nil || element == "object" || element == "linkingObjects" {
                throw AtollError(.schema, "\(at): a \(typeName) of \(element) is not supported")
            } else {
                if optional, collection != .dictionary { throw AtollError(.schema, "\(at): \(typeName)s of objects cannot hold null") }
                p = Property(name: name, type: .object, objectType: element, collection: collection)
            }
        } else if typeName == "linkingObjects" {
            guard let source = objectType else { throw AtollError(.schema, "\(at): linkingObjects needs an \"objectType\" (the class that links here)") }
            guard let origin = json_object_get(json, "property"), origin.pointee.type == JSON_STRING else {
                throw AtollError(.schema, "\(at): linkingObjects needs a \"property\" string (the link property of '\(source)')")
            }
            p = Property(name: name, type: .linkingObjects, objectType: source, linkOriginProperty: try EJSON.validString(origin))
        } else if typeName == "object" {
            guard let target = objectType else { throw AtollError(.schema, "\(at): an object property needs an \"objectType\"") }
            if optionalGiven, !optional { throw AtollError(.schema, "\(at): links to objects are always optional") }
            p = Property(name: name, type: .object, objectType: target)
        } else if let scalar = scalarTypes[typeName] {
            p = Property(name: name, type: scalar, isOptional: optional)
        } else if unsupported.contains(typeName) {
            throw AtollError(.schema, "\(at): type '\(typeName)' is not supported")
        } else {
            // {"type": "Person"} is a link, as in Realm JS.
            p = try shorthand(name, typeName, at: at)
            if optionalGiven, !optional, p.type == .object, !p.isCollection { throw AtollError(.schema, "\(at): links to objects are always optional") }
            p.isOptional = p.isOptional || optional
        }
        if json_object_get(json, "property") != nil, p.type != .linkingObjects {
            throw AtollError(.schema, "\(at): \"property\" belongs to linkingObjects properties only")
        }
        p.isIndexed = indexed
        p.defaultValue = defaultValue
        return p
    }

    /// "int", "int?", "string[]", "string?[]", "Person", "Person?", "Toy[]", "int<>", "Dog<>",
    /// "int{}", "Dog{}", "mixed", "mixed[]".
    private static func shorthand(_ name: String, _ text: String, at: String) throws -> Property {
        var base = Substring(text)
        var collection = CollectionKind.single
        for (suffix, kind) in [("[]", CollectionKind.list), ("<>", .set), ("{}", .dictionary)] where base.hasSuffix(suffix) {
            collection = kind
            base = base.dropLast(2)
            break
        }
        var optional = false
        if base.hasSuffix("?") { optional = true; base = base.dropLast() }
        guard !base.isEmpty else { throw AtollError(.schema, "\(at): empty type") }
        let typeName = String(base)
        if let scalar = scalarTypes[typeName] {
            return Property(name: name, type: scalar, collection: collection, isOptional: optional)
        }
        if unsupported.contains(typeName) { throw AtollError(.schema, "\(at): type '\(typeName)' is not supported") }
        if ["list", "object", "set", "dictionary", "linkingObjects"].contains(typeName) {
            throw AtollError(.schema, "\(at): type '\(typeName)' needs the object form with an \"objectType\"")
        }
        if optional, collection == .list || collection == .set {
            throw AtollError(.schema, "\(at): \(collection.rawValue)s of objects cannot hold null ('\(text)')")
        }
        return Property(name: name, type: .object, objectType: typeName, collection: collection)
    }

    /// The schema as a JSON array in the object form (new reference).
    public static func make(_ schema: Schema) -> JSONRef {
        let array = json_array()!
        for cls in schema.classes {
            let object = json_object()!
            json_object_set_new(object, "name", EJSON.makeString(cls.name))
            if let pk = cls.primaryKey { json_object_set_new(object, "primaryKey", EJSON.makeString(pk)) }
            json_object_set_new(object, "embedded", cls.isEmbedded ? json_true() : json_false())
            let props = json_object()!
            for p in cls.properties {
                let pj = json_object()!
                if p.isComputed {
                    json_object_set_new(pj, "type", EJSON.makeString("linkingObjects"))
                    json_object_set_new(pj, "objectType", EJSON.makeString(p.objectType ?? ""))
                    json_object_set_new(pj, "property", EJSON.makeString(p.linkOriginProperty ?? ""))
                } else if p.isCollection {
                    json_object_set_new(pj, "type", EJSON.makeString(p.collection.rawValue))
                    json_object_set_new(pj, "objectType", EJSON.makeString(p.type == .object ? p.objectType ?? "" : p.type.rawValue))
                } else if p.type == .object {
                    json_object_set_new(pj, "type", EJSON.makeString("object"))
                    json_object_set_new(pj, "objectType", EJSON.makeString(p.objectType ?? ""))
                } else {
                    json_object_set_new(pj, "type", EJSON.makeString(p.type.rawValue))
                }
                json_object_set_new(pj, "optional", p.isOptional ? json_true() : json_false())
                json_object_set_new(pj, "indexed", p.isIndexed ? json_true() : json_false())
                if let d = p.defaultValue { json_object_set_new(pj, "default", EJSON.make(d)) }
                json_object_set_new(props, p.name, pj)
            }
            json_object_set_new(object, "properties", props)
            json_array_append_new(array, object)
        }
        return array
    }
}

/// Reads a store configuration from JSON: {"path", "inMemory", "schema", "schemaVersion",
/// "readOnly", "writeTimeoutMs", "deleteRealmIfMigrationNeeded", "notifications", "durability",
/// "changeLogValues"}.
public enum ConfigurationJSON {
    /// - Throws: `.invalidJSON`, `.invalidArgument` (unknown keys, wrong types), `.schema`.
    public static func configuration(_ text: UnsafePointer<CChar>) throws -> Configuration {
        let json = try EJSON.load(text)
        defer { json_decref(json) }
        guard json.pointee.type == JSON_OBJECT else {
            throw AtollError(.invalidJSON, "the configuration must be a JSON object, not \(EJSON.kind(json))")
        }
        var config = Configuration()
        var iter = json_object_iter(json)
        while let it = iter {
            let key = String(cString: json_object_iter_key(it))
            let v = json_object_iter_value(it)!
            func bool() throws -> Bool {
                guard v.pointee.type == JSON_TRUE || v.pointee.type == JSON_FALSE else {
                    throw AtollError(.invalidArgument, "configuration \"\(key)\" must be true or false")
                }
                return v.pointee.type == JSON_TRUE
            }
            func integer() throws -> Int64 {
                guard v.pointee.type == JSON_INTEGER else {
                    throw AtollError(.invalidArgument, "configuration \"\(key)\" must be an integer")
                }
                return Int64(json_integer_value(v))
            }
            switch key {
            case "path":
                guard v.pointee.type == JSON_STRING else { throw AtollError(.invalidArgument, "configuration \"path\" must be a string") }
                config.path = try EJSON.validString(v)
            case "inMemory": config.inMemory = try bool()
            case "deleteRealmIfMigrationNeeded": config.deleteRealmIfMigrationNeeded = try bool()
            case "readOnly": config.readOnly = try bool()
            case "changeLogValues": config.changeLogValues = try bool()
            case "schemaVersion":
                let n = try integer()
                guard n >= 0 else { throw AtollError(.invalidArgument, "configuration \"schemaVersion\" must be >= 0, not \(n)") }
                config.schemaVersion = UInt64(n)
            case "writeTimeoutMs":
                let n = try integer()
                guard n >= -1 else { throw AtollError(.invalidArgument, "configuration \"writeTimeoutMs\" must be -1 or >= 0, not \(n)") }
                config.writeTimeoutMilliseconds = n < 0 ? nil : Int(n)
            case "schema":
                if v.pointee.type != JSON_NULL { config.schema = try SchemaJSON.schema(v) }
            case "notifications":
                guard v.pointee.type == JSON_STRING, let mode = NotificationDelivery(rawValue: String(cString: json_string_value(v))) else {
                    throw AtollError(.invalidArgument, "configuration \"notifications\" must be \"thread\" or \"host\"")
                }
                config.notificationDelivery = mode
            case "durability":
                guard v.pointee.type == JSON_STRING, let d = Durability(rawValue: String(cString: json_string_value(v))) else {
                    throw AtollError(.invalidArgument, "configuration \"durability\" must be \"full\" or \"normal\"")
                }
                config.durability = d
            default:
                throw AtollError(.invalidArgument, "unknown configuration key \"\(key)\"")
            }
            iter = json_object_iter_next(json, it)
        }
        return config
    }
}
