// swift-tools-version:6.1
import PackageDescription

// Atoll: an offline-first object database on SQLite, with a C ABI (libatoll.so).
// Layers (docs/architecture.md): CSQLite, CJansson <- AtollStore <- AtollJSON; AtollNet (epoll,
// wslay, http-parser, OpenSSL); AtollProtocol on AtollStore and AtollJSON; the sync client
// AtollSync and the sync server AtollServer on those (and AtollAuth); the C ABI AtollC on the
// store, JSON and the sync client; the typed Swift API Atoll on AtollStore, and on AtollSync,
// AtollProtocol and AtollNet only with the trait `Sync` (on by default: a local-only app turns it
// off and links no network library); the atoll-cli executable on AtollJSON.
let package = Package(
    name: "Atoll",
    products: [
        // The C ABI, for C hosts and Python (ctypes). The SONAME lets programs that link it
        // record `libatoll.so.0` instead of the build path.
        .library(name: "atoll", type: .dynamic, targets: ["AtollC"]),
        .library(name: "AtollStore", targets: ["AtollStore"]),
        .library(name: "AtollJSON", targets: ["AtollJSON"]),
        // The typed Swift API (Object, @Persisted, Realm, Results<T>): what Swift apps import.
        .library(name: "Atoll", targets: ["Atoll"]),
        // HTTP/1.1 and WebSocket server and client (docs/net.md), for the sync server and client.
        .library(name: "AtollNet", targets: ["AtollNet"]),
        // Sync (docs/protocol.md): the shared protocol, the server's app API (users, tokens), the
        // server engine and the client engine.
        .library(name: "AtollProtocol", targets: ["AtollProtocol"]),
        .library(name: "AtollAuth", targets: ["AtollAuth"]),
        .library(name: "AtollServer", targets: ["AtollServer"]),
        .library(name: "AtollSync", targets: ["AtollSync"]),
    ],
    traits: [
        .trait(name: "Sync", description: "The typed API's sync (App, User, synced realms): AtollSync and its network libraries."),
        .default(enabledTraits: ["Sync"]),
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3",
                       providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CJansson", pkgConfig: "jansson",
                       providers: [.apt(["libjansson-dev"])]),
        // The network layer's C libraries (docs/dependencies.md): WebSocket framing, HTTP/1.1
        // parsing, and OpenSSL for TLS, SHA-1 and random bytes.
        .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),
        .systemLibrary(name: "CWslay", providers: [.apt(["libwslay-dev"])]),
        .systemLibrary(name: "CHTTPParser", providers: [.apt(["libhttp-parser-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // The sync server's PostgreSQL backend (docs/deploy.md): libpq, only in the server.
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "AtollStore", dependencies: ["CSQLite"]),
        .target(name: "AtollNet", dependencies: ["CEpoll", "CWslay", "CHTTPParser", "COpenSSL"]),
        .target(name: "AtollJSON", dependencies: ["AtollStore", "CJansson"]),
        .target(name: "AtollProtocol", dependencies: ["AtollStore", "AtollJSON", "CJansson"]),
        .target(name: "AtollAuth", dependencies: ["AtollStore", "AtollJSON", "AtollNet", "COpenSSL", "CJansson"]),
        .target(name: "AtollPostgres", dependencies: ["CLibPQ"]),
        .target(name: "AtollServer", dependencies: ["AtollStore", "AtollJSON", "AtollProtocol", "AtollNet", "AtollAuth", "AtollPostgres",
                                                    "CJansson", "COpenSSL"]),
        .target(name: "AtollSync", dependencies: ["AtollStore", "AtollJSON", "AtollProtocol", "AtollNet", "AtollAuth", "CJansson"]),
        .executableTarget(name: "atoll-server", dependencies: ["AtollServer", "AtollNet", "AtollJSON", "AtollStore"]),
        .target(name: "Atoll", dependencies: ["AtollStore", .target(name: "AtollSync", condition: .when(traits: ["Sync"])),
                                              .target(name: "AtollProtocol", condition: .when(traits: ["Sync"])),
                                              .target(name: "AtollNet", condition: .when(traits: ["Sync"]))]),
        .target(
            name: "AtollC",
            dependencies: ["AtollStore", "AtollJSON", "AtollSync", "AtollProtocol", "CJansson"],
            linkerSettings: [.unsafeFlags(["-Xlinker", "-soname=libatoll.so.0"])]
        ),
        .target(name: "AtollTestSupport", dependencies: ["AtollStore", "AtollPostgres"], path: "Tests/AtollTestSupport"),
        .testTarget(name: "AtollStoreTests", dependencies: ["AtollStore", "AtollTestSupport"]),
        .testTarget(name: "AtollTests", dependencies: ["Atoll", "AtollTestSupport", "AtollServer"]),
        .testTarget(name: "AtollNetTests", dependencies: ["AtollNet"]),
        // With AtollServer and AtollPostgres for the PostgreSQL storage (ATOLL_TEST_POSTGRES).
        .testTarget(name: "AtollAuthTests", dependencies: ["AtollAuth", "AtollNet", "AtollJSON", "AtollStore", "AtollServer", "AtollPostgres"]),
        .testTarget(name: "AtollSyncTests", dependencies: ["AtollSync", "AtollServer", "AtollProtocol", "AtollNet", "AtollAuth",
                                                            "AtollStore", "AtollJSON", "AtollTestSupport", "CJansson", "AtollPostgres"]),
        .testTarget(name: "AtollJSONTests", dependencies: ["AtollJSON", "AtollStore", "AtollTestSupport"]),
        // The `atoll` command (docs/cli.md). Its product is named atoll-cli because the library
        // product is named atoll; `make install` installs it as bin/atoll, beside lib/, where the
        // rpath finds a Swift runtime installed with -DATOLL_INSTALL_SWIFT_RUNTIME=ON.
        .executableTarget(
            name: "atoll-cli",
            dependencies: ["AtollStore", "AtollJSON", "CJansson"],
            linkerSettings: [.unsafeFlags(["-Xlinker", "-rpath=$ORIGIN/../lib"])]
        ),
        .executableTarget(name: "atoll-swift-example", dependencies: ["Atoll"], path: "examples/swift"),
        // The Swift host of `make demo`'s sync demo (with examples/sync_demo.c and .py).
        .executableTarget(name: "atoll-sync-example", dependencies: ["Atoll"], path: "examples/sync-swift"),
        // AtollNet as a process, for the tests against outside peers (tests/net) and bench/net.
        .executableTarget(name: "atoll-net-peer", dependencies: ["AtollNet", "COpenSSL"], path: "tests/net/peer"),
        .target(name: "AtollBenchSupport", path: "bench/support"),
        // The network load benchmark (bench/README.md): drives atoll-net-peer over loopback.
        .executableTarget(name: "atoll-net-bench", dependencies: ["AtollNet"], path: "bench/net", exclude: ["run"]),
        // The sync benchmark (bench/README.md, "Sync"): server and clients over loopback.
        .executableTarget(name: "atoll-sync-bench", dependencies: ["AtollBenchSupport", "AtollServer", "AtollSync", "AtollProtocol", "AtollStore", "CSQLite"], path: "bench/sync"),
        // The PostgreSQL cluster benchmark (bench/README.md, "Cluster"): 1, 2, 3 instances on one database.
        .executableTarget(name: "atoll-cluster-bench", dependencies: ["AtollBenchSupport", "AtollServer", "AtollSync", "AtollProtocol", "AtollStore", "AtollPostgres"],
                          path: "bench/cluster"),
        .executableTarget(name: "atoll-bench", dependencies: ["AtollStore", "CSQLite", "AtollBenchSupport"], path: "bench/swift"),
        // The benchmark's typed-API contender (bench/README.md): the same workloads through Atoll.
        // The Swift fuzz targets (docs/testing.md, "Fuzzing"): the sync protocol on an in-process
        // server engine, and the HTTP API in process. Built with libFuzzer by `make fuzz` (into
        // .build-fuzz, with -sanitize=fuzzer -DATOLL_LIBFUZZER); a normal build makes them replay
        // the inputs they are given (the corpora in tests/fuzz/corpus).
        .target(name: "AtollFuzzSupport", path: "tests/fuzz/support"),
        .executableTarget(name: "atoll-fuzz-sync", dependencies: ["AtollFuzzSupport", "AtollServer", "AtollProtocol", "AtollJSON", "AtollStore"],
                          path: "tests/fuzz/sync"),
        .executableTarget(name: "atoll-fuzz-http", dependencies: ["AtollFuzzSupport", "AtollServer", "AtollAuth", "AtollNet", "AtollProtocol", "AtollJSON"],
                          path: "tests/fuzz/http"),
        .executableTarget(name: "atoll-typed-bench", dependencies: ["Atoll", "AtollStore", "AtollBenchSupport"], path: "bench/typed"),
    ]
)
