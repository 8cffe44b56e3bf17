import AtollStore
import XCTest

final class SchemaValidationTests: XCTestCase {
    private func person(_ extra: [Property] = [], primaryKey: String? = "id") -> ObjectSchema {
        ObjectSchema(name: "Person", primaryKey: primaryKey, properties: [.int("id"), .string("name")] + extra)
    }

    func testAValidSchemaPasses() throws {
        let schema = Schema([
            person([.link("dog", "Dog"), .list("tags", .string), .links("toys", "Toy"),
                    Property(name: "address", type: .object, objectType: "Address")]),
            ObjectSchema(name: "Dog", primaryKey: "id", properties: [Property(name: "id", type: .objectId)]),
            ObjectSchema(name: "Toy", primaryKey: "id", properties: [Property(name: "id", type: .uuid)]),
            ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city")]),
            ObjectSchema(name: "Log", properties: [.string("text", default: .string("-"))]),
        ])
        XCTAssertNoThrow(try schema.validate())
    }

    func testDuplicateClass() {
        let schema = Schema([person(), person()])
        assertAtollError(try schema.validate(), .schema, "class 'Person' is defined twice")
    }

    func testDuplicateProperty() {
        let schema = Schema([person([.int("name")])])
        assertAtollError(try schema.validate(), .schema, "property 'Person.name' is defined twice")
    }

    func testUnknownLinkTarget() {
        assertAtollError(try Schema([person([.link("dog", "Dog")])]).validate(), .schema,
                         "property 'Person.dog' links to class 'Dog', which is not in the schema")
        assertAtollError(try Schema([person([.links("dogs", "Dog")])]).validate(), .schema,
                         "'Person.dogs' links to class 'Dog'")
        let noTarget = Property(name: "dog", type: .object)
        assertAtollError(try Schema([person([noTarget])]).validate(), .schema, "links to class ''")
    }

    func testOptionalPrimaryKey() {
        let schema = Schema([ObjectSchema(name: "Person", primaryKey: "id", properties: [.int("id", optional: true)])])
        assertAtollError(try schema.validate(), .schema, "primary key 'Person.id' cannot be optional")
    }

    func testPrimaryKeyTypes() {
        for type in [PropertyType.double, .float, .bool, .date, .data, .decimal128] {
            let schema = Schema([ObjectSchema(name: "A", primaryKey: "k", properties: [Property(name: "k", type: type)])])
            assertAtollError(try schema.validate(), .schema,
                             "primary key 'A.k' must be int, string, objectId or uuid, not \(type.rawValue)")
        }
        for type in [PropertyType.int, .string, .objectId, .uuid] {
            let schema = Schema([ObjectSchema(name: "A", primaryKey: "k", properties: [Property(name: "k", type: type)])])
            XCTAssertNoThrow(try schema.validate(), "\(type)")
        }
        let list = Schema([ObjectSchema(name: "A", primaryKey: "k", properties: [.list("k", .int)])])
        assertAtollError(try list.validate(), .schema, "must be int, string, objectId or uuid, not int[]")
    }

    func testPrimaryKeyMustBeAProperty() {
        assertAtollError(try Schema([person(primaryKey: "nope")]).validate(), .schema,
                         "primary key 'nope' of class 'Person' is not one of its properties")
    }

    func testEmbeddedClassCannotHaveAPrimaryKey() {
        let schema = Schema([ObjectSchema(name: "Address", primaryKey: "city", isEmbedded: true, properties: [.string("city")])])
        assertAtollError(try schema.validate(), .schema, "embedded class 'Address' cannot have a primary key")
    }

    func testReservedNames() {
        assertAtollError(try Schema([ObjectSchema(name: "_atoll_meta", properties: [])]).validate(), .schema,
                         "class name '_atoll_meta' is reserved")
        assertAtollError(try Schema([ObjectSchema(name: "sqlite_stuff", properties: [])]).validate(), .schema,
                         "class name 'sqlite_stuff' is reserved")
        assertAtollError(try Schema([ObjectSchema(name: "SQLITE_X", properties: [])]).validate(), .schema, "is reserved")
        assertAtollError(try Schema([person([.int("_atoll_key")])]).validate(), .schema,
                         "property name 'Person._atoll_key' is reserved")
    }

    func testNamesWithForbiddenCharacters() {
        assertAtollError(try Schema([ObjectSchema(name: "A.B", properties: [])]).validate(), .schema,
                         "class name 'A.B' contains '.'")
        assertAtollError(try Schema([person([.int("a.b")])]).validate(), .schema,
                         "property 'Person.a.b' name 'a.b' contains '.'")
        for bad in ["a b", "a\"b", "a@b", "a$b", "a\tb"] {
            assertAtollError(try Schema([ObjectSchema(name: bad, properties: [])]).validate(), .schema, "contains")
            assertAtollError(try Schema([person([.int(bad)])]).validate(), .schema, "contains")
        }
        assertAtollError(try Schema([ObjectSchema(name: "", properties: [])]).validate(), .schema, "empty name")
        assertAtollError(try Schema([person([.int("")])]).validate(), .schema, "empty name")
        // Unicode names are fine.
        XCTAssertNoThrow(try Schema([ObjectSchema(name: "Hund", properties: [.string("größe")])]).validate())
    }

    func testNameLengthLimits() {
        let long57 = String(repeating: "a", count: 57)
        XCTAssertNoThrow(try Schema([ObjectSchema(name: long57, properties: [])]).validate())
        assertAtollError(try Schema([ObjectSchema(name: long57 + "a", properties: [])]).validate(), .schema,
                         "is longer than 57 bytes")
        assertAtollError(try Schema([person([.int(String(repeating: "p", count: 64))])]).validate(), .schema,
                         "is longer than 63 bytes")
    }

    func testListsOfObjectsCannotHoldNull() {
        let schema = Schema([person([Property(name: "pals", type: .object, objectType: "Person", collection: .list,
                                              isOptional: true)])])
        assertAtollError(try schema.validate(), .schema, "property 'Person.pals': lists and sets of objects cannot hold null")
    }

    func testLinksCannotBeIndexedOrHaveDefaults() {
        let indexed = Property(name: "pal", type: .object, objectType: "Person", isIndexed: true)
        assertAtollError(try Schema([person([indexed])]).validate(), .schema, "links cannot be indexed")
        let withDefault = Property(name: "pal", type: .object, objectType: "Person", defaultValue: .int(1))
        assertAtollError(try Schema([person([withDefault])]).validate(), .schema, "links cannot have a default")
    }

    func testObjectTypeOnAScalar() {
        let p = Property(name: "n", type: .int, objectType: "Person")
        assertAtollError(try Schema([person([p])]).validate(), .schema, "property 'Person.n' of type int cannot have an objectType")
    }

    func testDefaultsMustFitTheirType() {
        assertAtollError(try Schema([person([.int("n", default: .string("five"))])]).validate(), .schema,
                         "default of 'Person.n'", "is int; got string 'five'")
        assertAtollError(try Schema([person([.int("n", default: .null)])]).validate(), .schema,
                         "default of 'Person.n'", "cannot be null")
        XCTAssertNoThrow(try Schema([person([.int("n", optional: true, default: .null)])]).validate())
        XCTAssertNoThrow(try Schema([person([Property(name: "d", type: .double, defaultValue: .int(5))])]).validate())
    }

    func testOpeningWithAnInvalidSchemaFails() throws {
        let path = temporaryRealmPath()
        assertAtollError(try Store(Configuration(path: path, schema: Schema([person(), person()]))), .schema,
                         "defined twice")
    }

    /// SQLite's names are case-insensitive; class and property names are not. Two names that
    /// differ only in case must either both work or be refused as a schema error.
    func testClassNamesThatDifferOnlyInCase() throws {
        let schema = Schema([ObjectSchema(name: "Dog", properties: [.string("name")]),
                             ObjectSchema(name: "dog", properties: [.string("name")])])
        do {
            let store = try openTemporaryStore(schema)
            try store.write {
                try store.create("Dog", ["name": .string("upper")])
                try store.create("dog", ["name": .string("lower")])
            }
            XCTAssertEqual(try store.objects("Dog").documents(), [["name": .string("upper")]])
            XCTAssertEqual(try store.objects("dog").documents(), [["name": .string("lower")]])
        } catch let error as AtollError {
            XCTAssertEqual(error.code, .schema, "\(error.code): \(error.message)")
        }
    }

    func testPropertyNamesThatDifferOnlyInCase() throws {
        let schema = Schema([ObjectSchema(name: "Dog", properties: [.string("name"), .int("Name")])])
        do {
            let store = try openTemporaryStore(schema)
            try store.write { try store.create("Dog", ["name": .string("Rex"), "Name": .int(3)]) }
            XCTAssertEqual(try store.objects("Dog").documents(), [["name": .string("Rex"), "Name": .int(3)]])
        } catch let error as AtollError {
            XCTAssertEqual(error.code, .schema, "\(error.code): \(error.message)")
        }
    }

    func testTypeNames() {
        XCTAssertEqual(Property.int("a").typeName, "int")
        XCTAssertEqual(Property.int("a", optional: true).typeName, "int?")
        XCTAssertEqual(Property.list("a", .string).typeName, "string[]")
        XCTAssertEqual(Property.list("a", .int, optional: true).typeName, "int?[]")
        XCTAssertEqual(Property.link("a", "Person").typeName, "Person?")
        XCTAssertEqual(Property.links("a", "Toy").typeName, "Toy[]")
    }
}
