import AtollJSON
import AtollNet
import AtollProtocol
import AtollStore
import CJansson
import Foundation
import Synchronization

// Subscriptions: a set checked whole (limits, queryable fields, each query and then the views
// OR-ed with the read rules) before its bootstrap starts; what a user may read of each class.

extension ServerApp {
    func query(_ m: ClientMessage.Query, _ s: Session) throws {
        guard !s.partitionMode else {
            throw SyncErrorMessage(.badMessage, "a partition-sync session has no subscriptions to send")
        }
        let version = m.version
        var subscriptions = [SubscriptionQuery]()
        var error: String?
        let limits = configuration.queryLimits
        let access = readAccess(s.user)
        if m.subscriptions.count > limits.maxSubscriptions {
            error = "\(m.subscriptions.count) subscriptions in one set: at most \(limits.maxSubscriptions)"
        }
        for var sub in m.subscriptions {
            // An empty query is every object, as in a store query.
            if sub.query.allSatisfy(\.isWhitespace) { sub.query = "TRUEPREDICATE" }
            if error == nil { error = check(sub, access) }
            subscriptions.append(sub)
        }
        if error == nil, let until = cooldowns[s.user.id], until > DispatchTime.now().uptimeNanoseconds {
            let seconds = Int((until - DispatchTime.now().uptimeNanoseconds) / 1_000_000_000) + 1
            error = "a subscription of this user ran past its time budget (\(limits.querySeconds) s): no new subscriptions for \(seconds) s"
        }
        let owed = bootstrapOwed(s.user.id)
        if error == nil, owed > limits.bootstrapSecondsPerMinute {
            let seconds = Int((owed - limits.bootstrapSecondsPerMinute) * 60 / limits.bootstrapSecondsPerMinute) + 1
            error = "this user's subscriptions took more than \(limits.bootstrapSecondsPerMinute) s of the server in a minute: no new subscriptions for \(seconds) s"
        }
        if let error {
            refuseQuery(s, version: version, error)
            return
        }
        // The version this session has already: nothing to do (a client that sends it twice does
        // not get, nor cost, a second bootstrap).
        if version == s.queryVersion, subscriptions == s.subscriptions, s.ready {
            s.connection.send(.queryComplete(session: s.number, version: version, serverVersion: s.downloadCursor))
            return
        }
        let complete = m.complete
        let previous = QueryState(subscriptions: s.subscriptions, version: s.queryVersion, views: s.views, ready: s.ready)
        s.subscriptions = subscriptions
        s.queryVersion = version
        // What this takes of the queue, and what its bootstrap takes of a worker, is charged to
        // the user (users who owe nothing forgotten).
        if bootstrapTime.count + cooldowns.count > 10_000 {
            let now = DispatchTime.now().uptimeNanoseconds
            bootstrapTime = bootstrapTime.filter { bootstrapOwed($0.key) > 0 }
            cooldowns = cooldowns.filter { $0.value > now }
        }
        let started = DispatchTime.now().uptimeNanoseconds
        defer { chargeBootstrap(s.user.id, seconds: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9) }
        // The views whole (many subscriptions OR-ed are deeper than each): a set that fails here
        // is refused and the session keeps the one it had, with nothing sent. (Counting them,
        // where a costly one fails, is the bootstrap's first step, off the queue.)
        do {
            try computeViews(s)
            for (cls, view) in s.views { _ = try view.results(store, cls) }
        } catch let failure as AtollError where [.queryInvalid, .querySyntax, .timeout, .typeMismatch, .noSuchProperty].contains(failure.code) {
            (s.subscriptions, s.queryVersion, s.views) = (previous.subscriptions, previous.version, previous.views)
            if failure.code == .timeout { cooldowns[s.user.id] = DispatchTime.now().uptimeNanoseconds + UInt64(limits.cooldownSeconds * 1e9) }
            refuseQuery(s, version: version, "the subscriptions as a whole: \(failure.message)")
            return
        }
        // From here on the client is being sent the new view: a failure ends the session. A
        // client that comes back with the set it had complete catches up instead.
        do {
            if complete && s.downloadCursor > 0 && previous.version < 0 {
                try resume(s, from: s.downloadCursor)
            } else {
                try startBootstrap(s, version: version, previous: previous)
            }
        } catch {
            drop(s, because: error, while: "sending it its subscriptions' objects")
        }
    }

    /// Tells the session its subscription set `version` is refused, and why.
    func refuseQuery(_ s: Session, version: Int64, _ message: String) {
        metrics.error(SyncErrorCode.invalidFlexibleSyncSubscriptions.rawValue)
        recentErrors.add(SyncErrorMessage(.invalidFlexibleSyncSubscriptions, message, session: s.number), user: s.user.id)
        s.connection.send(.queryError(session: s.number, version: version, message: message))
    }

    /// Why the server will not serve a subscription, or nil: what a store query refuses, and
    /// what the app's query limits and queryable fields do not allow. Key paths see what
    /// `access` lets the user read.
    func check(_ sub: SubscriptionQuery, _ access: ReadAccess) -> String? {
        guard let cls = schema.classes.first(where: { $0.name == sub.className }) else {
            return "subscription '\(sub.name)': no class named '\(sub.className)'"
        }
        if cls.isEmbedded { return "subscription '\(sub.name)': '\(sub.className)' is embedded; subscribe to its owner" }
        let limits = configuration.queryLimits
        let bytes = sub.query.utf8.count + Wire.encode(.list(sub.arguments)).utf8.count
        if bytes > limits.maxQueryBytes {
            return "subscription '\(sub.name)': its query and arguments take \(bytes) bytes, more than \(limits.maxQueryBytes)"
        }
        do {
            let results = try store.objects(sub.className, where: sub.query, sub.arguments, readableBy: access, maxLinkDepth: limits.maxLinkDepth)
            guard results.isPlainFilter else {
                return "subscription '\(sub.name)': SORT, DISTINCT and LIMIT are not allowed in subscriptions"
            }
        } catch {
            return "subscription '\(sub.name)': \(error)"
        }
        if let global = configuration.queryableFields {
            let allowed = global.union(configuration.classQueryableFields[sub.className] ?? [])
                .union([cls.primaryKey ?? "_id"])
                .union(configuration.partitionKey.map { [$0] } ?? [])
            for name in QueryText.fieldNames(in: sub.query) where !allowed.contains(name) {
                if cls[property: name] != nil {
                    return "subscription '\(sub.name)': '\(name)' is not a queryable field (queryable: \(allowed.sorted().joined(separator: ", ")))"
                }
            }
        }
        return nil
    }

    /// Builds the session's view query per class from its subscriptions and the read rules.
    func computeViews(_ s: Session) throws {
        var byClass = [String: [SubscriptionQuery]]()
        for sub in s.subscriptions { byClass[sub.className, default: []].append(sub) }
        let access = readAccess(s.user)
        var views = [String: ViewQuery]()
        for (cls, subs) in byClass {
            if access.rule(cls) == .nothing { continue }
            var text = ""
            var arguments = [Value]()
            // A subscription to the whole class makes the others moot; the view is then plain
            // TRUEPREDICATE, which `matching` answers without a query.
            let whole = subs.contains { $0.query.trimmingCharacters(in: .whitespacesAndNewlines).uppercased() == "TRUEPREDICATE" }
            var parts = [String]()
            for sub in subs where !whole {
                parts.append("(\(QueryText.shiftArguments(sub.query, by: arguments.count)))")
                arguments += sub.arguments
            }
            // OR-ed as a balanced tree: a chain of a hundred ORs nests a hundred deep, past what
            // SQLite's parser takes.
            func or(_ parts: ArraySlice<String>) -> String {
                guard parts.count > 1 else { return parts.first ?? "FALSEPREDICATE" }
                let mid = parts.startIndex + parts.count / 2
                return "(" + or(parts[..<mid]) + " OR " + or(parts[mid...]) + ")"
            }
            text = whole ? "TRUEPREDICATE" : or(parts[...])
            views[cls] = ViewQuery(cls, text: text, arguments: arguments, access: access, limits: configuration.queryLimits)
        }
        s.views = views
    }

    /// What `user` may read of every class: its role's read rule, bound to it (no role: nothing).
    func readAccess(_ user: RuleUser) -> ReadAccess {
        var rules = [String: ReadAccess.Rule]()
        for cls in schema.classes where !cls.isEmbedded {
            guard let role = configuration.rules.role(cls.name, for: user) else {
                rules[cls.name] = .nothing
                continue
            }
            switch role.read.kind {
            case .always: rules[cls.name] = .everything
            case .never: rules[cls.name] = .nothing
            case .query:
                if let (text, arguments) = role.read.bound(to: user) { rules[cls.name] = .matching(text, arguments) } else { rules[cls.name] = .nothing }
            }
        }
        return ReadAccess(rules: rules)
    }

    /// The primary key texts of the objects of a class that a view holds (among `keys`, if given).
    func matching(_ cls: String, _ view: ViewQuery, among keys: [Value]? = nil) throws -> Set<ExactText> {
        guard let pkName = schema.classes.first(where: { $0.name == cls })?.primaryKey else { return [] }
        var out = Set<ExactText>()
        if let keys {
            if view.isWholeClass { return Set(try store.primaryKeys(cls, among: keys).map(exactKey)) }
            for chunk in stride(from: 0, to: keys.count, by: 500) {
                let part = Array(keys[chunk..<min(chunk + 500, keys.count)])
                for pk in try view.results(store, cls, and: "\(pkName) IN $\(view.arguments.count)", [.list(part)]).primaryKeyValues() {
                    out.insert(exactKey(pk))
                }
            }
        } else {
            for pk in try view.results(store, cls).primaryKeyValues() { out.insert(exactKey(pk)) }
        }
        return out
    }
}
