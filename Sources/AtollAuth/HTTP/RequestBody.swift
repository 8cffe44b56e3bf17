import AtollJSON
import AtollNet
import AtollStore

/// A request's JSON object body, with typed reads that answer 400 for what is missing or wrong.
struct RequestBody {
    let fields: Document

    /// Parses the body with EJSON (jansson).
    /// - Parameter emptyIsObject: whether an empty body reads as `{}` (anonymous logins).
    /// - Throws: `AuthError(.badRequest)` when the body is not UTF-8 JSON text of an object.
    init(_ request: HTTPRequest, emptyIsObject: Bool = false) throws {
        if request.body.isEmpty, emptyIsObject {
            fields = [:]
            return
        }
        guard !request.body.contains(0), let text = request.text else {
            throw AuthError(.badRequest, "the body must be JSON text (UTF-8)")
        }
        let value: Value
        do { value = try EJSON.parse(text) } catch let error as AtollError {
            throw AuthError(.badRequest, "the body is not valid JSON: \(error.message)")
        }
        guard case .object(let doc) = value else {
            throw AuthError(.badRequest, "the body must be a JSON object, got \(value.kindName)")
        }
        fields = doc
    }

    /// A string field that must be there.
    func string(_ key: String) throws -> String {
        guard let value = try optionalString(key) else { throw AuthError(.badRequest, "missing \"\(key)\" in the body") }
        return value
    }

    /// A string field that may be left out (or null).
    func optionalString(_ key: String) throws -> String? {
        switch fields[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let other?: throw AuthError(.badRequest, "\"\(key)\" must be a string, got \(other.kindName)")
        }
    }

    /// The client's device id (`options.device.deviceId`, 24 hex digits), or a new one.
    var deviceId: String {
        let given = fields["options"]?.documentValue?["device"]?.documentValue?["deviceId"]?.stringValue
        if let given, let id = ObjectId(hex: given), id.bytes.contains(where: { $0 != 0 }) { return id.hex }
        return AuthRecord.newId()
    }
}
