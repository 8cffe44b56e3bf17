import AtollStore
import Foundation
import XCTest

final class ObjectIdTests: XCTestCase {
    func testHexRoundTrip() throws {
        let oid = try XCTUnwrap(ObjectId(hex: "507f1f77bcf86cd799439011"))
        XCTAssertEqual(oid.hex, "507f1f77bcf86cd799439011")
        XCTAssertEqual(oid.description, "507f1f77bcf86cd799439011")
        XCTAssertEqual(oid.bytes, [0x50, 0x7F, 0x1F, 0x77, 0xBC, 0xF8, 0x6C, 0xD7, 0x99, 0x43, 0x90, 0x11])
        XCTAssertEqual(ObjectId(bytes: oid.bytes), oid)
    }

    func testUppercaseHexIsAcceptedAndPrintedLowercase() throws {
        let oid = try XCTUnwrap(ObjectId(hex: "ABCDEF0123456789ABCDEF01"))
        XCTAssertEqual(oid.hex, "abcdef0123456789abcdef01")
        XCTAssertEqual(ObjectId(hex: "abcdef0123456789abcdef01"), oid)
    }

    func testInvalidTextAndBytesAreRejected() {
        XCTAssertNil(ObjectId(hex: ""))
        XCTAssertNil(ObjectId(hex: "507f1f77bcf86cd79943901"))     // 23 digits
        XCTAssertNil(ObjectId(hex: "507f1f77bcf86cd7994390111"))   // 25 digits
        XCTAssertNil(ObjectId(hex: "507f1f77bcf86cd79943901g"))    // not hexadecimal
        XCTAssertNil(ObjectId(hex: " 07f1f77bcf86cd799439011"))
        XCTAssertNil(ObjectId(bytes: [UInt8](repeating: 1, count: 11)))
        XCTAssertNil(ObjectId(bytes: [UInt8](repeating: 1, count: 13)))
    }

    func testOrderingIsByBytes() throws {
        let a = try XCTUnwrap(ObjectId(hex: "000000000000000000000001"))
        let b = try XCTUnwrap(ObjectId(hex: "000000000000000000000002"))
        let c = try XCTUnwrap(ObjectId(hex: "010000000000000000000000"))
        XCTAssertEqual([c, b, a].sorted(), [a, b, c])
        XCTAssertFalse(a < a)
    }

    /// BSON's layout: 4 bytes of seconds, 5 bytes random per process, a 3-byte counter.
    func testGenerateIsUniqueAndOrderedWithinAProcess() throws {
        let before = UInt32(Date().timeIntervalSince1970)
        let ids = (0..<2000).map { _ in ObjectId.generate() }
        let after = UInt32(Date().timeIntervalSince1970) + 1
        XCTAssertEqual(Set(ids).count, ids.count)

        func seconds(_ o: ObjectId) -> UInt32 { o.bytes[0..<4].reduce(0) { $0 << 8 | UInt32($1) } }
        func counter(_ o: ObjectId) -> UInt32 { o.bytes[9..<12].reduce(0) { $0 << 8 | UInt32($1) } }
        for id in ids {
            XCTAssertTrue((before...after).contains(seconds(id)), "timestamp \(seconds(id)) outside \(before)...\(after)")
            XCTAssertEqual(Array(id.bytes[4..<9]), Array(ids[0].bytes[4..<9]), "the process's random bytes differ")
        }
        for (a, b) in zip(ids, ids.dropFirst()) {
            XCTAssertEqual(counter(b), (counter(a) + 1) & 0xFF_FFFF, "\(a) then \(b)")
            // Ordered by creation unless the 24-bit counter wrapped within the same second.
            if counter(b) != 0 || seconds(b) > seconds(a) { XCTAssertLessThan(a, b) }
        }
    }

    func testGenerateFromManyThreadsGivesNoDuplicates() {
        final class Collected: @unchecked Sendable {
            let lock = NSLock()
            var ids = [ObjectId]()
        }
        let collected = Collected()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let mine = (0..<1000).map { _ in ObjectId.generate() }
            collected.lock.lock(); collected.ids += mine; collected.lock.unlock()
        }
        XCTAssertEqual(collected.ids.count, 8000)
        XCTAssertEqual(Set(collected.ids).count, 8000)
    }
}
