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
        withError(c.error, listChange(initial: c.initial, deleted: nil, c.deletions, c.insertions, c.modifications,
                                      c.moves, c.deletedKeys, c.insertedKeys, c.modifiedKeys, count: c.count))
    }

    /// A new reference to an object change's JSON object.
    public static func make(_ c: ObjectChange) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "deleted", c.deleted ? json_true() : json_false())
        json_object_set_new(o, "changedProperties", EJSON.make(.list(c.changedProperties.map(Value.string))))
        json_object_set_new(o, "old", EJSON.make(c.old))
        json_object_set_new(o, "new", EJSON.make(c.new))
        return withError(c.error, o)
    }

    /// A new reference to a collection change's JSON object.
    public static func make(_ c: CollectionChange) -> JSONRef {
        withError(c.error, listChange(initial: c.initial, deleted: c.deleted, c.deletions, c.insertions,
                                      c.modifications, c.moves, c.deletedKeys, c.insertedKeys, c.modifiedKeys,
                                      count: c.count))
    }

    /// Adds `"error": {"code", "message"}` to a change's object when there is an error.
    private static func withError(_ error: AtollError?, _ o: JSONRef) -> JSONRef {
        guard let error else { return o }
        let e = json_object()!
        json_object_set_new(e, "code", json_integer(json_int_t(error.code.rawValue)))
        json_object_set_new(e, "message", EJSON.make(.string(error.description)))
        json_object_set_new(o, "error", e)
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

    /// The JSON object of a results or collection change (`deleted` only for collections).
    private static func listChange(initial: Bool, deleted: Bool?, _ deletions: [Int], _ insertions: [Int],
                                   _ modifications: [Int], _ moves: [Move], _ deletedKeys: [Value],
                                   _ insertedKeys: [Value], _ modifiedKeys: [Value], count: Int) -> JSONRef {
        let o = json_object()!
        json_object_set_new(o, "initial", initial ? json_true() : json_false())
        if let deleted { json_object_set_new(o, "deleted", deleted ? json_true() : json_false()) }
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
        json_object_set_new(o, "deletedKeys", EJSON.make(.list(deletedKeys)))
        json_object_set_new(o, "insertedKeys", EJSON.make(.list(insertedKeys)))
        json_object_set_new(o, "modifiedKeys", EJSON.make(.list(modifiedKeys)))
        json_object_set_new(o, "count", json_integer(json_int_t(count)))
        return o
    }

    private static func indices(_ values: [Int]) -> JSONRef {
        let array = json_array()!
        for v in values { json_array_append_new(array, json_integer(json_int_t(v))) }
        return array
    }
}
