import AtollStore
import CJansson

/// What observers receive, as JSON (docs/notifications.md):
/// results `{"initial", "deletions", "insertions", "modifications", "moves": [{"from", "to"}],
/// "deletedKeys", "insertedKeys", "modifiedKeys", "count"}`; objects `{"deleted",
/// "changedProperties", "old", "new"}`; collections like results plus `"deleted"`; realms
/// `{"previousVersion", "version", "classes"}`.
public enum ChangesJSON {
    /// A new reference to a results change's JSON object.
    public static func make(_ c: ResultsChange) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "initial", c.initial ? json_true() : json_false())
        setIndices(o, c.deletions, c.insertions, c.modifications, c.moves)
        json_object_set_new(o, "deletedKeys", EJSON.make(.list(c.deletedKeys)))
        json_object_set_new(o, "insertedKeys", EJSON.make(.list(c.insertedKeys)))
        json_object_set_new(o, "modifiedKeys", EJSON.make(.list(c.modifiedKeys)))
        json_object_set_new(o, "count", json_integer(json_int_t(c.count)))
        return o
    }

    /// A new reference to an object change's JSON object.
    public static func make(_ c: ObjectChange) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "deleted", c.deleted ? json_true() : json_false())
        json_object_set_new(o, "changedProperties", EJSON.make(.list(c.changedProperties.map(Value.string))))
        json_object_set_new(o, "old", EJSON.make(c.old))
        json_object_set_new(o, "new", EJSON.make(c.new))
        return o
    }

    /// A new reference to a collection change's JSON object.
    public static func make(_ c: CollectionChange) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "initial", c.initial ? json_true() : json_false())
        json_object_set_new(o, "deleted", c.deleted ? json_true() : json_false())
        setIndices(o, c.deletions, c.insertions, c.modifications, c.moves)
        json_object_set_new(o, "deletedKeys", EJSON.make(.list(c.deletedKeys)))
        json_object_set_new(o, "insertedKeys", EJSON.make(.list(c.insertedKeys)))
        json_object_set_new(o, "modifiedKeys", EJSON.make(.list(c.modifiedKeys)))
        json_object_set_new(o, "count", json_integer(json_int_t(c.count)))
        return o
    }

    /// A new reference to a realm change's JSON object.
    public static func make(_ c: RealmChange) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "previousVersion", json_integer(json_int_t(clamping: c.previousVersion)))
        json_object_set_new(o, "version", json_integer(json_int_t(clamping: c.version)))
        json_object_set_new(o, "classes", EJSON.make(.list(c.classes.map(Value.string))))
        return o
    }

    private static func setIndices(_ o: JSONRef, _ deletions: [Int], _ insertions: [Int], _ modifications: [Int],
                                   _ moves: [Move]) {
        json_object_set_new(o, "deletions", indices(deletions))
        json_object_set_new(o, "insertions", indices(insertions))
        json_object_set_new(o, "modifications", indices(modifications))
        let array = json_array()!
        for m in moves {
            let move = json_object()!
            json_object_set_new(move, "from", json_integer(json_int_t(m.from)))
            json_object_set_new(move, "to", json_integer(json_int_t(m.to)))
            json_array_append_new(array, move)
        }
        json_object_set_new(o, "moves", array)
    }

    private static func indices(_ values: [Int]) -> JSONRef {
        let array = json_array()!
        for v in values { json_array_append_new(array, json_integer(json_int_t(v))) }
        return array
    }
}
