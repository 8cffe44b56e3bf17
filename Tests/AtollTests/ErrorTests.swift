import Atoll
import AtollTestSupport
import Foundation
import XCTest

/// What an app shows of an error (`localizedDescription`, as Realm Swift apps print it) is its
/// message, not Foundation's "The operation could not be completed".
final class ErrorTests: XCTestCase {
    func testAStoreErrorFromARealCallDescribesItself() throws {
        // A file under a regular file: the directory cannot exist.
        let blocker = temporaryRealmPath("blocker")
        FileManager.default.createFile(atPath: blocker, contents: Data())
        let config = Realm.Configuration(fileURL: URL(fileURLWithPath: blocker + "/inside/x.realm"))
        XCTAssertThrowsError(try Realm(configuration: config)) { error in
            XCTAssertTrue(error is AtollError, "\(error)")
            XCTAssertEqual(error.localizedDescription, "\(error)")
            XCTAssertTrue(error.localizedDescription.contains("inside/x.realm"), error.localizedDescription)
        }
    }

    func testSyncErrorsDescribeThemselves() {
        let errors: [Error] = [SyncError(.timeout, "waiting for the download timed out after 2.0 s"),
                               SyncError(.writeRejected, "1 write(s) refused: the user may not write this object"),
                               AtollError(.queryInvalid, "unknown property 'agee' of Dog")]
        for error in errors {
            XCTAssertEqual(error.localizedDescription, "\(error)")
            XCTAssertFalse(error.localizedDescription.contains("could not be completed"), error.localizedDescription)
        }
    }
}
