import AtollStore
import XCTest

/// To-one links and lists of links: by primary key, inline, missing, and after deletes.
final class LinksTests: XCTestCase {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .string("id"), .string("name"), .link("friend", "Person"), .link("note", "Note"),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [
            .int("id"), .string("name"), .link("owner", "Person"), .links("toys", "Toy"),
        ]),
        ObjectSchema(name: "Toy", primaryKey: "id", properties: [.string("id"), .string("name")]),
        ObjectSchema(name: "Note", properties: [.string("text")]),
    ])

    private func makeStore() throws -> Store {
        let store = try openTemporaryStore(Self.schema)
        try store.write {
            try store.create("Person", ["id": .string("p1"), "name": .string("Ann")])
            try store.create("Toy", ["id": .string("ball"), "name": .string("Ball")])
            try store.create("Toy", ["id": .string("bone"), "name": .string("Bone")])
        }
        return store
    }

    func testLinkByPrimaryKey() throws {
        let store = try makeStore()
        try store.write { try store.create("Dog", ["id": .int(1), "name": .string("Rex"), "owner": .string("p1")]) }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owner"), .string("p1"))
        XCTAssertEqual(try store.intKeys("Dog", "owner.name == 'Ann'"), [1])
    }

    func testNullLink() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Dog", ["id": .int(1), "owner": .null])
            try store.create("Dog", ["id": .int(2)])
        }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owner"), .null)
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(2), property: "owner"), .null)
    }

    func testInlineLinkedObjectIsCreated() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Dog", ["id": .int(2), "name": .string("Fido"),
                                     "owner": .object(["id": .string("p2"), "name": .string("Bo")])])
        }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(2), property: "owner"), .string("p2"))
        XCTAssertEqual(try store.object("Person", primaryKey: .string("p2"))?["name"], .string("Bo"))
        XCTAssertEqual(try store.objects("Person").count(), 2)
    }

    func testInlineLinkedObjectFollowsTheUpdatePolicy() throws {
        let store = try makeStore()
        let existing: Value = .object(["id": .string("p1"), "name": .string("Ann Updated")])
        try store.beginWrite()
        assertAtollError(try store.create("Dog", ["id": .int(3), "owner": existing]), .duplicatePrimaryKey,
                         "an object of class 'Person' with primary key 'p1' exists already")
        XCTAssertNil(try store.object("Dog", primaryKey: .int(3)), "the failed create left nothing")
        XCTAssertEqual(try store.object("Person", primaryKey: .string("p1"))?["name"], .string("Ann"))

        try store.create("Dog", ["id": .int(3), "owner": existing], update: .modified)
        try store.commit()
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(3), property: "owner"), .string("p1"))
        XCTAssertEqual(try store.object("Person", primaryKey: .string("p1"))?["name"], .string("Ann Updated"))
        XCTAssertEqual(try store.objects("Person").count(), 1)
    }

    /// A link to an object of the same class, written inline.
    func testInlineLinkToTheSameClass() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p3"), "name": .string("Cy"),
                                        "friend": .object(["id": .string("p4"), "name": .string("Dee")])])
        }
        let cy = try XCTUnwrap(store.object("Person", primaryKey: .string("p3")))
        XCTAssertEqual(cy["name"], .string("Cy"))
        XCTAssertEqual(cy["friend"], .string("p4"))
        XCTAssertEqual(try store.object("Person", primaryKey: .string("p4"))?["name"], .string("Dee"))
        XCTAssertEqual(try store.stringKeys("Person", "friend.name == 'Dee'"), ["p3"])
    }

    func testMissingLinkTarget() throws {
        let store = try makeStore()
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.create("Dog", ["id": .int(1), "owner": .string("nobody")]), .notFound,
                         "property 'Dog.owner': no Person with primary key 'nobody'")
        assertAtollError(try store.create("Dog", ["id": .int(1), "toys": .list([.string("ball"), .string("kite")])]),
                         .notFound, "element 1", "no Toy with primary key 'kite'")
        assertAtollError(try store.create("Dog", ["id": .int(1), "owner": .int(5)]), .typeMismatch,
                         "property 'Dog.owner' links to Person")
        assertAtollError(try store.create("Person", ["id": .string("p9"), "note": .string("n")]), .typeMismatch,
                         "class 'Note' has no primary key, so the link must be given as an object or as the target's key")
        assertAtollError(try store.create("Person", ["id": .string("p9"), "note": .int(1)]), .notFound,
                         "property 'Person.note': no Note with key 1")
        assertAtollError(try store.create("Dog", ["id": .int(1), "toys": .list([.null])]), .missingValue,
                         "cannot hold null")
        XCTAssertEqual(try store.objects("Dog").count(), 0)
    }

    func testLinkToAClassWithoutPrimaryKeyGivenInline() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p5"), "note": .object(["text": .string("hi")])])
        }
        let notes = try store.objects("Note").documents()
        XCTAssertEqual(notes, [["text": .string("hi")]])
        // Seen from outside, the link is the row key (the class has no primary key).
        XCTAssertEqual(try store.value("Person", primaryKey: .string("p5"), property: "note"),
                       .int(try store.objects("Note").keys()[0].rawValue))
    }

    func testListOfObjects() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Dog", ["id": .int(1), "toys": .list([
                .string("bone"), .object(["id": .string("rope"), "name": .string("Rope")]), .string("bone"),
            ])])
        }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "toys"),
                       .list([.string("bone"), .string("rope"), .string("bone")]))
        XCTAssertEqual(try store.object("Toy", primaryKey: .string("rope"))?["name"], .string("Rope"))
        XCTAssertEqual(try store.objects("Toy").count(), 3)
    }

    func testDeleteNullifiesLinksAndRemovesFromLists() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Dog", ["id": .int(1), "owner": .string("p1"),
                                     "toys": .list([.string("ball"), .string("bone"), .string("ball")])])
            try store.create("Dog", ["id": .int(2), "owner": .string("p1"), "toys": .list([.string("ball")])])
            try store.create("Person", ["id": .string("p2"), "friend": .string("p1")])
        }
        try store.write {
            try store.delete("Person", primaryKey: .string("p1"))
            try store.delete("Toy", primaryKey: .string("ball"))
        }
        XCTAssertNil(try store.object("Person", primaryKey: .string("p1")))
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owner"), .null)
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(2), property: "owner"), .null)
        XCTAssertEqual(try store.value("Person", primaryKey: .string("p2"), property: "friend"), .null)
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "toys"), .list([.string("bone")]))
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(2), property: "toys"), .list([]))
        XCTAssertEqual(try store.intKeys("Dog", "owner == nil"), [1, 2])
        XCTAssertEqual(try store.intKeys("Dog", "toys.@count == 0"), [2])
        // The dogs themselves stay.
        XCTAssertEqual(try store.objects("Dog").count(), 2)
    }

    func testDeleteErrors() throws {
        let store = try makeStore()
        assertAtollError(try store.delete("Person", primaryKey: .string("p1")), .notInWrite,
                         "delete: the realm is not in a write transaction")
        try store.beginWrite()
        defer { try? store.cancelWrite() }
        assertAtollError(try store.delete("Person", primaryKey: .string("zz")), .notFound,
                         "no object of class 'Person' with primary key 'zz'")
        assertAtollError(try store.delete("Nope", primaryKey: .string("p1")), .noSuchClass)
        assertAtollError(try store.delete("Person", primaryKey: .int(1)), .typeMismatch, "primary key of 'Person' is string")
        assertAtollError(try store.delete("Note", primaryKey: .int(1)), .typeMismatch, "class 'Note' has no primary key")
        try store.delete("Person", primaryKey: .string("p1"))
        assertAtollError(try store.delete("Person", primaryKey: .string("p1")), .notFound)
    }

    func testUpdatingALinkAndAList() throws {
        let store = try makeStore()
        try store.write {
            try store.create("Person", ["id": .string("p2"), "name": .string("Bo")])
            try store.create("Dog", ["id": .int(1), "owner": .string("p1"), "toys": .list([.string("ball")])])
        }
        try store.write {
            try store.create("Dog", ["id": .int(1), "owner": .string("p2"), "toys": .list([.string("bone"), .string("ball")])],
                             update: .modified)
        }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owner"), .string("p2"))
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "toys"), .list([.string("bone"), .string("ball")]))
        try store.write { try store.create("Dog", ["id": .int(1), "owner": .null], update: .all) }
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "owner"), .null)
        XCTAssertEqual(try store.value("Dog", primaryKey: .int(1), property: "toys"), .list([.string("bone"), .string("ball")]),
                       "a list left out of an update stays")
    }
}
