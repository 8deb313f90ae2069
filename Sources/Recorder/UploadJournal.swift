import FoundationEssentials
import Media

/// One line of `<storage>/uploads.jsonl`: a clip (or its picture) queued for upload, uploaded
/// and verified, or gone from the board before or after that. The file is the upload queue:
/// appended to as the events journal is (whole lines, synced), so the queue survives a kill,
/// a restart and a power cut, and read back in full when the agent starts.
public struct UploadRecord: Codable, Equatable, Sendable {
    /// The file (relative to the storage directory) this line is about; exactly one is set.
    public var queued: String?
    public var uploaded: String?
    /// Deleted on the board: after its upload (`upload.delete_local_after`), or before it by
    /// retention on a full disk or by a person; it leaves the queue either way.
    public var deleted: String?
    /// When (the wall clock, as the events journal writes it).
    public var at: String
    /// An upload's object: where it is (`s3://bucket/key`, `sftp://…`, `https://…`), its size,
    /// and how long sending it took.
    public var url: String?
    public var bytes: UInt64?
    public var seconds: Double?
    /// Why a clip was deleted.
    public var reason: String?

    public init(
        queued: String? = nil, uploaded: String? = nil, deleted: String? = nil, at: String, url: String? = nil,
        bytes: UInt64? = nil, seconds: Double? = nil, reason: String? = nil
    ) {
        self.queued = queued
        self.uploaded = uploaded
        self.deleted = deleted
        self.at = at
        self.url = url
        self.bytes = bytes
        self.seconds = seconds
        self.reason = reason
    }

    /// The file the line is about.
    public var file: String? { queued ?? uploaded ?? deleted }
}

/// The upload queue as `uploads.jsonl` holds it: what waits, in the order it was queued, and
/// what was uploaded. A line that cannot be read (cut short by a power cut) is skipped: its
/// clip stays as the lines before it left it, so at worst an upload is made again, never lost.
public struct UploadJournal: Sendable {
    public static let name = "uploads.jsonl"

    /// Every line that could be read, in order.
    public private(set) var records: [UploadRecord] = []
    /// The files queued and neither uploaded nor deleted since, oldest first.
    public var backlog: [String] { waiting.keys.sorted { waiting[$0]! < waiting[$1]! } }
    /// Each file waiting, with the number of its `queued` line (its place in the queue).
    private var waiting: [String: Int] = [:]
    /// The last upload of each file uploaded and not deleted since.
    public private(set) var uploads: [String: UploadRecord] = [:]
    /// Lines that could not be read.
    public private(set) var unreadableLines = 0

    /// The queue in `storage` (`uploads.jsonl`), or nil when it has none.
    public static func read(from storage: any ClipStorage) throws(FileError) -> UploadJournal? {
        try storage.read(name).map { UploadJournal($0) }
    }

    public init(_ bytes: [UInt8] = []) {
        let decoder = JSONDecoder()
        for line in bytes.split(separator: UInt8(ascii: "\n")) where !line.allSatisfy({ $0 == 0x20 }) {
            guard let record = try? decoder.decode(UploadRecord.self, from: Data(line)), record.file != nil else {
                unreadableLines += 1
                continue
            }
            apply(record)
        }
    }

    /// Takes a line that was just appended.
    public mutating func apply(_ record: UploadRecord) {
        records.append(record)
        if let file = record.queued {
            uploads[file] = nil
            if waiting[file] == nil { waiting[file] = records.count - 1 }
        } else if let file = record.uploaded {
            waiting[file] = nil
            uploads[file] = record
        } else if let file = record.deleted {
            waiting[file] = nil
            uploads[file] = nil
        }
    }

    /// Whether `file` waits to be uploaded.
    public func waits(_ file: String) -> Bool { waiting[file] != nil }

    /// How many files wait.
    public var backlogCount: Int { waiting.count }

    /// The file's text line (with its newline).
    public static func line(_ record: UploadRecord) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(record)) ?? Data()) + [UInt8(ascii: "\n")]
    }

    /// The same queue in as few lines as hold it: a `queued` line for each file waiting and
    /// the last `uploaded` line of each file uploaded (what `vigil clips` shows and
    /// `delete_local_after` counts from), in the order they were written; nothing of files
    /// deleted. What `uploads.jsonl` is rewritten to when it has grown to many times that.
    public var compacted: [UploadRecord] {
        var last: [String: Int] = [:]
        for (index, record) in records.enumerated() {
            if let file = record.queued, waiting[file] == index { last[file] = index }
            if let file = record.uploaded, uploads[file] != nil { last[file] = index }
        }
        return last.values.sorted().map { records[$0] }
    }

    /// Whether the file is worth rewriting (`compacted`): it has grown past a thousand lines,
    /// four times what it must hold.
    public var wantsCompacting: Bool {
        records.count + unreadableLines > max(1000, 4 * (waiting.count + uploads.count))
    }
}
