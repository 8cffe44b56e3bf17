extension Store {
    /// Checks an RQL query's syntax without a class: what can be said of a filter before its
    /// class exists (the admin API checks rules this way for classes a development-mode app does
    /// not have yet). Names and argument types are checked only when it runs on a class.
    /// - Throws: `AtollError(.querySyntax)` with the position of the error.
    public static func checkQuerySyntax(_ text: String) throws {
        _ = try Parser.parse(text)
    }
}
