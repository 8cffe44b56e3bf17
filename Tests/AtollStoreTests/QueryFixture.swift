import AtollStore
import Foundation
import XCTest

/// The fixed data set of the query tests: 20 people (primary keys 1...20), their dogs, the dogs'
/// vets, and toys. Expected results in the tests are written out from this table.
///
/// | id | name    | age | height | born       | balance | flag | tags         | scores  | pet | toys        | city      |
/// |----|---------|-----|--------|------------|---------|------|--------------|---------|-----|-------------|-----------|
/// | 1  | Alice   | 30  | 1.60   | 1990-01-01 | 10.5    | T    | red, blue    | 1,2,3   | d1  | ball, bone  | Oslo      |
/// | 2  | bob     | 25  | 1.80   | 1995-06-15 | -3      | F    | blue         | 5       | d2  | ball        | Bergen    |
/// | 3  | Carol   | 35  | 1.75   | 1985-03-10 | 100     | T    |              |         |     |             |           |
/// | 4  | dave    | 40  | 1.90   | 1980-12-31 | 0.001   | F    | RED          | 10,20   | d3  | rope        | Oslo      |
/// | 5  | Eve     | 22  | 1.55   | 2002-02-02 | -0.5    | T    | green, red   | 3       | d1  | bone, rope  | Trondheim |
/// | 6  | ÉCOLE   | 50  | 1.70   | 1970-07-07 | 1E+40   | nil  | red          | 7,7     |     |             |           |
/// | 7  | école   | 18  | 1.65   | 2006-01-01 | 2.25    | F    |              |         | d4  | ball        | Bergen    |
/// | 8  | Frank   | 60  | 1.85   | 1960-05-05 | -1E+40  | T    | blue, blue   | 100     |     |             |           |
/// | 9  | grace   | 30  | 1.62   | 1990-01-01 | 10.50   | F    | yellow       | 2       | d2  | bone        | Oslo      |
/// | 10 | Heidi   | 45  | 1.68   | 1975-09-09 | 7       | T    |              | 1       |     |             |           |
/// | 11 | Ivan    | 33  | 1.77   | 1988-08-08 | 33.3    | nil  | red          |         | d3  | ball, ball  | Stavanger |
/// | 12 | judy    | 27  | 1.59   | 1994-04-04 | 0       | F    |              | 4,5     |     |             |           |
/// | 13 | Mallory | 29  | 1.72   | 1992-11-11 | -100    | T    | black        |         | d5  | rope        | Oslo      |
/// | 14 | Niaj    | 38  | 1.81   | 1983-03-03 | 5.5     | F    |              |         |     |             |           |
/// | 15 | Olivia  | 41  | 1.66   | 1980-01-01 | 12      | T    | white        | 9       | d4  | bone        | Bergen    |
/// | 16 | Peggy   | 55  | 1.58   | 1966-06-06 | 0.1     | F    |              |         |     |             |           |
/// | 17 | Rupert  | 19  | 1.92   | 2003-03-03 | 99.99   | T    | red, blue    | 8       | d5  | ball, rope  | Tromsø    |
/// | 18 | Sybil   | 24  | 1.61   | 1997-07-07 | 1.1     | F    |              |         |     |             |           |
/// | 19 | Trent   | nil | nil    | nil        | nil     | nil  |              |         |     |             |           |
/// | 20 | Walter  | nil | 1.74   | nil        | nil     | T    | red          | 6       | d1  |             | Oslo      |
///
/// Dogs: d1 Rex (vet v1), d2 Fido (v2), d3 Bella (no vet), d4 Max (v1), d5 Luna (v3).
/// Vets: v1 Dr. A in Oslo, v2 Dr. B in Bergen, v3 Dr. C in Oslo. Toys: ball (5), bone (3), rope (8).
/// `oid` is the id as 24 hex digits and `uid` the id as the UUID's last digits (nil for 19, 20);
/// `photo` is [1, 2, 3] for 1, empty for 2, nil otherwise.
enum QueryFixture {
    static let schema = Schema([
        ObjectSchema(name: "Person", primaryKey: "id", properties: [
            .int("id"), .string("name"), .int("age", optional: true),
            Property(name: "height", type: .double, isOptional: true),
            Property(name: "born", type: .date, isOptional: true),
            Property(name: "balance", type: .decimal128, isOptional: true),
            Property(name: "flag", type: .bool, isOptional: true),
            Property(name: "oid", type: .objectId, isOptional: true),
            Property(name: "uid", type: .uuid, isOptional: true),
            Property(name: "photo", type: .data, isOptional: true),
            .string("nick", optional: true),
            .list("tags", .string), .list("scores", .int),
            .link("pet", "Dog"), .links("toys", "Toy"),
            Property(name: "address", type: .object, objectType: "Address"),
        ]),
        ObjectSchema(name: "Dog", primaryKey: "id", properties: [.string("id"), .string("name"), .link("vet", "Vet")]),
        ObjectSchema(name: "Vet", primaryKey: "id", properties: [.string("id"), .string("name"), .string("city")]),
        ObjectSchema(name: "Toy", primaryKey: "id", properties: [.string("id"), .string("name"), .int("price")]),
        ObjectSchema(name: "Address", isEmbedded: true, properties: [.string("city")]),
    ])

    typealias Row = (id: Int64, name: String, age: Int64?, height: Double?, born: String?, balance: String?, flag: Bool?,
                     tags: [String], scores: [Int64], pet: String?, toys: [String], city: String?)

    static let people: [Row] = [
        (1, "Alice", 30, 1.60, "1990-01-01", "10.5", true, ["red", "blue"], [1, 2, 3], "d1", ["ball", "bone"], "Oslo"),
        (2, "bob", 25, 1.80, "1995-06-15", "-3", false, ["blue"], [5], "d2", ["ball"], "Bergen"),
        (3, "Carol", 35, 1.75, "1985-03-10", "100", true, [], [], nil, [], nil),
        (4, "dave", 40, 1.90, "1980-12-31", "0.001", false, ["RED"], [10, 20], "d3", ["rope"], "Oslo"),
        (5, "Eve", 22, 1.55, "2002-02-02", "-0.5", true, ["green", "red"], [3], "d1", ["bone", "rope"], "Trondheim"),
        (6, "ÉCOLE", 50, 1.70, "1970-07-07", "1E+40", nil, ["red"], [7, 7], nil, [], nil),
        (7, "école", 18, 1.65, "2006-01-01", "2.25", false, [], [], "d4", ["ball"], "Bergen"),
        (8, "Frank", 60, 1.85, "1960-05-05", "-1E+40", true, ["blue", "blue"], [100], nil, [], nil),
        (9, "grace", 30, 1.62, "1990-01-01", "10.50", false, ["yellow"], [2], "d2", ["bone"], "Oslo"),
        (10, "Heidi", 45, 1.68, "1975-09-09", "7", true, [], [1], nil, [], nil),
        (11, "Ivan", 33, 1.77, "1988-08-08", "33.3", nil, ["red"], [], "d3", ["ball", "ball"], "Stavanger"),
        (12, "judy", 27, 1.59, "1994-04-04", "0", false, [], [4, 5], nil, [], nil),
        (13, "Mallory", 29, 1.72, "1992-11-11", "-100", true, ["black"], [], "d5", ["rope"], "Oslo"),
        (14, "Niaj", 38, 1.81, "1983-03-03", "5.5", false, [], [], nil, [], nil),
        (15, "Olivia", 41, 1.66, "1980-01-01", "12", true, ["white"], [9], "d4", ["bone"], "Bergen"),
        (16, "Peggy", 55, 1.58, "1966-06-06", "0.1", false, [], [], nil, [], nil),
        (17, "Rupert", 19, 1.92, "2003-03-03", "99.99", true, ["red", "blue"], [8], "d5", ["ball", "rope"], "Tromsø"),
        (18, "Sybil", 24, 1.61, "1997-07-07", "1.1", false, [], [], nil, [], nil),
        (19, "Trent", nil, nil, nil, nil, nil, [], [], nil, [], nil),
        (20, "Walter", nil, 1.74, nil, nil, true, ["red"], [6], "d1", [], "Oslo"),
    ]

    static func oid(_ id: Int64) -> ObjectId { ObjectId(hex: String(format: "%024llx", id))! }
    static func uid(_ id: Int64) -> UUID { UUID(uuidString: "00000000-0000-0000-0000-" + String(format: "%012llx", id))! }
    static func date(_ day: String) -> Timestamp { Timestamp(iso8601: day)! }

    static func populate(_ store: Store) throws {
        try store.write {
            for (id, name, city) in [("v1", "Dr. A", "Oslo"), ("v2", "Dr. B", "Bergen"), ("v3", "Dr. C", "Oslo")] {
                try store.create("Vet", ["id": .string(id), "name": .string(name), "city": .string(city)])
            }
            for (id, name, vet) in [("d1", "Rex", "v1"), ("d2", "Fido", "v2"), ("d3", "Bella", nil), ("d4", "Max", "v1"),
                                    ("d5", "Luna", "v3")] as [(String, String, String?)] {
                try store.create("Dog", ["id": .string(id), "name": .string(name), "vet": vet.map { .string($0) } ?? .null])
            }
            for (id, price) in [("ball", 5), ("bone", 3), ("rope", 8)] as [(String, Int64)] {
                try store.create("Toy", ["id": .string(id), "name": .string(id), "price": .int(price)])
            }
            for p in people {
                var doc: Document = [
                    "id": .int(p.id), "name": .string(p.name),
                    "age": p.age.map { .int($0) } ?? .null,
                    "height": p.height.map { .double($0) } ?? .null,
                    "born": p.born.map { .date(date($0)) } ?? .null,
                    "balance": p.balance.map { .decimal(Decimal128($0)!) } ?? .null,
                    "flag": p.flag.map { .bool($0) } ?? .null,
                    "tags": .list(p.tags.map { .string($0) }),
                    "scores": .list(p.scores.map { .int($0) }),
                    "pet": p.pet.map { .string($0) } ?? .null,
                    "toys": .list(p.toys.map { .string($0) }),
                    "address": p.city.map { .object(["city": .string($0)]) } ?? .null,
                ]
                if p.id <= 18 {
                    doc["oid"] = .objectId(oid(p.id))
                    doc["uid"] = .uuid(uid(p.id))
                }
                if p.id == 1 { doc["photo"] = .data([1, 2, 3]) }
                if p.id == 2 { doc["photo"] = .data([]) }
                if p.id == 1 { doc["nick"] = .string("al") }
                try store.create("Person", doc)
            }
        }
    }
}

/// A test case whose store holds the query fixture (built once per test).
class QueryTestCase: XCTestCase {
    var store: Store!

    override func setUpWithError() throws {
        store = try openTemporaryStore(QueryFixture.schema)
        try QueryFixture.populate(store)
    }

    override func tearDown() {
        store = nil
    }

    /// Asserts the primary keys, in order, of the people a query returns.
    func check(_ query: String, _ expected: [Int64], file: StaticString = #filePath, line: UInt = #line) {
        check(query, [], expected, file: file, line: line)
    }

    /// Asserts the primary keys, in order, of the people a query with arguments returns.
    func check(_ query: String, _ arguments: [Value], _ expected: [Int64],
               file: StaticString = #filePath, line: UInt = #line) {
        do {
            let results = try store.objects("Person", where: query, arguments)
            let ids = try results.documents().map { $0["id"]?.intValue ?? -1 }
            XCTAssertEqual(ids, expected, "\(query)", file: file, line: line)
            XCTAssertEqual(try results.count(), expected.count, "count of \(query)", file: file, line: line)
        } catch {
            XCTFail("\(query): \(error)", file: file, line: line)
        }
    }

    /// The ids 1...20 but `excluded`, in order.
    func all(except excluded: [Int64]) -> [Int64] { (1...20).filter { !excluded.contains($0) } }
}
