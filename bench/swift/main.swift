// atoll-bench: the benchmark workloads through the Swift store API (AtollStore).
//
//   usage: atoll-bench DIR N
//
// Opens DIR/main.realm (fresh) for W1..W4, I1 and W5, then DIR/each.realm (fresh) for W1
// written with create() one object at a time, then DIR/dm.realm for the data-model workloads
// D1..D4. Prints "<name> <seconds>" lines, "check <name> <value>" lines and "#" comments;
// bench/run parses them. Main figures: W1 W2 W3 W4 W5, and I1 (every object read page by page:
// the reference for the typed API's I1). Details: W1_build (the part of W1 spent building the
// Documents), W1_each, W5_read (the part of W5 spent reading ages).
import AtollStore
import CSQLite
import AtollBenchSupport
import Foundation

let args = CommandLine.arguments
guard args.count == 3, let n = Int(args[2]), n >= 1000 else { fail("usage: atoll-bench DIR N (N >= 1000)") }
let dir = args[1]

let schema = Schema([
    ObjectSchema(name: "Item", primaryKey: "_id", properties: [
        Property(name: "_id", type: .int),
        Property(name: "name", type: .string),
        Property(name: "age", type: .int, isIndexed: true),
        Property(name: "owner", type: .string),
    ]),
])

func document(_ i: Int) -> Document {
    ["_id": .int(Int64(i)), "name": .string("name-\(i)"), "age": .int(Int64(i % 100)),
     "owner": .string("owner-\(i % 1000)")]
}

/// sum(age) read straight from the file with SQLite, to check W5 did its work.
func sumOfAges(_ path: String) -> Int64 {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { fail("cannot open \(path)") }
    defer { sqlite3_close(db) }
    var s: OpaquePointer?
    guard sqlite3_prepare_v2(db, "SELECT sum(age) FROM \"Item\"", -1, &s, nil) == SQLITE_OK,
          sqlite3_step(s) == SQLITE_ROW else { fail("sum(age): \(String(cString: sqlite3_errmsg(db)))") }
    defer { sqlite3_finalize(s) }
    return sqlite3_column_int64(s, 0)
}

do {
    print("# Swift store API (AtollStore), SQLite \(String(cString: sqlite3_libversion())), N=\(n)")
    let mainPath = dir + "/main.realm"
    let store = try Store(Configuration(path: mainPath, schema: schema))

    // W1: createMany of all n Documents in one call, in one transaction (building them included).
    do {
        let t0 = now()
        var built = t0
        let written = try { () throws -> Int in
            var docs = [Document]()
            docs.reserveCapacity(n)
            for i in 0..<n { docs.append(document(i)) }
            built = now()
            try store.beginWrite()
            let written = try store.createMany("Item", docs)
            try store.commit()
            return written
        }()
        // The Documents are freed by now, but glibc defers merging their small chunks until the
        // next large allocation, which would otherwise land in W2 (tens to hundreds of ms at 1M
        // objects). A 4 KB allocation runs that merge here, where the cost belongs (called through
        // dlsym: the optimizer deletes a plain malloc/free pair).
        free(opaqueMalloc(4096))
        let t1 = now()
        guard written == n else { fail("W1 wrote \(written) objects") }
        emit("W1", from: t0, to: t1)
        emit("W1_build", built - t0)
        print("W1_file", try store.statistics().totalBytes)
    }

    // W2: count age == 42, 100 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<100 { c = try store.objects("Item", where: "age == $0", [.int(42)]).count() }
        emit("W2", from: t0, to: now())
        print("check W2 \(c)")
    }

    // W3: count owner == 'owner-7' AND age > 50, 10 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<10 {
            c = try store.objects("Item", where: "owner == $0 AND age > $1", [.string("owner-7"), .int(50)]).count()
        }
        emit("W3", from: t0, to: now())
        print("check W3 \(c)")
    }

    // W4: 100,000 primary-key reads of name.
    do {
        let keys = w4Keys(n).map(Int64.init)
        var totalLength = 0
        let t0 = now()
        for k in keys {
            guard case .string(let name)? = try store.value("Item", primaryKey: .int(k), property: "name") else {
                fail("W4: no object \(k)")
            }
            totalLength += name.utf8.count
        }
        emit("W4", from: t0, to: now())
        print("check W4 \(totalLength)")
    }

    // I1: every object, read in pages of 10,000 Documents, two properties each (what the typed
    // API's `for item in realm.objects(Item.self)` is compared with).
    do {
        var ages = 0
        var nameLength = 0
        var seen = 0
        let t0 = now()
        let items = try store.objects("Item")
        while true {
            let page = try items.documents(offset: seen, limit: 10_000)
            for doc in page {
                guard case .int(let age)? = doc["age"], case .string(let name)? = doc["name"] else {
                    fail("I1: an object without its age or name")
                }
                ages += Int(age)
                nameLength += name.count
            }
            seen += page.count
            if page.count < 10_000 { break }
        }
        emit("I1", from: t0, to: now())
        guard seen == n else { fail("I1 read \(seen) objects") }
        print("check I1_age \(ages)")
        print("check I1_name \(nameLength)")
    }

    // W5: age = age + 1 on every object, object by object, in one transaction, as raw SQLite
    // does it: read the age by primary key with value(), write it back with create(.modified).
    do {
        var readTime = 0.0
        var updated = 0
        let t0 = now()
        try store.beginWrite()
        for id in 0..<Int64(n) {
            let r0 = now()
            guard case .int(let age)? = try store.value("Item", primaryKey: .int(id), property: "age") else {
                fail("W5: no age for \(id)")
            }
            readTime += now() - r0
            try store.create("Item", ["_id": .int(id), "age": .int(age + 1)], update: .modified)
            updated += 1
        }
        try store.commit()
        emit("W5", from: t0, to: now())
        emit("W5_read", readTime)
        guard updated == n else { fail("W5 updated \(updated) objects") }
    }
    store.close()
    print("check W5 \(sumOfAges(mainPath))")

    // W1 again, on a fresh file, with create() one object at a time (one transaction).
    do {
        let each = try Store(Configuration(path: dir + "/each.realm", schema: schema))
        let t0 = now()
        try each.beginWrite()
        for i in 0..<n { try each.create("Item", document(i)) }
        try each.commit()
        emit("W1_each", from: t0, to: now())
        each.close()
    }
} catch {
    fail("\(error)")
}

// D1..D4, the data-model workloads (as bench/raw_sqlite.c's data_model()), on DIR/dm.realm
// with M = N / 10 owners: Owner {_id, name, tags: int[]}, Pet {_id, name, owner: Owner?}.
do {
    let m = n / 10
    let store = try Store(Configuration(path: dir + "/dm.realm", schema: Schema([
        ObjectSchema(name: "Owner", primaryKey: "_id", properties: [
            Property(name: "_id", type: .int), Property(name: "name", type: .string),
            Property(name: "tags", type: .int, collection: .list),
        ]),
        ObjectSchema(name: "Pet", primaryKey: "_id", properties: [
            Property(name: "_id", type: .int), Property(name: "name", type: .string),
            Property(name: "owner", type: .object, objectType: "Owner"),
        ]),
    ])))
    // D1: M owners with 10 list items each, one transaction (documents built inside the time).
    do {
        let t0 = now()
        try store.beginWrite()
        for i in 0..<m {
            try store.create("Owner", ["_id": .int(Int64(i)), "name": .string("owner-\(i)"),
                                       "tags": .list((0..<10).map { .int(Int64((i + $0) % 1000)) })])
        }
        try store.commit()
        emit("D1", from: t0, to: now())
    }
    try store.beginWrite()
    for j in 0..<m {
        try store.create("Pet", ["_id": .int(Int64(j)), "name": .string("pet-\(j)"), "owner": .int(Int64(j % (m / 2)))])
    }
    try store.commit()
    // D2: pets whose owner's name is 'owner-k', for 100 values of k.
    do {
        var total = 0
        let t0 = now()
        for k in 0..<100 {
            total += try store.objects("Pet", where: "owner.name == $0", [.string("owner-\(k * 7)")]).count()
        }
        emit("D2", from: t0, to: now())
        print("check D2 \(total)")
    }
    // D3: owners with two or more pets (a backlink count), 10 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<10 { c = try store.objects("Owner", where: "@links.Pet.owner.@count >= 2").count() }
        emit("D3", from: t0, to: now())
        print("check D3 \(c)")
    }
    // D4: owners whose tags hold 7, 10 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<10 { c = try store.objects("Owner", where: "tags == $0", [.int(7)]).count() }
        emit("D4", from: t0, to: now())
        print("check D4 \(c)")
    }
    store.close()
} catch {
    fail("data model: \(error)")
}
