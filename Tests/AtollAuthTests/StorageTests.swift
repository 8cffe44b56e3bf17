@testable import AtollAuth
import AtollJSON
import AtollStore
import Foundation
import XCTest

/// What every `AuthStorage` promises, called directly: atomic transactions, the uniqueness rules
/// and their errors, replaced pending tokens, deletions, expiry and timestamps read back exactly.
class AuthStorageTests: AuthTestCase {
    /// A new app's storage, through the service that owns it (closed when the test ends).
    private func makeStorage() throws -> any AuthStorage {
        let service = try newApp().open()
        addTeardownBlock { service.close() }
        return service.store
    }

    func testATransactionThatThrowsLeavesNothing() throws {
        let store = try makeStorage()
        struct Abandon: Error {}
        XCTAssertThrowsError(try store.transaction {
            let user = try store.createUser(data: ["name": .string("Ann")])
            _ = try store.createIdentity(userId: user.id, providerType: "local-userpass", externalId: "ann",
                                         email: "ann@example.com", passwordHash: "h", confirmed: true)
            try store.addRefreshToken(hash: "r1", userId: user.id, expiresAt: Timestamp(Date().addingTimeInterval(600)))
            throw Abandon()
        }) { XCTAssertTrue($0 is Abandon, "\($0)") }
        try store.reading {
            XCTAssertEqual(try store.users().count, 0)
            XCTAssertNil(try store.identity(email: "ann@example.com"))
            XCTAssertNil(try store.refreshToken(hash: "r1"))
        }
    }

    func testUniquenessErrorsLeaveTheFirstRowAlone() throws {
        let store = try makeStorage()
        let (ann, bob) = try store.transaction { (try store.createUser(), try store.createUser()) }
        _ = try store.transaction {
            try store.createIdentity(userId: ann.id, providerType: "local-userpass", externalId: "x",
                                     email: "shared@example.com", passwordHash: "h", confirmed: true)
        }
        XCTAssertThrowsError(try store.transaction {
            try store.createIdentity(userId: bob.id, providerType: "local-userpass", externalId: "x")
        }) { error in
            XCTAssertEqual((error as? AtollError)?.code, .duplicatePrimaryKey, "\(error)")
            XCTAssertEqual((error as? AtollError)?.message, "an object of class 'Identity' with primary key 'local-userpass:x' exists already")
        }
        XCTAssertThrowsError(try store.transaction {
            try store.createIdentity(userId: bob.id, providerType: "local-userpass", externalId: "y",
                                     email: "shared@example.com", passwordHash: "h", confirmed: true)
        }) { error in
            XCTAssertEqual(error as? AuthError, AuthError(.accountNameInUse, "name already in use"))
        }
        _ = try store.transaction { try store.createAPIKey(userId: ann.id, name: "laptop", keyHash: "k1") }
        XCTAssertThrowsError(try store.transaction { try store.createAPIKey(userId: ann.id, name: "laptop", keyHash: "k2") }) { error in
            XCTAssertEqual(error as? AuthError, AuthError(.apiKeyAlreadyExists, "an API key named 'laptop' exists already"))
        }
        // Another user may use the name.
        _ = try store.transaction { try store.createAPIKey(userId: bob.id, name: "laptop", keyHash: "k3") }

        try store.reading {
            XCTAssertEqual(try store.identity(email: "shared@example.com")?.userId, ann.id)
            XCTAssertEqual(try store.identities(ofUser: bob.id).count, 0)
            XCTAssertEqual(try store.apiKeys(ofUser: ann.id).map(\.name), ["laptop"])
            XCTAssertNil(try store.apiKey(hash: "k2"))
            XCTAssertEqual(try store.apiKey(hash: "k3")?.userId, bob.id)
        }
    }

    func testRowsReadBackAsWritten() throws {
        let store = try makeStorage()
        let expiry = Timestamp(milliseconds: 4_102_444_800_123)   // 2100-01-01T00:00:00.123Z
        let profile: Document = ["name": .string("Cy"), "age": .int(41), "tags": .list([.string("a")])]
        let user = try store.transaction { () -> AuthRecord.User in
            let user = try store.createUser(data: profile)
            _ = try store.createIdentity(userId: user.id, providerType: "local-userpass", externalId: "cy",
                                         email: "cy@example.com", passwordHash: "scrypt$x", confirmed: false)
            _ = try store.createIdentity(userId: user.id, providerType: "anon-user", externalId: "later")
            try store.addRefreshToken(hash: "r", userId: user.id, expiresAt: expiry)
            try store.addPendingToken(id: "p", purpose: "confirm", identityKey: "local-userpass:cy", tokenHash: "t", expiresAt: expiry)
            return user
        }
        try store.reading {
            let read = try XCTUnwrap(try store.user(user.id))
            XCTAssertEqual(read.data, profile)
            XCTAssertEqual(read.createdAt, user.createdAt)
            XCTAssertFalse(read.disabled)
            let identity = try XCTUnwrap(try store.identity("local-userpass", "cy"))
            XCTAssertEqual([identity.userId, identity.email, identity.passwordHash], [user.id, "cy@example.com", "scrypt$x"])
            XCTAssertFalse(identity.confirmed)
            XCTAssertEqual(try store.identities(ofUser: user.id).map(\.providerType), ["local-userpass", "anon-user"], "oldest first")
            XCTAssertEqual(try store.refreshToken(hash: "r")?.expiresAt, expiry)
            XCTAssertEqual(try store.refreshToken(hash: "r")?.userId, user.id)
            XCTAssertEqual(try store.pendingToken(id: "p")?.expiresAt, expiry)
            XCTAssertEqual(try store.refreshTokenCount(ofUser: user.id), 1)
        }
        try store.transaction {
            try store.setIdentityConfirmed("local-userpass:cy")
            try store.setIdentityPasswordHash("local-userpass:cy", "scrypt$y")
            try store.setUserDisabled(user.id, true)
            try store.setUserData(user.id, ["name": .string("Cyd")])
        }
        try store.reading {
            let identity = try XCTUnwrap(try store.identity(email: "cy@example.com"))
            XCTAssertTrue(identity.confirmed)
            XCTAssertEqual(identity.passwordHash, "scrypt$y")
            XCTAssertEqual(try store.user(user.id)?.disabled, true)
            XCTAssertEqual(try store.user(user.id)?.data, ["name": .string("Cyd")])
        }
    }

    func testAPendingTokenReplacesTheEarlierOneOfItsPurpose() throws {
        let store = try makeStorage()
        let later = Timestamp(Date().addingTimeInterval(600))
        try store.transaction {
            let user = try store.createUser()
            _ = try store.createIdentity(userId: user.id, providerType: "local-userpass", externalId: "d",
                                         email: "d@example.com", passwordHash: "h", confirmed: false)
            try store.addPendingToken(id: "c1", purpose: "confirm", identityKey: "local-userpass:d", tokenHash: "1", expiresAt: later)
            try store.addPendingToken(id: "r1", purpose: "reset", identityKey: "local-userpass:d", tokenHash: "2", expiresAt: later)
            try store.addPendingToken(id: "c2", purpose: "confirm", identityKey: "local-userpass:d", tokenHash: "3", expiresAt: later)
        }
        try store.reading {
            XCTAssertNil(try store.pendingToken(id: "c1"))
            XCTAssertEqual(try store.pendingToken(id: "c2")?.tokenHash, "3")
            XCTAssertEqual(try store.pendingToken(id: "r1")?.purpose, "reset")
        }
        try store.transaction { try store.deletePendingTokens(identityKey: "local-userpass:d", purpose: "confirm") }
        XCTAssertNil(try store.reading { try store.pendingToken(id: "c2") })
        XCTAssertNotNil(try store.reading { try store.pendingToken(id: "r1") })
    }

    func testDeletingAUserDeletesAllOfIt() throws {
        let store = try makeStorage()
        let later = Timestamp(Date().addingTimeInterval(600))
        let (gone, kept) = try store.transaction { () -> (String, String) in
            var ids = [String]()
            for name in ["e", "f"] {
                let user = try store.createUser()
                _ = try store.createIdentity(userId: user.id, providerType: "local-userpass", externalId: name,
                                             email: "\(name)@example.com", passwordHash: "h", confirmed: false)
                try store.addPendingToken(id: "p-\(name)", purpose: "confirm", identityKey: "local-userpass:\(name)",
                                          tokenHash: "t", expiresAt: later)
                _ = try store.createAPIKey(userId: user.id, name: "k", keyHash: "key-\(name)")
                try store.addRefreshToken(hash: "r-\(name)", userId: user.id, expiresAt: later)
                ids.append(user.id)
            }
            return (ids[0], ids[1])
        }
        try store.transaction { try store.deleteUser(gone) }
        try store.reading {
            XCTAssertEqual(try store.users().map(\.id), [kept])
            XCTAssertNil(try store.identity(email: "e@example.com"))
            XCTAssertNil(try store.pendingToken(id: "p-e"))
            XCTAssertNil(try store.apiKey(hash: "key-e"))
            XCTAssertNil(try store.refreshToken(hash: "r-e"))
            XCTAssertNotNil(try store.identity(email: "f@example.com"))
            XCTAssertNotNil(try store.pendingToken(id: "p-f"))
            XCTAssertNotNil(try store.apiKey(hash: "key-f"))
            XCTAssertNotNil(try store.refreshToken(hash: "r-f"))
        }
    }

    func testDeleteExpiredDropsOnlyExpiredTokens() throws {
        let store = try makeStorage()
        let past = Timestamp(Date().addingTimeInterval(-1)), later = Timestamp(Date().addingTimeInterval(600))
        try store.transaction {
            let user = try store.createUser()
            _ = try store.createIdentity(userId: user.id, providerType: "local-userpass", externalId: "g",
                                         email: "g@example.com", passwordHash: "h", confirmed: false)
            try store.addRefreshToken(hash: "old", userId: user.id, expiresAt: past)
            try store.addRefreshToken(hash: "new", userId: user.id, expiresAt: later)
            try store.addPendingToken(id: "old-c", purpose: "confirm", identityKey: "local-userpass:g", tokenHash: "t", expiresAt: past)
            try store.addPendingToken(id: "new-r", purpose: "reset", identityKey: "local-userpass:g", tokenHash: "t", expiresAt: later)
        }
        try store.transaction { try store.deleteExpired() }
        try store.reading {
            XCTAssertNil(try store.refreshToken(hash: "old"))
            XCTAssertNotNil(try store.refreshToken(hash: "new"))
            XCTAssertNil(try store.pendingToken(id: "old-c"))
            XCTAssertNotNil(try store.pendingToken(id: "new-r"))
        }
        XCTAssertTrue(try store.transaction { try store.deleteRefreshToken(hash: "new") })
        XCTAssertFalse(try store.transaction { try store.deleteRefreshToken(hash: "new") })
    }

    func testAClosedStorageFails() throws {
        let service = try newApp().open()
        service.close()
        XCTAssertThrowsError(try service.allUsers()) { error in
            XCTAssertEqual((error as? AuthError)?.kind, .internal, "\(error)")
        }
    }
}

/// AuthStorageTests on PostgreSQL (skipped without ATOLL_TEST_POSTGRES).
final class AuthStorageTestsOnPostgres: AuthStorageTests {
    override class var storage: TestStorage { .postgres }

    override func testATransactionThatThrowsLeavesNothing() throws { try super.testATransactionThatThrowsLeavesNothing() }
    override func testUniquenessErrorsLeaveTheFirstRowAlone() throws { try super.testUniquenessErrorsLeaveTheFirstRowAlone() }
    override func testRowsReadBackAsWritten() throws { try super.testRowsReadBackAsWritten() }
    override func testAPendingTokenReplacesTheEarlierOneOfItsPurpose() throws { try super.testAPendingTokenReplacesTheEarlierOneOfItsPurpose() }
    override func testDeletingAUserDeletesAllOfIt() throws { try super.testDeletingAUserDeletesAllOfIt() }
    override func testDeleteExpiredDropsOnlyExpiredTokens() throws { try super.testDeleteExpiredDropsOnlyExpiredTokens() }
    override func testAClosedStorageFails() throws { try super.testAClosedStorageFails() }
}

/// The SQLite storage's files: `auth.key` private and refused when damaged.
final class SQLiteStorageTests: AuthTestCase {
    func testTheKeyFileIsPrivateAndADamagedOneIsRefused() async throws {
        let app = try newApp()
        let harness = try makeHarness(app: app)
        await harness.stop()
        let keyPath = (app.directory as NSString).appendingPathComponent("auth.key")
        let attributes = try FileManager.default.attributesOfItem(atPath: keyPath)
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual((attributes[.size] as? NSNumber)?.intValue, 32)

        // A damaged key file is refused rather than replaced.
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: keyPath))
        XCTAssertThrowsError(try app.open()) { error in
            XCTAssertEqual((error as? AtollError)?.code, .file)
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: keyPath)), Data([1, 2, 3]))
    }
}

/// Every test of a class that runs on both storages is declared again in its `…OnPostgres`
/// subclass: Linux's XCTest runs only the tests a class declares itself, so a test missing there
/// would silently not run on PostgreSQL.
final class StorageVariantTests: XCTestCase {
    /// The classes that run on one storage only.
    private let singleStorage: Set = ["SQLiteStorageTests", "PostgresInstanceTests"]

    func testEveryTestHasItsPostgresVariant() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        var superclass = [String: String](), tests = [String: Set<String>]()
        for file in try FileManager.default.contentsOfDirectory(atPath: folder.path) where file.hasSuffix(".swift") {
            var current: String?
            for line in try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8).split(separator: "\n") {
                if let match = line.firstMatch(of: /^(?:final )?class (\w+): (\w+)/) {
                    current = String(match.1)
                    superclass[String(match.1)] = String(match.2)
                } else if line.first?.isLetter == true {
                    current = nil   // another top-level declaration
                } else if let current, let match = line.firstMatch(of: /func (test\w+)\(/) {
                    tests[current, default: []].insert(String(match.1))
                }
            }
        }
        let both = superclass.filter { $0.value == "AuthTestCase" && !singleStorage.contains($0.key) }.keys.sorted()
        XCTAssertTrue(both.contains("SessionTests"), "the classes found: \(both)")
        for name in both {
            let variant = name + "OnPostgres"
            XCTAssertEqual(superclass[variant], name, "\(name) has no subclass \(variant)")
            XCTAssertEqual(tests[variant, default: []], tests[name, default: []], "\(variant) must declare every test of \(name) again")
        }
    }
}
