import Foundation

/// The fuzz targets' main when they are built without libFuzzer (a normal `swift build`): runs
/// each file given, or each file of each directory given, through the target once, and says how
/// many ran. That replays a corpus (the regressions in it) without the instrumented build:
/// `atoll-fuzz-sync tests/fuzz/corpus/sync`. A broken contract traps, as under libFuzzer.
public enum FuzzReplay {
    public static func main(name: String, _ target: (UnsafeRawBufferPointer) -> Void) -> Int32 {
        let arguments = CommandLine.arguments.dropFirst().filter { !$0.hasPrefix("-") }
        guard !arguments.isEmpty else {
            FileHandle.standardError.write(Data("usage: \(name) FILE-OR-DIRECTORY...\n(built without libFuzzer: replays inputs; see docs/testing.md)\n".utf8))
            return 2
        }
        var files = [String]()
        for argument in arguments {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("\(name): no such file: \(argument)\n".utf8))
                return 2
            }
            if isDirectory.boolValue {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []
                files += names.sorted().map { argument + "/" + $0 }
            } else {
                files.append(argument)
            }
        }
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else { continue }
            data.withUnsafeBytes { target($0) }
        }
        print("\(name): \(files.count) inputs ran")
        return 0
    }
}

/// Stops the process with a message naming the broken contract: libFuzzer saves the input.
public func fuzzFailure(_ message: String) -> Never {
    FileHandle.standardError.write(Data("fuzz: \(message)\n".utf8))
    abort()
}

/// A scratch directory for one input, on tmpfs when there is one (stores are opened and written
/// for every input).
public func fuzzScratchDirectory(_ name: String) -> String {
    let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
    return base + "/atoll-\(name)-\(getpid())"
}

#if ATOLL_LIBFUZZER
@_silgen_name("LLVMFuzzerRunDriver")
private func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// libFuzzer's driver (in the libFuzzer that swiftc -sanitize=fuzzer links) on a target.
public enum FuzzDriver {
    public static func run(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                           _ target: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32 {
        var count = argc
        var vector = argv
        return LLVMFuzzerRunDriver(&count, &vector, target)
    }
}
#endif
