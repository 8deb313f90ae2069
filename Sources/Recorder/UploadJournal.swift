import FoundationEssentials
import Media
import QuickTime

/// One line of `<storage>/uploads.jsonl`: a clip (or its picture) queued for upload, uploaded
/// and verified, set aside, or gone from the board before or after that. The file is the upload
/// queue: appended to as the events journal is (whole lines, synced), so the queue survives a
/// kill, a restart and a power cut.
public struct UploadRecord: Codable, Equatable, Sendable {
    /// The file (relative to the storage directory) this line is about; exactly one is set.
    public var queued: String?
    public var uploaded: String?
    /// Deleted on the board: after its upload (`upload.delete_local_after`), or before it by
    /// retention on a full disk or by a person; it leaves the queue either way.
    public var deleted: String?
    /// Set aside: the server refused it again and again while it took other clips. It leaves
    /// the queue (retention no longer keeps it for its upload) until the agent starts again.
    public var setAside: String?
    /// When (the wall clock, as the events journal writes it).
    public var at: String
    /// An upload's object: where it is (`s3://bucket/key`, `sftp://…`, `https://…`), its size,
    /// and how long sending it took.
    public var url: String?
    public var bytes: UInt64?
    public var seconds: Double?
    /// The upload's copy was read back from the server and its MD5 matched the clip's: what
    /// `upload.delete_local_after` waits for before the clip is deleted on the board.
    public var readBack: Bool?
    /// Why a clip was deleted, or set aside (the server's last answer).
    public var reason: String?
    /// How many times a clip set aside was tried.
    public var tries: Int?

    enum CodingKeys: String, CodingKey {
        case queued, uploaded, deleted, at, url, bytes, seconds, reason, tries
        case setAside = "set_aside"
        case readBack = "read_back"
    }

    public init(
        queued: String? = nil, uploaded: String? = nil, deleted: String? = nil, setAside: String? = nil, at: String,
        url: String? = nil, bytes: UInt64? = nil, seconds: Double? = nil, readBack: Bool? = nil,
        reason: String? = nil, tries: Int? = nil
    ) {
        self.queued = queued
        self.uploaded = uploaded
        self.deleted = deleted
        self.setAside = setAside
        self.at = at
        self.url = url
        self.bytes = bytes
        self.seconds = seconds
        self.readBack = readBack
        self.reason = reason
        self.tries = tries
    }

    /// The file the line is about.
    public var file: String? { queued ?? uploaded ?? deleted ?? setAside }
}

/// The upload queue as `uploads.jsonl` holds it: what waits, in the order it was queued, what
/// was uploaded, and what was set aside — one state per file, never the lines themselves, so
/// its memory is bounded by the files the queue names, however long the file has grown. A line
/// that cannot be read (cut short by a power cut) is skipped: its clip stays as the lines
/// before it left it, so at worst an upload is made again, never lost.
public struct UploadJournal: Sendable {
    public static let name = "uploads.jsonl"
    /// Where something that is not a regular file but has the queue's name is moved (`-1`,
    /// `-2`, … when taken), so that a new queue can be written.
    public static let notAFileName = "uploads.jsonl.not-a-file"

    /// What the queue says of a file.
    public enum State: Sendable, Equatable {
        case waiting
        /// Uploaded: its last `uploaded` line.
        case uploaded(UploadRecord)
        /// Set aside: its `set_aside` line.
        case setAside(UploadRecord)
    }

    private struct Entry: Sendable {
        var state: State
        /// The line that put it in this state, and the line's place in the file (the queue's order).
        var record: UploadRecord
        var order: Int
    }

    private var entries: [String: Entry] = [:]
    private var nextOrder = 0
    /// Lines in the file, readable or not: those read and appended since it was last written anew.
    public private(set) var lines = 0
    /// Lines that could not be read.
    public private(set) var unreadableLines = 0

    public init() {}

    /// The queue `bytes` hold (a whole file).
    public init(_ bytes: [UInt8]) {
        var reader = Reader()
        reader.take(bytes)
        self = reader.finish()
    }

    /// What the queue says of `file`, or nil when it names it not (never, or deleted since).
    public func state(of file: String) -> State? { entries[file]?.state }

    /// Whether `file` waits to be uploaded.
    public func waits(_ file: String) -> Bool { entries[file]?.state == .waiting }

    /// The files waiting, oldest first.
    public var backlog: [String] {
        entries.filter { $0.value.state == .waiting }.sorted { $0.value.order < $1.value.order }.map(\.key)
    }

    /// The files waiting, in no order (what retention keeps).
    public var waitingFiles: Set<String> { Set(entries.lazy.filter { $0.value.state == .waiting }.map(\.key)) }

    /// How many files wait.
    public var backlogCount: Int { entries.values.reduce(0) { $0 + ($1.state == .waiting ? 1 : 0) } }

    /// The last upload of each file uploaded and not deleted since.
    public var uploads: [String: UploadRecord] {
        entries.compactMapValues { if case .uploaded(let record) = $0.state { record } else { nil } }
    }

    /// The `set_aside` line of each file set aside and neither queued nor deleted since.
    public var setAside: [String: UploadRecord] {
        entries.compactMapValues { if case .setAside(let record) = $0.state { record } else { nil } }
    }

    /// Takes a line of the file (just appended, or read).
    public mutating func apply(_ record: UploadRecord) {
        lines += 1
        nextOrder += 1
        if let file = record.queued {
            if entries[file]?.state != .waiting {
                entries[file] = Entry(state: .waiting, record: record, order: nextOrder)
            }
        } else if let file = record.uploaded {
            entries[file] = Entry(state: .uploaded(record), record: record, order: nextOrder)
        } else if let file = record.setAside {
            entries[file] = Entry(state: .setAside(record), record: record, order: nextOrder)
        } else if let file = record.deleted {
            entries[file] = nil
        }
    }

    /// Forgets `file`'s upload, when it is uploaded: the clip catalogue holds where it is now
    /// (the upload sink keeps what waits and what was set aside, not every clip it ever
    /// uploaded). Its line goes when the file is next written anew (`compacted`).
    public mutating func forgetUpload(_ file: String) {
        if case .uploaded? = entries[file]?.state { entries[file] = nil }
    }

    /// The file's text line (with its newline).
    public static func line(_ record: UploadRecord) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(record)) ?? Data()) + [UInt8(ascii: "\n")]
    }

    /// The same queue in as few lines as hold it: a `queued` line for each file waiting, the
    /// last `uploaded` line of each file uploaded (what `vigil clips` shows and
    /// `delete_local_after` counts from) and the `set_aside` line of each file set aside, in
    /// the order they were written; nothing of files deleted. What `uploads.jsonl` is written
    /// anew with when it has grown to many times that (`wantsCompacting`).
    public var compacted: [UploadRecord] {
        entries.values.sorted { $0.order < $1.order }.map(\.record)
    }

    /// Whether the file is worth writing anew (`compacted`): it has grown past a thousand
    /// lines, four times what it must hold.
    public var wantsCompacting: Bool { lines > max(1000, 4 * entries.count) }

    /// The file was written anew with `compacted`: its lines are those.
    public mutating func rewritten() {
        lines = entries.count
        unreadableLines = 0
    }

    /// Every line of `bytes` that can be read, in order (for tools and tests that look at the
    /// lines themselves, not at what they come to).
    public static func records(in bytes: [UInt8]) -> [UploadRecord] {
        let decoder = JSONDecoder()
        return bytes.split(separator: UInt8(ascii: "\n")).compactMap { Reader.record($0, decoder) }
    }

    /// The queue in `storage` (`uploads.jsonl`), read a piece at a time (never whole in memory),
    /// or nil when there is none.
    public static func read(from storage: any ClipStorage) throws(FileError) -> UploadJournal? {
        let file: any MovieFile
        do { file = try storage.readMovie(name) } catch {
            if error.isMissing { return nil }
            throw error
        }
        defer { try? file.close() }
        return try read(file, length: file.length, until: { false })
    }

    /// The queue in the first `length` bytes of `file`, read `Reader.piece` bytes at a time;
    /// nil when `stop` says so between two pieces.
    public static func read(
        _ file: any MovieFile, length: UInt64, until stop: () -> Bool
    ) throws(FileError) -> UploadJournal? {
        var reader = Reader()
        var offset: UInt64 = 0
        while offset < length {
            if stop() { return nil }
            let bytes = try file.read(at: offset, count: Int(min(UInt64(Reader.piece), length - offset)))
            if bytes.isEmpty { break }
            reader.take(bytes)
            offset += UInt64(bytes.count)
        }
        return reader.finish()
    }

    /// Reads a queue piece by piece, each line taken as it is complete: only the line being
    /// read is kept, and a line longer than `longestLine` (no line of ours is) is counted
    /// unreadable without being kept whole.
    public struct Reader {
        public private(set) var journal = UploadJournal()
        private var partial: [UInt8] = []
        private var overlong = false
        private let decoder = JSONDecoder()

        /// How much of the file is read at a time.
        public static let piece = 256 << 10
        public static let longestLine = 64 << 10

        public init() {}

        public mutating func take(_ bytes: [UInt8]) {
            var start = bytes.startIndex
            while let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
                if partial.isEmpty && !overlong {
                    line(bytes[start..<end])
                } else {
                    partial += bytes[start..<end]
                    line(partial[...])
                    partial.removeAll(keepingCapacity: true)
                }
                overlong = false
                start = end + 1
            }
            guard !overlong else { return }
            partial += bytes[start...]
            if partial.count > Self.longestLine {
                partial = []
                overlong = true
            }
        }

        /// The queue, the last line taken even without its newline.
        public mutating func finish() -> UploadJournal {
            if overlong || !partial.isEmpty { line(partial[...]) }
            partial = []
            overlong = false
            return journal
        }

        private mutating func line(_ bytes: ArraySlice<UInt8>) {
            guard !overlong else {
                journal.unreadable()
                return
            }
            guard !bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) else { return }
            if let record = Self.record(bytes, decoder) { journal.apply(record) } else { journal.unreadable() }
        }

        static func record(_ bytes: ArraySlice<UInt8>, _ decoder: JSONDecoder) -> UploadRecord? {
            guard let record = try? decoder.decode(UploadRecord.self, from: Data(bytes)), record.file != nil else {
                return nil
            }
            return record
        }
    }

    private mutating func unreadable() {
        lines += 1
        unreadableLines += 1
    }
}
