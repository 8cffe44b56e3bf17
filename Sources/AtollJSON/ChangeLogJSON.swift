import AtollStore
import CJansson

/// The change log as JSON (docs/changelog.md):
/// `[{"version": 1, "timestamp": {"$date": …}, "instructions": [{"op": "create", "class": "Dog",
/// "primaryKey": 1, "path": [], …}]}]`.
public enum ChangeLogJSON {
    /// A new reference to a JSON array of change sets.
    public static func make(_ sets: [ChangeSet]) -> JSONRef {
        let array = json_array()!
        for set in sets {
            let entry = json_object()!
            json_object_set_new(entry, "version", json_integer(json_int_t(clamping: set.version)))
            json_object_set_new(entry, "timestamp", EJSON.make(.date(set.timestamp)))
            let instructions = json_array()!
            for ins in set.instructions { json_array_append_new(instructions, make(ins)) }
            json_object_set_new(entry, "instructions", instructions)
            json_array_append_new(array, entry)
        }
        return array
    }

    /// A new reference to one instruction's JSON object.
    public static func make(_ ins: Instruction) -> JSONRef {
        let object = json_object()!
        json_object_set_new(object, "op", EJSON.makeString(ins.op.name))
        json_object_set_new(object, "class", EJSON.makeString(ins.className))
        json_object_set_new(object, "primaryKey", EJSON.make(ins.primaryKey))
        let path = json_array()!
        for element in ins.path {
            switch element {
            case .key(let k): json_array_append_new(path, EJSON.makeString(k))
            case .index(let i): json_array_append_new(path, json_integer(json_int_t(i)))
            }
        }
        json_object_set_new(object, "path", path)
        if let v = ins.value { json_object_set_new(object, "value", EJSON.make(v)) }
        if let i = ins.index { json_object_set_new(object, "index", json_integer(json_int_t(i))) }
        if let i = ins.toIndex { json_object_set_new(object, "toIndex", json_integer(json_int_t(i))) }
        return object
    }
}
