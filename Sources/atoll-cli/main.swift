@preconcurrency import Glibc
import AtollStore
import Foundation

// atoll: the command-line tool (docs/cli.md). Dispatches to a command; any error ends the
// program with `atoll: <message>` on stderr and status 1 (failure) or 2 (usage).

/// Runs the command line and returns the exit status.
func run(_ words: [String]) -> Int32 {
    let commands: [String: ([String]) throws -> Void] = [
        "schema": Commands.schema, "query": Commands.query, "export": Commands.export,
        "import": Commands.importRealm, "info": Commands.info, "compact": Commands.compact,
    ]
    do {
        guard let command = words.first else {
            fputs(Help.main + "\n", stderr)
            return ExitError.usage
        }
        let rest = Array(words.dropFirst())
        switch command {
        case "-h", "--help":
            try Output.standard.write(Help.main + "\n")
        case "--version", "-version":
            try Output.standard.write("atoll \(atollVersion)\n")
        case "help":
            guard let topic = rest.first else {
                try Output.standard.write(Help.main + "\n")
                break
            }
            guard rest.count == 1, let text = Help.commands[topic] else {
                throw ExitError.usage(nil, "no help for '\(rest.joined(separator: " "))'")
            }
            try Output.standard.write(text + "\n")
        default:
            guard let body = commands[command] else {
                throw ExitError.usage(nil, "unknown command '\(command)'")
            }
            if rest.contains(where: { $0 == "-h" || $0 == "--help" }), !rest.contains("--") {
                try Output.standard.write((Help.commands[command] ?? Help.main) + "\n")
            } else {
                try body(rest)
            }
        }
        try Output.standard.finish()
        return 0
    } catch let error as ExitError {
        printError(error.message)
        return error.status
    } catch let error as AtollError {
        // The SQL of an internal error helps a bug report; other messages are complete.
        printError(error.code == .internal ? error.description : error.message)
        return ExitError.failure
    } catch {
        printError("\(error)")
        return ExitError.failure
    }
}

// Like other Unix tools, stop quietly when the reader of a pipe goes away (`atoll export r | head`).
signal(SIGPIPE, SIG_DFL)
exit(run(Array(CommandLine.arguments.dropFirst())))
