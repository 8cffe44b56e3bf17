import AtollJSON
import AtollStore
@_exported import AtollTestSupport
import CJansson
import Foundation
import XCTest

// Jansson plumbing for the JSON tests (the shared helpers are in AtollTestSupport).

/// JSON text parsed with jansson, handed to `body`, released after.
func withJSON<T>(_ text: String, _ body: (JSONRef) throws -> T) throws -> T {
    let json = try EJSON.load(text)
    defer { json_decref(json) }
    return try body(json)
}

/// The compact text of a new jansson reference, which is released.
func dumpAndRelease(_ json: JSONRef) -> String {
    defer { json_decref(json) }
    return EJSON.dump(json)
}
