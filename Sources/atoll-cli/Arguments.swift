// The command line: subcommands, their options and positional arguments, and the errors that
// end the program with a status (docs/cli.md).

/// Ends the program: a message for stderr and the exit status.
struct ExitError: Error {
    /// 1: the command failed (missing file, bad query, bad JSON...).
    static let failure: Int32 = 1
    /// 2: the command line is wrong (unknown command or option, missing arguments).
    static let usage: Int32 = 2

    var message: String
    var status: Int32

    static func failure(_ message: String) -> ExitError { ExitError(message: message, status: failure) }

    /// A usage error, pointing at the command's help.
    static func usage(_ command: String?, _ message: String) -> ExitError {
        let help = command.map { "atoll \($0) --help" } ?? "atoll --help"
        return ExitError(message: "\(command.map { "\($0): " } ?? "")\(message) (see '\(help)')", status: usage)
    }
}

/// A subcommand's arguments: positional ones in order, flags, and options with a value.
struct Arguments {
    let command: String
    var positional: [String] = []
    var flags: Set<String> = []
    var options: [String: String] = [:]

    /// Splits `words` (what follows the command's name). Options may come anywhere; `--` ends
    /// them; `-` alone is positional (standard input). `--name=value` and `--name value` both work.
    /// - Parameters:
    ///   - flags: the options without a value (`--count`), with their short spellings mapped.
    ///   - valued: the options with a value (`--limit`, `-o`), likewise.
    /// - Throws: a usage error for an unknown option or a missing value.
    init(command: String, _ words: [String], flags known: [String: String], valued: [String: String]) throws {
        self.command = command
        var rest = words[...]
        var onlyPositional = false
        while let word = rest.popFirst() {
            if onlyPositional || word == "-" || !word.hasPrefix("-") {
                positional.append(word)
                continue
            }
            if word == "--" {
                onlyPositional = true
                continue
            }
            var name = word
            var inline: String?
            if word.hasPrefix("--"), let eq = word.firstIndex(of: "=") {
                name = String(word[..<eq])
                inline = String(word[word.index(after: eq)...])
            }
            if let flag = known[name] {
                guard inline == nil else { throw ExitError.usage(command, "option '\(name)' takes no value") }
                flags.insert(flag)
            } else if let option = valued[name] {
                guard let value = inline ?? rest.popFirst() else {
                    throw ExitError.usage(command, "option '\(name)' needs a value")
                }
                options[option] = value
            } else {
                throw ExitError.usage(command, "unknown option '\(word)'")
            }
        }
    }

    /// The positional arguments, checked: at least `required`, at most `required + optional`.
    func positional(_ names: String, required: Int, optional: Int = 0) throws -> [String] {
        guard positional.count >= required else {
            throw ExitError.usage(command, "missing arguments: \(names)")
        }
        guard positional.count <= required + optional else {
            throw ExitError.usage(command, "too many arguments: '\(positional[(required + optional)...].joined(separator: "' '"))'")
        }
        return positional
    }

    /// A non-negative integer option, or nil when it is not given.
    func count(_ name: String) throws -> Int? {
        guard let text = options[name] else { return nil }
        guard let n = Int(text), n >= 0 else {
            throw ExitError.usage(command, "--\(name) needs a whole number >= 0, not '\(text)'")
        }
        return n
    }
}
