import AtollStore

extension Realm {
    /// Adds `delta` to an integer property of a managed object as a counter: the change is
    /// recorded as an addition, so when several devices add to the same counter while apart,
    /// sync adds their changes up instead of keeping the last write (docs/protocol.md, "How changes merge"). A
    /// later assignment to the property sets it outright; additions made after it stay on top.
    ///
    /// ```swift
    /// try realm.write { try realm.increment(post, \.likes) }
    /// ```
    /// - Throws: `.notInWrite` outside a write transaction, `.readOnly` on a frozen realm,
    ///   `.invalidArgument` for a key path that is not a top-level `Int` property of a top-level
    ///   object, or on overflow, `.notFound` for an object that is not managed by this realm or
    ///   was deleted.
    public func increment<Root: Object>(_ object: Root, _ keyPath: KeyPath<Root, Int>, by delta: Int = 1) throws {
        let names = KeyPathRecorder.names(of: keyPath)
        guard names.count == 1, let name = names.first else {
            throw AtollError(.invalidArgument, "increment: the key path must name one Int property of \(Root.self)")
        }
        try checkWritable("incrementing '\(name)'")
        guard let accessor = object._accessor, accessor.realm === self else {
            throw AtollError(.notFound, "increment: the \(Root.self) object is not managed by this realm")
        }
        try store.addInteger(accessor.cls.name, primaryKey: try accessor.reference(), property: name, Int64(delta))
    }
}
