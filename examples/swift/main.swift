// The Swift quick start: a realm file, a schema, a write transaction, a query, live results.
// Run: swift run atoll-swift-example [path]
import AtollStore
import Foundation

let path = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "swift-example.realm"

let schema = Schema([
    ObjectSchema(name: "Person", primaryKey: "_id", properties: [
        Property(name: "_id", type: .string),
        Property(name: "name", type: .string),
    ]),
    ObjectSchema(name: "Dog", primaryKey: "_id", properties: [
        Property(name: "_id", type: .int),
        Property(name: "name", type: .string),
        Property(name: "age", type: .int, isOptional: true, isIndexed: true),
        Property(name: "owner", type: .object, objectType: "Person"),
        Property(name: "tags", type: .string, collection: .list),
    ]),
])

do {
    let realm = try Store(Configuration(path: path, schema: schema, schemaVersion: 1))
    defer { realm.close() }

    try realm.write {
        try realm.create("Dog", ["_id": .int(1), "name": .string("Rex"), "age": .int(3),
                                 "owner": .object(["_id": .string("ann"), "name": .string("Ann")]),
                                 "tags": .list([.string("good"), .string("loud")])], update: .modified)
        try realm.createMany("Dog", (2...5).map { i in
            ["_id": .int(Int64(i)), "name": .string("Dog \(i)"), "age": .int(Int64(i * 2)), "owner": .string("ann")]
        }, update: .modified)
    }
    print("wrote 5 dogs to \(path) (change log version \(try realm.version()))")

    let older = try realm.objects("Dog", where: "age > $0 AND owner.name == 'Ann' SORT(age DESC)", [.int(4)])
    print("dogs older than 4 owned by Ann: \(try older.count())")
    for dog in try older.documents() {
        print("  \(dog["name"]?.stringValue ?? "?") is \(dog["age"]?.intValue ?? 0)")
    }
    if let rex = try realm.object("Dog", primaryKey: .int(1)) {
        print("Rex's tags: \(rex["tags"] ?? .null)")
    }

    // Live results: another handle's commits arrive on the notifier thread as change sets.
    let changes = older.changes()
    let writer = try Store(Configuration(path: path))
    defer { writer.close() }
    for try await change in changes {
        if change.initial {
            print("observing \(change.count) dogs; another handle makes Dog 2 older and deletes Dog 5")
            try writer.write {
                try writer.create("Dog", ["_id": .int(2), "age": .int(12)], update: .modified)
                try writer.delete("Dog", primaryKey: .int(5))
            }
        } else {
            print("  inserted \(change.insertedKeys) at \(change.insertions), deleted \(change.deletedKeys), modified \(change.modifiedKeys), moves \(change.moves.map { "\($0.from)->\($0.to)" })")
            break
        }
    }
} catch let error as AtollError {
    print("error \(error.code): \(error.message)")
    exit(1)
}
