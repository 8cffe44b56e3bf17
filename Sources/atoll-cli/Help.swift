// The help texts: `atoll --help` and `atoll COMMAND --help`.

/// The version of Atoll this tool belongs to: `ATOLL_VERSION` of include/atoll.h (a test checks
/// that they agree).
let atollVersion = "0.1.0"

enum Help {
    static let main = """
        usage: atoll COMMAND [OPTIONS] REALM [ARGUMENTS]

        Looks into and moves Atoll realm files.

        commands:
          schema REALM                          print the schema (JSON)
          query REALM CLASS [QUERY [ARGS]]      print the objects a query matches (JSON)
          export REALM [-o FILE]                write the realm as JSON
          import REALM FILE                     create a new realm from an export (FILE may be -)
          info REALM                            file size, free space, change log, object counts
          compact REALM                         give free space back to the file system
          help [COMMAND]                        this text, or a command's

        options:
          -h, --help       help
          --version        print the version

        Exit status: 0 on success, 1 when the command fails, 2 for a wrong command line.
        See docs/cli.md.
        """

    static let commands: [String: String] = [
        "schema": """
            usage: atoll schema REALM

            Prints the realm's schema version and schema as pretty JSON:
              {"schemaVersion": N, "schema": [...]}
            The schema is in the object form of docs/schema.md. The realm is opened read-only.
            """,
        "query": """
            usage: atoll query [--count] [--limit N] [--pretty] REALM CLASS [QUERY [ARGS]]

            Prints the objects of CLASS that QUERY matches, as a JSON array with one object per
            line. QUERY is in the Realm Query Language (docs/query-language.md); without it every
            object matches. ARGS is a JSON array of the values of $0, $1, ... (Extended JSON for
            dates, ObjectIds...):

              atoll query dogs.realm Dog 'age > $0 SORT(name ASC)' '[3]'

            Objects of classes without primary key carry their key as "_atoll_key".

            options:
              --count      print only the number of matching objects
              --limit N    at most N objects
              --pretty     indent the JSON
            The realm is opened read-only.
            """,
        "export": """
            usage: atoll export [-o FILE] REALM

            Writes the whole realm as JSON: format, schema version, schema, and every object, class
            by class (docs/cli.md). `atoll import` reads it back into an identical realm.

            options:
              -o, --output FILE   write to FILE instead of standard output
            Progress goes to stderr when it is a terminal. The realm is opened read-only.
            """,
        "import": """
            usage: atoll import REALM FILE

            Creates the realm REALM from an export FILE (- for standard input), with the export's
            schema and schema version, in one write transaction. REALM must not exist (or be
            empty); a failed import leaves no file. Prints how many objects were imported.
            Progress goes to stderr when it is a terminal.
            """,
        "info": """
            usage: atoll info [--json] REALM

            Prints the file's size, its -wal file's size, SQLite's page size and page counts (used
            and free bytes), the change log's size (entries, chunks, bytes of encoded
            instructions), the schema version and the objects of each class.

            options:
              --json   print the same as one JSON object
            The realm is opened read-only.
            """,
        "compact": """
            usage: atoll compact REALM

            Rewrites the realm in as few pages as possible and gives the free pages back to the
            file system (SQLite's VACUUM), then prints the file size before and after. Other
            processes may have the realm open; compact waits for their write transactions.
            """,
        "help": """
            usage: atoll help [COMMAND]

            Prints the list of commands, or a command's help.
            """,
    ]
}
