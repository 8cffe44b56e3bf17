import Atoll
import AtollTestSupport
import Foundation
import XCTest

/// A class for the configuration tests (not in the other tests' objectTypes).
class Setting: Object {
    @Persisted(primaryKey: true) var key = ""
    @Persisted var value: AnyRealmValue
}

/// Links to a `Setting`, whose mixed value may hold it back.
class SettingTag: Object {
    @Persisted(primaryKey: true) var name = ""
    @Persisted var setting: Setting?
}

final class RealmTests: XCTestCase {
    let types: [ObjectBase.Type] = [Owner.self, Pet.self, Address.self, Note.self]

    func configuration(_ path: String? = nil) -> Realm.Configuration {
        Realm.Configuration(fileURL: URL(fileURLWithPath: path ?? temporaryRealmPath()), objectTypes: types)
    }

    func pet(_ id: Int, _ name: String, age: Int? = nil) -> Pet {
        Pet(value: ["id": id, "name": name, "age": age as Any])
    }

    // MARK: - Configuration

    func testDefaultConfigurationIsWhatRealmOpens() throws {
        let saved = Realm.Configuration.defaultConfiguration
        defer { Realm.Configuration.defaultConfiguration = saved }
        let path = temporaryRealmPath()
        Realm.Configuration.defaultConfiguration = configuration(path)
        let realm = try Realm()
        XCTAssertEqual(realm.configuration.fileURL?.path, path)
        try realm.write { realm.add(pet(1, "Tom")) }
        XCTAssertTrue(Realm.fileExists(for: Realm.Configuration.defaultConfiguration))
    }

    func testInMemoryRealmsShareTheirDataByIdentifier() throws {
        let id = "memory-\(UUID().uuidString)"
        let a = try Realm(configuration: Realm.Configuration(inMemoryIdentifier: id, objectTypes: types))
        let b = try Realm(configuration: Realm.Configuration(inMemoryIdentifier: id, objectTypes: types))
        try a.write { a.add(pet(1, "Tom")) }
        XCTAssertEqual(b.objects(Pet.self).first?.name, "Tom")
        XCTAssertFalse(Realm.fileExists(for: a.configuration))
    }

    func testReadOnlyRealmRefusesWrites() throws {
        let path = temporaryRealmPath()
        do {
            let realm = try Realm(configuration: configuration(path))
            try realm.write { realm.add(pet(1, "Tom")) }
        }
        var readOnly = configuration(path)
        readOnly.readOnly = true
        let realm = try Realm(configuration: readOnly)
        XCTAssertEqual(realm.objects(Pet.self).count, 1)
        XCTAssertThrowsError(try realm.write {}) { XCTAssertEqual(($0 as? AtollError)?.code, .readOnly) }
    }

    func testObjectTypesLimitTheSchema() throws {
        let realm = try Realm(configuration: configuration())
        XCTAssertNil(realm.schema["Setting"])
        XCTAssertNotNil(realm.schema["Address"], "classes that the given ones link to are in")
        XCTAssertEqual(realm.objects(Setting.self).count, 0)
        XCTAssertEqual(realm.objects(Setting.self).error?.code, .noSuchClass)
    }

    func testClassesUsedLaterAreAddedWhenObjectTypesIsNil() throws {
        // Two classes named "Note" have been used: one schema keeps the first.
        _ = Note()
        _ = OtherNote()
        let path = temporaryRealmPath()
        let realm = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: path)))
        try realm.write { realm.add(Setting(value: ["key": "theme", "value": AnyRealmValue.string("dark")])) }
        XCTAssertNotNil(realm.schema["Setting"])
        XCTAssertEqual(realm.object(ofType: Setting.self, forPrimaryKey: "theme")?.value, .string("dark"))
        XCTAssertEqual(realm.schema["Note"]?[property: "text"]?.typeName, "string")
    }

    func testMigrationBlockMovesData() throws {
        let path = temporaryRealmPath()
        do {
            let realm = try Realm(configuration: configuration(path))
            try realm.write { realm.add([pet(1, "tom"), pet(2, "rex")]) }
        }
        var next = configuration(path)
        next.schemaVersion = 2
        let seen = Collector<UInt64>()
        next.migrationBlock = { migration, oldVersion in
            seen.append(oldVersion)
            migration.enumerateObjects(ofType: "Pet") { old, new in
                new?["name"] = (old?["name"] as? String)?.capitalized
            }
        }
        let realm = try Realm(configuration: next)
        XCTAssertEqual(seen.all, [0])
        XCTAssertEqual(realm.objects(Pet.self).sorted(byKeyPath: "id").map(\.name), ["Tom", "Rex"])
    }

    func testDeleteRealmIfMigrationNeeded() throws {
        let path = temporaryRealmPath()
        do {
            let realm = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: path), objectTypes: [Note.self, Pet.self, Owner.self, Address.self]))
            try realm.write { realm.add(Note(value: ["text": "hi"])) }
        }
        // The same class name with another shape needs a migration.
        var changed = Realm.Configuration(fileURL: URL(fileURLWithPath: path), objectTypes: [OtherNote.self])
        XCTAssertThrowsError(try Realm(configuration: changed)) { XCTAssertEqual(($0 as? AtollError)?.code, .schemaMismatch) }
        changed.deleteRealmIfMigrationNeeded = true
        let realm = try Realm(configuration: changed)
        XCTAssertEqual(realm.objects(OtherNote.self).count, 0)
    }

    func testShouldCompactOnLaunchIsAsked() throws {
        let path = temporaryRealmPath()
        do {
            let realm = try Realm(configuration: configuration(path))
            try realm.write { for i in 0..<200 { realm.add(pet(i, String(repeating: "x", count: 500))) } }
            try realm.write { realm.delete(realm.objects(Pet.self)) }
        }
        let asked = Collector<Int>()
        var config = configuration(path)
        config.shouldCompactOnLaunch = { total, used in
            asked.append(total)
            return used < total
        }
        _ = try Realm(configuration: config)
        XCTAssertEqual(asked.all.count, 1)
    }

    // MARK: - Transactions

    func testCancelWriteKeepsNothing() throws {
        let realm = try Realm(configuration: configuration())
        try realm.beginWrite()
        realm.add(pet(1, "Tom"))
        XCTAssertTrue(realm.isInWriteTransaction)
        realm.cancelWrite()
        XCTAssertEqual(realm.objects(Pet.self).count, 0)
        try realm.beginWrite()
        realm.add(pet(2, "Rex"))
        try realm.commitWrite()
        XCTAssertEqual(realm.objects(Pet.self).map(\.name), ["Rex"])
    }

    func testAWriteThatThrowsKeepsNothing() throws {
        struct Stop: Error {}
        let realm = try Realm(configuration: configuration())
        XCTAssertThrowsError(try realm.write {
            realm.add(pet(1, "Tom"))
            throw Stop()
        })
        XCTAssertFalse(realm.isInWriteTransaction)
        XCTAssertEqual(realm.objects(Pet.self).count, 0)
    }

    // MARK: - Adding, creating, deleting

    func testAddWithUpdatePolicies() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write { realm.add(pet(1, "Tom", age: 3)) }
        XCTAssertThrowsError(try realm.write { realm.add(pet(1, "Tom")) }) {
            XCTAssertEqual(($0 as? AtollError)?.code, .duplicatePrimaryKey)
        }
        try realm.write { realm.add(pet(1, "Thomas", age: 3), update: .modified) }
        let tom = try XCTUnwrap(realm.object(ofType: Pet.self, forPrimaryKey: 1))
        XCTAssertEqual(tom.name, "Thomas")
        XCTAssertEqual(tom.age, 3)
        XCTAssertThrowsError(try realm.write { realm.add(Note(value: ["text": "x"]), update: .modified) }) {
            XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument)
        }
    }

    func testCreateFromDictionaryArrayAndObject() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write {
            let a = try realm.create(Pet.self, value: ["id": 1, "name": "Tom", "nicknames": ["T", "Tommy"]])
            XCTAssertEqual(a.nicknames.toArray(), ["T", "Tommy"])
            XCTAssertTrue(a.isGood, "properties not given take the class's defaults")
            let b = try realm.create(Pet.self, value: [2, "Rex"])
            XCTAssertEqual(b.name, "Rex")
            let c = try realm.create(Owner.self, value: ["name": "Ann", "pets": [["id": 3, "name": "Kit"]], "address": ["city": "Oslo"]])
            XCTAssertEqual(c.pets.first?.name, "Kit")
            XCTAssertEqual(c.address?.city, "Oslo")
            try realm.create(Pet.self, value: ["id": 1, "age": 9], update: .modified)
            XCTAssertEqual(a.age, 9)
            XCTAssertEqual(a.name, "Tom")
        }
        XCTAssertThrowsError(try realm.write { try realm.create(Pet.self, value: ["id": 5, "nope": 1]) }) {
            XCTAssertEqual(($0 as? AtollError)?.code, .noSuchProperty)
        }
        XCTAssertThrowsError(try realm.create(Pet.self, value: ["id": 6])) { XCTAssertEqual(($0 as? AtollError)?.code, .notInWrite) }
    }

    func testDeleteInvalidatesAndUnlinks() throws {
        let realm = try Realm(configuration: configuration())
        let owner = Owner(value: ["name": "Ann"])
        let tom = pet(1, "Tom")
        owner.pets.append(tom)
        owner.bestPet = tom
        try realm.write { realm.add(owner) }
        XCTAssertEqual(tom.owners.map(\.name), ["Ann"])
        try realm.write { realm.delete(tom) }
        XCTAssertTrue(tom.isInvalidated)
        XCTAssertNil(owner.bestPet)
        XCTAssertEqual(owner.pets.count, 0)
        realm.delete(owner)
        XCTAssertEqual(realm.lastError?.code, .notInWrite)
        try realm.write { realm.deleteAll() }
        XCTAssertTrue(realm.isEmpty)
    }

    func testAddingObjectsThatLinkInACycle() throws {
        let realm = try Realm(configuration: configuration())
        let ann = Owner(value: ["name": "Ann"])
        let tom = pet(1, "Tom")
        let note = Note(value: ["text": "about Tom"])
        note.pet = tom
        ann.bestPet = tom
        ann.pets.append(tom)
        try realm.write {
            realm.add(ann)
            realm.add(note)
        }
        XCTAssertEqual(realm.objects(Pet.self).count, 1)
        XCTAssertEqual(note.pet?.name, "Tom")
        XCTAssertEqual(tom.owners.first?.name, "Ann")
    }

    // MARK: - Values

    func testEveryScalarRoundTrips() throws {
        let realm = try Realm(configuration: configuration())
        let born = Date(timeIntervalSince1970: 1_700_000_000.123)
        let tag = UUID()
        let p = Pet()
        p.id = 7
        p.name = "Spot"
        p.age = 4
        p.weight = 12.5
        p.price = try Decimal128(string: "19.99")
        p.born = born
        p.tag = tag
        p.photo = Data([1, 2, 3])
        p.isGood = false
        p.nicknames.append(objectsIn: ["S"])
        p.tags.insert("a")
        p.tags.insert("a")
        p.scores["x"] = 1
        try realm.write { realm.add(p) }
        let read = try XCTUnwrap(realm.object(ofType: Pet.self, forPrimaryKey: 7))
        XCTAssertEqual(read.name, "Spot")
        XCTAssertEqual(read.age, 4)
        XCTAssertEqual(read.weight, 12.5)
        XCTAssertEqual(read.price, Decimal128("19.99"))
        XCTAssertEqual(read.born.timeIntervalSince1970, 1_700_000_000.123, accuracy: 0.001)
        XCTAssertEqual(read.tag, tag)
        XCTAssertEqual(read.photo, Data([1, 2, 3]))
        XCTAssertFalse(read.isGood)
        XCTAssertEqual(read.nicknames.toArray(), ["S"])
        XCTAssertEqual(Array(read.tags), ["a"])
        XCTAssertEqual(read.scores["x"], 1)
        try realm.write { read.age = nil }
        XCTAssertNil(p.age)
    }

    func testObjectIdAndDecimal128FromText() throws {
        let id = ObjectId.generate()
        XCTAssertEqual(try ObjectId(string: id.stringValue), id)
        XCTAssertThrowsError(try ObjectId(string: "xyz")) { XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument) }
        XCTAssertEqual(try Decimal128(string: "1.50").description, "1.5", "trailing zeros are normalized away")
        XCTAssertEqual(Decimal128(3), try Decimal128(string: "3"))
        XCTAssertThrowsError(try Decimal128(string: "1.2.3")) { XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument) }
    }

    func testACycleThroughAMixedValueIsAdded() throws {
        let realm = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()),
                                                                 objectTypes: [Setting.self, SettingTag.self]))
        let setting = Setting(value: ["key": "theme"])
        let tag = SettingTag(value: ["name": "ui"])
        setting.value = .object(tag)
        tag.setting = setting
        try realm.write { realm.add(setting) }
        XCTAssertEqual(realm.object(ofType: Setting.self, forPrimaryKey: "theme")?.value.object(SettingTag.self)?.name, "ui")
        XCTAssertEqual(realm.object(ofType: SettingTag.self, forPrimaryKey: "ui")?.setting?.key, "theme")
    }

    func testAnyRealmValueHoldsEveryKind() throws {
        let realm = try Realm(configuration: Realm.Configuration(fileURL: URL(fileURLWithPath: temporaryRealmPath()),
                                                                 objectTypes: [Setting.self, Pet.self] + types))
        let tom = pet(1, "Tom")
        let values: [AnyRealmValue] = [.none, .int(3), .bool(true), .double(2.5), .string("s"), .data(Data([9])),
                                       .date(Date(timeIntervalSince1970: 5)), .objectId(ObjectId.generate()),
                                       .decimal128(Decimal128("1.5")!), .uuid(UUID()), .object(tom),
                                       .list([.int(1), .string("two")]), .dictionary(["k": .bool(false)])]
        try realm.write {
            for (i, v) in values.enumerated() { realm.add(Setting(value: ["key": "k\(i)", "value": v])) }
        }
        for (i, v) in values.enumerated() {
            let read = realm.object(ofType: Setting.self, forPrimaryKey: "k\(i)")?.value
            if case .object = v {
                XCTAssertEqual(read?.object(Pet.self)?.name, "Tom")
            } else {
                XCTAssertEqual(read, v, "value \(i)")
            }
        }
    }

    // MARK: - Embedded objects and collections

    func testEmbeddedObjectsAreEditedInPlace() throws {
        let realm = try Realm(configuration: configuration())
        let ann = Owner(value: ["name": "Ann", "address": ["street": "Main", "city": "Oslo"]])
        ann.previousAddresses.append(Address(value: ["city": "Rome"]))
        ann.previousAddresses.append(Address(value: ["city": "Lima"]))
        try realm.write { realm.add(ann) }
        let address = try XCTUnwrap(ann.address)
        XCTAssertEqual(address.city, "Oslo")
        try realm.write {
            address.city = "Bergen"
            ann.previousAddresses[1].country = "Peru"
        }
        XCTAssertEqual(ann.address?.city, "Bergen")
        XCTAssertEqual(ann.address?.street, "Main")
        XCTAssertEqual(ann.previousAddresses.map(\.city), ["Rome", "Lima"])
        XCTAssertEqual(ann.previousAddresses[1].country, "Peru")
        try realm.write { ann.address = nil }
        XCTAssertNil(ann.address)
    }

    func testManagedListOperations() throws {
        let realm = try Realm(configuration: configuration())
        let ann = Owner(value: ["name": "Ann"])
        try realm.write { realm.add(ann) }
        try realm.write {
            ann.pets.append(pet(1, "a"))
            ann.pets.append(pet(2, "b"))
            ann.pets.insert(pet(3, "c"), at: 0)
        }
        XCTAssertEqual(ann.pets.map(\.name), ["c", "a", "b"])
        try realm.write {
            ann.pets.move(from: 0, to: 2)
            ann.pets.remove(at: 0)
        }
        XCTAssertEqual(ann.pets.map(\.name), ["b", "c"])
        try realm.write { ann.pets[0] = realm.object(ofType: Pet.self, forPrimaryKey: 1)! }
        XCTAssertEqual(ann.pets.map(\.name), ["a", "c"])
        XCTAssertEqual(realm.objects(Pet.self).count, 3, "removing from a list does not delete the object")
        try realm.write { ann.pets.removeAll() }
        XCTAssertTrue(ann.pets.isEmpty)
        ann.pets.append(pet(9, "z"))
        XCTAssertEqual(realm.lastError?.code, .notInWrite)
        // A failed change inside a write fails its commit: nothing of the transaction is kept.
        XCTAssertThrowsError(try realm.write {
            ann.pets.append(pet(11, "x"))
            ann.pets.insert(pet(10, "y"), at: 5)
        }) { XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument) }
        XCTAssertEqual(realm.lastError?.code, .invalidArgument)
        XCTAssertTrue(ann.pets.isEmpty)
        XCTAssertNil(realm.object(ofType: Pet.self, forPrimaryKey: 11))
    }

    func testManagedSetAndMap() throws {
        let realm = try Realm(configuration: configuration())
        let tom = pet(1, "Tom")
        try realm.write { realm.add(tom) }
        try realm.write {
            tom.tags.insert("a")
            tom.tags.insert("b")
            tom.tags.insert("a")
            tom.scores["x"] = 1
            tom.scores["y"] = 2
        }
        XCTAssertEqual(Set(tom.tags), ["a", "b"])
        XCTAssertTrue(tom.tags.contains("b"))
        XCTAssertEqual(tom.scores["y"], 2)
        XCTAssertEqual(Set(tom.scores.keys), ["x", "y"])
        try realm.write {
            tom.tags.remove("a")
            tom.scores["x"] = nil
            tom.scores["y"] = 3
        }
        XCTAssertEqual(Array(tom.tags), ["b"])
        XCTAssertEqual(tom.scores.keys, ["y"])
        XCTAssertEqual(tom.scores["y"], 3)
    }

    // MARK: - Results

    func testResultsFilterSortDistinctAndAggregates() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write {
            realm.add([pet(1, "Tom", age: 3), pet(2, "Rex", age: 7), pet(3, "Kit", age: 3), pet(4, "Max")])
        }
        let all = realm.objects(Pet.self)
        XCTAssertEqual(all.count, 4)
        XCTAssertEqual(all.filter("age > $0", 2).sorted(byKeyPath: "name").map(\.name), ["Kit", "Rex", "Tom"])
        XCTAssertEqual(all.filter("age == $0", 3).filter("name BEGINSWITH $0", "K").map(\.name), ["Kit"])
        XCTAssertEqual(all.sorted(by: \.name, ascending: false).map(\.name), ["Tom", "Rex", "Max", "Kit"])
        XCTAssertEqual(all.sorted(by: [SortDescriptor(keyPath: "age"), SortDescriptor(keyPath: "name", ascending: false)]).map(\.name),
                       ["Max", "Tom", "Kit", "Rex"])
        XCTAssertEqual(all.filter("age != nil").distinct(by: ["age"]).count, 2)
        XCTAssertEqual(all.min(ofProperty: "age") as Int?, 3)
        XCTAssertEqual(all.max(of: \.age), 7)
        XCTAssertEqual(all.sum(ofProperty: "age") as Int, 13)
        XCTAssertEqual(try XCTUnwrap(all.average(ofProperty: "age") as Double?), 13.0 / 3, accuracy: 1e-9)
        XCTAssertNil(all.filter("id > 100").max(ofProperty: "age") as Int?)
        // A filter's own descriptors apply to the combined query, whatever follows it.
        XCTAssertEqual(all.filter("age > $0 SORT(name DESC)", 2).filter("name != $0", "Tom").map(\.name), ["Rex", "Kit"])
        XCTAssertEqual(all.filter("SORT(id DESC) LIMIT(2)").map(\.id), [4, 3])
        // Aggregates are over the objects the results hold: a LIMIT of the query counts.
        XCTAssertEqual(all.filter("age != nil SORT(age ASC) LIMIT(2)").max(ofProperty: "age") as Int?, 3)
        XCTAssertEqual(all.filter("age != nil SORT(age DESC) LIMIT(1)").sum(ofProperty: "age") as Int, 7)
        XCTAssertEqual(all.filter("id > 100").sum(ofProperty: "weight") as Double, 0)
        XCTAssertEqual(all[1].name, "Rex")
        XCTAssertEqual(all.index(of: all[2]), 2)
        XCTAssertEqual(Array(all.filter("name == $0", "Rex")).first?.id, 2)
    }

    func testResultsAreLive() throws {
        let realm = try Realm(configuration: configuration())
        let old = realm.objects(Pet.self).filter("age > 5")
        XCTAssertEqual(old.count, 0)
        try realm.write { realm.add(pet(1, "Tom", age: 9)) }
        XCTAssertEqual(old.count, 1)
        try realm.write { old[0].age = 2 }
        XCTAssertEqual(old.count, 0)
    }

    func testABadQueryIsAnErrorAndEmpty() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write { realm.add(pet(1, "Tom")) }
        let bad = realm.objects(Pet.self).filter("nope == 1")
        XCTAssertEqual(bad.count, 0)
        XCTAssertEqual(bad.error?.code, .queryInvalid)
        XCTAssertEqual(realm.objects(Pet.self).filter("name ==").error?.code, .querySyntax)
        _ = realm.objects(Pet.self)[5]
        XCTAssertEqual(realm.lastError?.code, .invalidArgument)
    }

    // MARK: - Files, refresh, freeze

    func testWriteCopyFileExistsAndDeleteFiles() throws {
        let realm = try Realm(configuration: configuration())
        try realm.write { realm.add(pet(1, "Tom")) }
        let copy = configuration()
        XCTAssertFalse(Realm.fileExists(for: copy))
        try realm.writeCopy(configuration: copy)
        XCTAssertTrue(Realm.fileExists(for: copy))
        do {
            let opened = try Realm(configuration: copy)
            XCTAssertEqual(opened.objects(Pet.self).first?.name, "Tom")
            XCTAssertThrowsError(try Realm.deleteFiles(for: copy)) { XCTAssertEqual(($0 as? AtollError)?.code, .busy) }
        }
        XCTAssertTrue(try Realm.deleteFiles(for: copy))
        XCTAssertFalse(Realm.fileExists(for: copy))
    }

    func testRefreshSeesAnotherRealmsCommits() throws {
        let config = configuration()
        let reader = try Realm(configuration: config)
        let writer = try Realm(configuration: config)
        XCTAssertEqual(reader.objects(Pet.self).count, 0)
        try writer.write { writer.add(pet(1, "Tom")) }
        XCTAssertEqual(reader.objects(Pet.self).count, 0, "a realm reads its snapshot until it refreshes")
        XCTAssertTrue(reader.refresh())
        XCTAssertEqual(reader.objects(Pet.self).count, 1)
    }

    func testFrozenObjectsKeepTheirValues() throws {
        let realm = try Realm(configuration: configuration())
        let tom = pet(1, "Tom")
        try realm.write { realm.add(tom) }
        let frozen = try tom.freeze()
        XCTAssertTrue(frozen.isFrozen)
        XCTAssertTrue(try tom.freeze().realm === frozen.realm, "freezing again, unchanged, shares the frozen realm")
        try realm.write { tom.name = "Thomas" }
        XCTAssertEqual(frozen.name, "Tom")
        XCTAssertEqual(frozen.thaw()?.name, "Thomas")
        let frozenRealm = try XCTUnwrap(frozen.realm)
        XCTAssertThrowsError(try frozenRealm.write {}) { XCTAssertEqual(($0 as? AtollError)?.code, .readOnly) }
        let results = try realm.objects(Pet.self).freeze()
        XCTAssertFalse(results.realm === frozen.realm, "a write since makes a new frozen realm")
        try realm.write { realm.add(pet(2, "Rex")) }
        XCTAssertEqual(results.count, 1)
        XCTAssertEqual(results.thaw().count, 2)
    }

    func testMisuseIsAnErrorNotACrash() throws {
        let realm = try Realm(configuration: configuration())
        let other = try Realm(configuration: configuration())
        let tom = pet(1, "Tom")
        try other.write { other.add(tom) }
        XCTAssertThrowsError(try realm.write { realm.add(tom) }) { XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument) }
        XCTAssertThrowsError(try realm.write { realm.delete(Pet()) }) { XCTAssertEqual(($0 as? AtollError)?.code, .invalidArgument) }
        tom.setValue(1, forKey: "nope")
        XCTAssertEqual(other.lastError?.code, .noSuchProperty)
        XCTAssertNil(tom.value(forKey: "nope"))
        XCTAssertEqual(tom["name"] as? String, "Tom")
        try other.write { tom["name"] = "Thomas" }
        XCTAssertEqual(tom.name, "Thomas")
    }
}

/// A class named as `Note` in the schema but shaped otherwise (a schema change).
class OtherNote: Object {
    override class func className() -> String { "Note" }
    @Persisted var text = 0
}
