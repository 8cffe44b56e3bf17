import AtollJSON
import AtollStore

/// What one user's subscriptions may cost the server. Subscriptions are queries its users write,
/// evaluated on the app's queue that also integrates every upload: without bounds, one user's
/// query can hold everyone's writes (a needle of thousands of characters matched against large
/// strings, an `IN` of a hundred thousand values, key paths through links of links of links).
///
/// An app's config sets them as `"queryLimits": {"maxSubscriptions": 100, ...}` (every key
/// optional; docs/server.md, "Security model").
public struct QueryLimits: Sendable, Hashable {
    /// Subscriptions in one set.
    public var maxSubscriptions = 100
    /// The bytes of one subscription's query text and arguments (as JSON).
    public var maxQueryBytes = 16 << 10
    /// Links (to-one links, lists, sets and dictionaries of links, backlinks) one key path of a
    /// subscription may follow, counting through SUBQUERY.
    public var maxLinkDepth = 2
    /// How long (seconds) one evaluation of a subscription's view may run before it is stopped:
    /// the subscription is refused (`queryError`), or the session that needed it ends.
    public var querySeconds = 2.0
    /// After a subscription ran out of `querySeconds`, how long (seconds) its user may not
    /// subscribe again.
    public var cooldownSeconds = 60.0
    /// Seconds of the app's queue one user's bootstraps (and resumes) may take in a minute: a
    /// user who resubscribes to a large view over and over is then refused for a while, and
    /// everyone's writes go on. A client opening a realm of 100,000 objects takes under one.
    public var bootstrapSecondsPerMinute = 10.0

    public init() {}

    /// From an app's `"queryLimits"`.
    init(json: Value) throws {
        guard case .object(let d) = json else { throw AtollError(.invalidArgument, "queryLimits must be an object") }
        for (key, value) in d {
            func positive(_ name: String) throws -> Double {
                switch value {
                case .int(let n) where n > 0: return Double(n)
                case .double(let x) where x > 0 && x.isFinite: return x
                default: throw AtollError(.invalidArgument, "queryLimits.\(name) must be a positive number")
                }
            }
            func count(_ name: String, least: Int64) throws -> Int {
                guard case .int(let n) = value, n >= least, n <= Int64(Int32.max) else {
                    throw AtollError(.invalidArgument, "queryLimits.\(name) must be an integer of at least \(least)")
                }
                return Int(n)
            }
            switch key {
            case "maxSubscriptions": maxSubscriptions = try count(key, least: 1)
            case "maxQueryBytes": maxQueryBytes = try count(key, least: 64)
            case "maxLinkDepth": maxLinkDepth = try count(key, least: 0)
            case "querySeconds": querySeconds = try positive(key)
            case "bootstrapSecondsPerMinute": bootstrapSecondsPerMinute = try positive(key)
            case "cooldownSeconds":
                if value == .int(0) { cooldownSeconds = 0 } else { cooldownSeconds = try positive(key) }
            default: throw AtollError(.invalidArgument, "queryLimits: unknown key '\(key)'")
            }
        }
    }
}
