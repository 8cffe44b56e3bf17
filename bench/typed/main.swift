// atoll-typed-bench: the benchmark workloads through the typed Swift API (module Atoll), written
// as a Realm Swift developer writes them: an `Object` subclass with `@Persisted` properties,
// `realm.write { realm.add(item) }`, `realm.objects(Item.self).filter(...)`,
// `realm.object(ofType:forPrimaryKey:)`, property reads and sets on managed objects.
//
//   usage: atoll-typed-bench DIR N
//
// Opens DIR/typed.realm (fresh) and runs W1..W4, I1, then W5. Prints "<name> <seconds>" lines,
// "check <name> <value>" lines and "#" comments (among them "# span <name> START END", in
// CLOCK_MONOTONIC seconds); bench/run parses them. Main figures: W1 W2 W3 W4 W5, and I1 (every
// object of the results read in a `for` loop, two properties each), which bench/report.py
// compares with the dynamic API's I1 (bench/swift/main.swift).
import Atoll
import AtollStore
import AtollBenchSupport
import Foundation

final class Item: Object {
    @Persisted(primaryKey: true) var _id = 0
    @Persisted var name = ""
    @Persisted(indexed: true) var age = 0
    @Persisted var owner = ""
}

let args = CommandLine.arguments
guard args.count == 3, let n = Int(args[2]), n >= 1000 else { fail("usage: atoll-typed-bench DIR N (N >= 1000)") }
let dir = args[1]

/// Fails the run when a call that cannot throw reported an error (`realm.lastError`).
func checkNoError(_ realm: Realm, _ workload: String) {
    if let error = realm.lastError { fail("\(workload): \(error)") }
}

do {
    print("# typed Swift API (Atoll: Object, @Persisted, Realm, Results), N=\(n)")
    let realm = try Realm(configuration: Realm.Configuration(
        fileURL: URL(fileURLWithPath: dir + "/typed.realm"), objectTypes: [Item.self]))

    // W1: n new Items added in one write transaction (making the objects included).
    do {
        let t0 = now()
        try realm.write {
            for i in 0..<n {
                let item = Item()
                item._id = i
                item.name = "name-\(i)"
                item.age = i % 100
                item.owner = "owner-\(i % 1000)"
                realm.add(item)
            }
        }
        // As in atoll-bench: glibc's deferred merging of the freed objects' memory is run here,
        // where it belongs, instead of in W2 (called through dlsym: the optimizer deletes a
        // plain malloc/free pair).
        free(opaqueMalloc(4096))
        let t1 = now()
        checkNoError(realm, "W1")
        let written = realm.objects(Item.self).count
        guard written == n else { fail("W1 wrote \(written) objects") }
        emit("W1", from: t0, to: t1)
        let file = try Store(AtollStore.Configuration(path: dir + "/typed.realm", readOnly: true))
        print("W1_file", try file.statistics().totalBytes)
        file.close()
    }

    // W2: count age == 42, 100 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<100 { c = realm.objects(Item.self).filter("age == $0", 42).count }
        emit("W2", from: t0, to: now())
        checkNoError(realm, "W2")
        print("check W2 \(c)")
    }

    // W3: count owner == 'owner-7' AND age > 50, 10 times.
    do {
        var c = 0
        let t0 = now()
        for _ in 0..<10 { c = realm.objects(Item.self).filter("owner == $0 AND age > $1", "owner-7", 50).count }
        emit("W3", from: t0, to: now())
        checkNoError(realm, "W3")
        print("check W3 \(c)")
    }

    // W4: 100,000 primary-key reads of name.
    do {
        let keys = w4Keys(n)
        var totalLength = 0
        let t0 = now()
        for k in keys {
            guard let name = realm.object(ofType: Item.self, forPrimaryKey: k)?.name else { fail("W4: no object \(k)") }
            totalLength += name.utf8.count
        }
        emit("W4", from: t0, to: now())
        checkNoError(realm, "W4")
        print("check W4 \(totalLength)")
    }

    // I1: every object of the results, in a for loop, reading two properties.
    do {
        var ages = 0
        var nameLength = 0
        var seen = 0
        let t0 = now()
        for item in realm.objects(Item.self) {
            ages += item.age
            nameLength += item.name.count
            seen += 1
        }
        emit("I1", from: t0, to: now())
        checkNoError(realm, "I1")
        guard seen == n else { fail("I1 read \(seen) objects") }
        print("check I1_age \(ages)")
        print("check I1_name \(nameLength)")
    }

    // W5: age = age + 1 on every object, object by object, in one write transaction: each found
    // by its primary key and changed through its property.
    do {
        var updated = 0
        let t0 = now()
        try realm.write {
            for id in 0..<n {
                guard let item = realm.object(ofType: Item.self, forPrimaryKey: id) else { continue }
                item.age += 1
                updated += 1
            }
        }
        emit("W5", from: t0, to: now())
        checkNoError(realm, "W5")
        guard updated == n else { fail("W5 updated \(updated) objects") }
        let sum: Int = realm.objects(Item.self).sum(of: \.age)
        checkNoError(realm, "W5 sum")
        print("check W5 \(sum)")
    }
} catch {
    fail("\(error)")
}
