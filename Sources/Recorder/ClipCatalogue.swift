import FoundationEssentials
import Media

/// The catalogue of the clips in the storage directory: one entry per saved clip — its journal
/// record, and what the page, the API and retention ask of it (its day, what triggered it, its
/// bytes with its picture's, whether it is damaged, where its upload stands) — kept so that
/// every question is answered from an index, whatever the number of clips: a page of the
/// newest, a day's count, the oldest to delete, one clip by name. Nothing is held in memory
/// per clip.
///
/// `Storage.SQLiteCatalogue` keeps it in SQLite, beside the clips (`catalogue.sqlite`); a test
/// may open one in memory. An entry added is durable when `add` returns: a clip said saved is
/// in the catalogue after a power cut.
public protocol ClipCatalogue: AnyObject, Sendable {
    /// Adds a saved clip's entry, or replaces the one under its name (a clip repaired, its
    /// picture written later; an entry without an upload state keeps the one it had); durable
    /// on return.
    func add(_ entry: CatalogueEntry) throws(CatalogueError)
    /// Adds many entries at once, in one transaction (a migration, a rescan); durable on return.
    func add(_ entries: [CatalogueEntry]) throws(CatalogueError)
    /// Makes the catalogue list exactly `entries`: those it lacks or holds otherwise are
    /// written, those it holds of other clips removed, in one transaction (the upload states of
    /// the clips it keeps stay); how many entries were written and removed. Durable on return.
    func synchronize(with entries: [CatalogueEntry]) throws(CatalogueError) -> (written: Int, removed: Int)
    /// Removes the entries of these clips (retention deleted them, or the owner did), in one
    /// transaction; a name without an entry is no error. Durable on return.
    func remove(_ files: [String]) throws(CatalogueError)
    /// The entry of one clip, by its path in the storage directory; nil when it has none.
    func entry(_ file: String) throws(CatalogueError) -> CatalogueEntry?
    /// One page of clips, newest first, as `query` asks.
    func page(_ query: ClipQuery) throws(CatalogueError) -> ClipPage
    /// The days that have clips, newest first, with how many each has (as `query`'s filters
    /// count them; its cursor and limit are not used): at most `limit` days before `before`
    /// (a day as `YYYY-MM-DD`; nil: from the newest).
    func days(_ query: ClipQuery, before: String?, limit: Int) throws(CatalogueError) -> [DayCount]
    /// How many clips, and the bytes they take with their pictures.
    func totals() throws(CatalogueError) -> CatalogueTotals
    /// The clips retention deletes first, `limit` at most after `after` (nil: from the first):
    /// by the date each ages from (`aged_from` when the clip's clock was wrong, else its start,
    /// moved by the wall clock's steps: `shiftAges`), then by name.
    func oldest(after: AgeCursor?, limit: Int) throws(CatalogueError) -> [AgedEntry]
    /// The clips dated by a wrong clock: aged from before `before` or after `after`
    /// (milliseconds since 1970), `limit` at most.
    func misdated(before: Int64, after: Int64, limit: Int) throws(CatalogueError) -> [AgedEntry]
    /// The wall clock stepped forward from `from` to `to` (milliseconds since 1970): a clip
    /// aged from before the step is as old after it (its date moved by the step), one dated
    /// between the two readings ages from `to` (`ClockStep.shift`). One transaction; durable.
    func shiftAges(from: Int64, to: Int64) throws(CatalogueError)
    /// Says a clip is being recorded into `file`, before its file is made: a start after a
    /// kill or a power cut repairs the clips it names, and no other. Durable on return.
    func beginRecording(_ file: String) throws(CatalogueError)
    /// The clip in `file` is saved (its entry added) or gone: no longer being recorded.
    func endRecording(_ file: String) throws(CatalogueError)
    /// The clips said being recorded and not ended (an earlier run was stopped mid-clip).
    func recording() throws(CatalogueError) -> [String]
    /// Whether the catalogue has been made to list the clips on disk (`synchronize`) since it
    /// was made: false for a new one (a directory an earlier version wrote, a damaged one set
    /// aside), which a start fills from the clips and the journal.
    func isSynchronized() throws(CatalogueError) -> Bool
    /// Where a clip's upload stands (nil: it is not to be uploaded); no error for a clip without
    /// an entry.
    func setUpload(_ state: UploadState?, of file: String) throws(CatalogueError)
    /// Where the uploads of these clips stand, in one transaction (the upload queue's states
    /// written into a catalogue that lacks them); no error for a clip without an entry.
    func setUploads(_ states: [(file: String, state: UploadState?)]) throws(CatalogueError)
    /// The upload states of at most `limit` clips whose names come after `file` (nil: from the
    /// first), in the order of their names: the catalogue walked a page at a time, without its
    /// records.
    func uploads(after file: String?, limit: Int) throws(CatalogueError) -> [(file: String, state: UploadState?)]
}

/// The catalogue's files in the storage directory.
public enum CatalogueFile {
    /// The database.
    public static let name = "catalogue.sqlite"
    /// The database and what SQLite keeps beside it (its write-ahead log and the log's index):
    /// moved aside together, or a new database would be read through the old one's log.
    public static let names = [name, name + "-wal", name + "-shm"]
}

/// What went wrong with the catalogue: the file, the problem, and what to do.
public struct CatalogueError: Error, CustomStringConvertible, Sendable, Equatable {
    public var description: String
    /// The catalogue's file cannot be read as one (not a database, damaged, a newer version's):
    /// it is set aside and rebuilt from the clips (`vigil clips --rescan`).
    public var isUnreadable: Bool
    /// The disk is full: the catalogue could not grow (retention can make room).
    public var isOutOfSpace: Bool

    public init(description: String, isUnreadable: Bool = false, isOutOfSpace: Bool = false) {
        self.description = description
        self.isUnreadable = isUnreadable
        self.isOutOfSpace = isOutOfSpace
    }
}

/// A clip as the catalogue keeps it.
public struct CatalogueEntry: Sendable, Equatable {
    /// Its journal record, whole (`events.jsonl`'s line for it).
    public var record: ClipRecord
    /// The bytes of its picture beside it (`record.snapshot`), which retention frees with it.
    public var pictureBytes: Int64
    /// Where its upload stands; nil when it is not to be uploaded.
    public var upload: UploadState?

    public init(record: ClipRecord, pictureBytes: Int64 = 0, upload: UploadState? = nil) {
        self.record = record
        self.pictureBytes = pictureBytes
        self.upload = upload
    }

    public var file: String { record.file }

    /// When the clip started, as its record says (nil for a start that is no journal timestamp).
    public var started: Date? { ClipRecord.date(fromTimestamp: record.start) }

    /// The day it was recorded, in the camera's local time as its name and record say it:
    /// `YYYY-MM-DD`, the first ten characters of its start.
    public var day: String { String(record.start.prefix(10)) }

    /// The date retention ages it from: `aged_from` when its clock was wrong, else its start.
    public var agedFrom: Date? { record.agedFrom.flatMap(ClipRecord.date(fromTimestamp:)) ?? started }

    /// What it takes on the disk, with its picture.
    public var totalBytes: Int64 { Int64(clamping: record.bytes) + pictureBytes }
}

/// Where a clip's upload stands.
public enum UploadState: Sendable, Equatable {
    /// Queued, not yet on the server.
    case waiting
    /// On the server, at this URL.
    case uploaded(url: String)
    /// Set aside after failing again and again, for this reason.
    case failed(reason: String)

    /// The state's name, as the API and the catalogue say it.
    public var name: String {
        switch self {
        case .waiting: "waiting"
        case .uploaded: "uploaded"
        case .failed: "failed"
        }
    }
}

/// Which clips a page lists: its filters, where it starts, and how many it holds.
public struct ClipQuery: Sendable, Equatable {
    /// Only clips of this day (`YYYY-MM-DD`).
    public var day: String?
    /// Only clips this started.
    public var cause: TriggerCause?
    /// Only damaged clips (true) or only whole ones (false).
    public var damaged: Bool?
    /// Only clips whose upload is in this state (by `UploadState.name`: waiting, uploaded,
    /// failed).
    public var upload: String?
    /// Clips older than this one: the cursor the page before gave (`ClipPage.next`).
    public var before: ClipCursor?
    /// At most this many (1 to `ClipQuery.largestPage`).
    public var limit: Int

    /// The page's size when none is asked.
    public static let defaultLimit = 100
    /// The largest page anyone may ask.
    public static let largestPage = 1000

    public init(
        day: String? = nil, cause: TriggerCause? = nil, damaged: Bool? = nil, upload: String? = nil,
        before: ClipCursor? = nil, limit: Int = ClipQuery.defaultLimit
    ) {
        self.day = day
        self.cause = cause
        self.damaged = damaged
        self.upload = upload
        self.before = before
        self.limit = max(1, min(limit, Self.largestPage))
    }
}

/// A place in the list of clips, newest first: just after the clip that started at `start`
/// (milliseconds since 1970, UTC) under `file`. Its text (`text`) is what the API hands out
/// and takes back (`?before=…`).
public struct ClipCursor: Sendable, Equatable {
    public var start: Int64
    public var file: String

    public init(start: Int64, file: String) {
        self.start = start
        self.file = file
    }

    /// The cursor after `entry` (nil when its start is no timestamp: it is then listed last).
    public init(after entry: CatalogueEntry) {
        self.init(start: CatalogueOrder.key(entry), file: entry.file)
    }

    /// `<start>~<file>`.
    public var text: String { "\(start)~\(file)" }

    /// The cursor a `text` stands for; nil for anything else.
    public init?(text: String) {
        guard let separator = text.firstIndex(of: "~"), let start = Int64(text[..<separator]) else { return nil }
        let file = String(text[text.index(after: separator)...])
        guard !file.isEmpty else { return nil }
        self.init(start: start, file: file)
    }
}

/// The order the catalogue lists clips in: by start (milliseconds since 1970), then by name.
public enum CatalogueOrder {
    /// The sort key of a clip's start: milliseconds since 1970, UTC; a start that is no
    /// timestamp sorts first (the oldest, listed last).
    public static func key(_ entry: CatalogueEntry) -> Int64 {
        entry.started.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? Int64.min
    }

    /// The key retention orders by: `aged_from` when the clip's clock was wrong, else its start.
    public static func ageKey(_ entry: CatalogueEntry) -> Int64 {
        entry.agedFrom.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? Int64.min
    }
}

/// A clip in the order retention deletes in, with the date it ages from (milliseconds since
/// 1970, UTC; clock steps taken in).
public struct AgedEntry: Sendable, Equatable {
    public var entry: CatalogueEntry
    public var age: Int64

    public init(entry: CatalogueEntry, age: Int64) {
        self.entry = entry
        self.age = age
    }

    /// The place just after this clip, for the next batch.
    public var cursor: AgeCursor { AgeCursor(age: age, file: entry.file) }
}

/// A place in the order retention deletes in: after the clip aged from `age` under `file`.
public struct AgeCursor: Sendable, Equatable {
    public var age: Int64
    public var file: String

    public init(age: Int64, file: String) {
        self.age = age
        self.file = file
    }
}

/// One page of clips, newest first.
public struct ClipPage: Sendable, Equatable {
    public var entries: [CatalogueEntry]
    /// The cursor of the page after this one; nil when this is the last.
    public var next: ClipCursor?

    public init(entries: [CatalogueEntry], next: ClipCursor?) {
        self.entries = entries
        self.next = next
    }
}

/// A day that has clips, and how many.
public struct DayCount: Sendable, Equatable {
    public var day: String
    public var clips: Int

    public init(day: String, clips: Int) {
        self.day = day
        self.clips = clips
    }
}

/// How many clips the catalogue has, and the bytes they take with their pictures.
public struct CatalogueTotals: Sendable, Equatable {
    public var clips: Int
    public var bytes: Int64

    public init(clips: Int, bytes: Int64) {
        self.clips = clips
        self.bytes = bytes
    }
}
