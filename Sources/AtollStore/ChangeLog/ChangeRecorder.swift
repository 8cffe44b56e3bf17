/// Collects the instructions of one write transaction and writes them to the change log.
///
/// Instructions are encoded as they are recorded; the buffer is written out as a chunk row of
/// `_atoll_changes` when it grows large (between write operations, never inside one) and at
/// commit. A failed operation rolls the buffer back to its mark; chunks are only flushed
/// between operations, so a mark never lies before a flushed chunk of the same operation.
final class ChangeRecorder {
    private var writer = BinaryWriter()
    private var pendingCount = 0
    private var flushedCount = 0
    private var chunk = 0

    init() { writer.byte(changeLogFormat) }

    /// All instructions recorded in this transaction.
    var total: Int { flushedCount + pendingCount }
    var pendingBytes: Int { writer.bytes.count }

    func record(_ instruction: Instruction) {
        writer.instruction(instruction)
        pendingCount += 1
    }

    struct Mark { let bytes: Int; let count: Int }

    func mark() -> Mark { Mark(bytes: writer.bytes.count, count: pendingCount) }

    func rollback(to mark: Mark) {
        writer.bytes.removeSubrange(mark.bytes...)
        pendingCount = mark.count
    }

    /// Writes the pending instructions as the next chunk of `version`.
    func flush(_ conn: Connection, version: UInt64) throws {
        guard pendingCount > 0 else { return }
        let s = try conn.statement("INSERT INTO _atoll_changes(version, chunk, instructions) VALUES (?, ?, ?)")
        s.bind(1, Int64(version))
        s.bind(2, Int64(chunk))
        s.bind(3, writer.bytes)
        try s.run()
        chunk += 1
        flushedCount += pendingCount
        pendingCount = 0
        writer.bytes.removeAll(keepingCapacity: true)
        writer.byte(changeLogFormat)
    }

    static func decode(_ bytes: [UInt8]) throws -> [Instruction] {
        var reader = BinaryReader(bytes)
        guard !reader.atEnd, try reader.byte() == changeLogFormat else {
            throw AtollError(.file, "the change log has an unknown format")
        }
        var out = [Instruction]()
        while !reader.atEnd { out.append(try reader.instruction()) }
        return out
    }
}
