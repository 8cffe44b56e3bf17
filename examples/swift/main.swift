// The Swift quick start: Realm Swift's model and query code, on Linux.
// Run: swift run atoll-swift-example [path]
import Atoll
import Foundation
import Observation

let path = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "doggodb.realm"
let config = Realm.Configuration(fileURL: URL(fileURLWithPath: path), objectTypes: [Person.self, Dog.self])
Realm.Configuration.defaultConfiguration = config

do {
    let realm = try Realm()

    // Write: people with their dogs; the dogs are added with them.
    try realm.write {
        let ann = Person(value: ["firstName": "Ann", "lastName": "Lee", "personId": "ann-1"])
        ann.businessUnit = .sales
        ann.dogs.append(Dog(value: ["name": "Rex", "breed": "Collie", "weight": 25, "yearOfBirth": 2019, "currentCity": "Oslo"]))
        ann.dogs.append(Dog(value: ["name": "Pip", "breed": "Pug", "weight": 8, "yearOfBirth": 2022, "currentCity": "Oslo"]))
        let bo = Person(value: ["firstName": "Bo", "lastName": "Ng", "personId": "bo-2"])
        bo.dogs.append(Dog(value: ["name": "Max", "breed": "Collie", "weight": 30, "yearOfBirth": 2016, "currentCity": "Rome"]))
        realm.add([ann, bo])
    }
    print("\(realm.objects(Person.self).count) people, \(realm.objects(Dog.self).count) dogs in \(path)")

    // Query: type-safe, through links, with aggregates.
    let collies = realm.objects(Dog.self).where { $0.breed == "Collie" && $0.weight > 20 }.sorted(byKeyPath: "name")
    print("collies over 20 kg: \(collies.map(\.name))")
    let inSales = realm.objects(Dog.self).where { $0.person.businessUnit == .sales }
    print("dogs of people in sales: \(inSales.map(\.name)), average weight \(inSales.average(ofProperty: "weight") as Double? ?? 0)")
    if let rex = collies.first, let owner = rex.person.first {
        print("\(rex.name) belongs to \(owner.firstName), born \(rex.yearOfBirth)")
    }

    // Projection: a view model over a person, live and writable.
    let profiles = realm.objects(Profile.self).sorted(byKeyPath: "firstName")
    for profile in profiles {
        print("profile: \(profile.firstName) \(profile.lastNameInitial.map(String.init) ?? "").  (\(profile.businessUnit.rawValue), \(profile.dogs.count) dogs)")
    }

    // Live data: @Observable results (SwiftUI's @ObservedResults) and a change listener. Both
    // get the initial state first, asynchronously (as in Realm): wait for it, then write.
    let dogs = ObservedResults(Dog.self, sortDescriptor: SortDescriptor(keyPath: "weight"))
    let ready = DispatchSemaphore(value: 0)
    var reports = 0
    withObservationTracking { reports = dogs.changeCount } onChange: { ready.signal() }
    if reports == 0 { _ = ready.wait(timeout: .now() + 5) }
    let changed = DispatchSemaphore(value: 0)
    withObservationTracking { _ = dogs.wrappedValue.count } onChange: { changed.signal() }

    let listening = DispatchSemaphore(value: 0)
    let listened = DispatchSemaphore(value: 0)
    let token = realm.objects(Dog.self).observe(keyPaths: ["weight"]) { change in
        switch change {
        case .initial(let results):
            print("  listener: \(results.count) dogs")
            listening.signal()
        case .update(let results, let deletions, let insertions, let modifications):
            print("  listener: deleted \(deletions), inserted \(insertions), modified \(modifications); now \(results.count) dogs")
            listened.signal()
        case .error(let error):
            print("  listener: \(error)")
            listened.signal()
        }
    }
    _ = listening.wait(timeout: .now() + 5)
    let writer = try Realm()   // another handle on the file: its commits are seen too
    try writer.write {
        writer.objects(Dog.self).where { $0.name == "Pip" }.first?.weight = 9
        writer.delete(writer.objects(Dog.self).where { $0.name == "Max" })
    }
    _ = listened.wait(timeout: .now() + 5)
    _ = changed.wait(timeout: .now() + 5)
    print("observed results changed: \(dogs.wrappedValue.map { "\($0.name) \($0.weight) kg" })")
    token.invalidate()
} catch let error as AtollError {
    print("error \(error.code): \(error.message)")
    exit(1)
}
