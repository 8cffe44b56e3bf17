import Foundation
import Synchronization

public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    case debug, info, warning, error
    var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// Structured logs: one JSON object per line on standard error,
/// `{"time","level","msg", …fields}`.
public final class Logger: Sendable {
    public let level: LogLevel
    private let lock = Mutex(())

    public init(level: LogLevel) { self.level = level }

    public func log(_ level: LogLevel, _ message: String, _ fields: [String: String] = [:]) {
        guard level >= self.level else { return }
        var line = "{\"time\":\"\(ISO8601DateFormatter().string(from: Date()))\",\"level\":\"\(level.rawValue)\",\"msg\":\(Self.quote(message))"
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { line += ",\(Self.quote(k)):\(Self.quote(v))" }
        line += "}\n"
        lock.withLock { _ in try? FileHandle.standardError.write(contentsOf: Data(line.utf8)) }
    }

    public func debug(_ m: String, _ f: [String: String] = [:]) { log(.debug, m, f) }
    public func info(_ m: String, _ f: [String: String] = [:]) { log(.info, m, f) }
    public func warning(_ m: String, _ f: [String: String] = [:]) { log(.warning, m, f) }
    public func error(_ m: String, _ f: [String: String] = [:]) { log(.error, m, f) }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 { out += String(format: "\\u%04x", u.value) } else { out.unicodeScalars.append(u) }
            }
        }
        return out + "\""
    }
}
