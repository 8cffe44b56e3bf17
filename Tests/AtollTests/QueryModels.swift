import Atoll
import Foundation

// Models the query-builder tests need beyond `Models.swift`: an enum stored as an Int, optional
// enums and strings, a Float, two Ints to compare with each other, and a list of Ints.

/// A size stored as its Int raw value (ordered by it).
enum GadgetSize: Int, PersistableEnum {
    case small = 1
    case medium = 2
    case large = 3
}

class Gadget: Object {
    @Persisted(primaryKey: true) var id = 0
    @Persisted var label: String?
    @Persisted var size = GadgetSize.small
    @Persisted var optionalSize: GadgetSize?
    @Persisted var unit: BusinessUnitEnum?
    @Persisted var ratio: Float = 0
    @Persisted var low = 0
    @Persisted var high = 0
    @Persisted var flag: Bool?
    @Persisted var readings: List<Int>
}
