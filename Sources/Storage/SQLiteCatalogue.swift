import FoundationEssentials
import Media
import Recorder
import Synchronization

/// The clip catalogue in SQLite (Debian's libsqlite3): `catalogue.sqlite` in the storage
/// directory, in WAL mode with every commit synced (`synchronous = FULL`), so an entry added is
/// on the disk when `add` returns and a power cut loses no saved clip. The table `clip` has a row
/// per clip with the columns the questions filter and order on (indexed) and the clip's journal
/// record as JSON; `recording` names the clips being recorded (a start repairs those), `meta`
/// says whether the catalogue was ever made to list the clips on disk. Nothing per clip is held
/// in memory. Tables version 1 (no `recording`, no `meta`) is brought to 2 at open and filled
/// from the clips again at the next start.
///
/// Every connection is used by one thread at a time (a mutex): the agent's writer adds and
/// retention removes on one, the web page and `vigil clips` read on others — WAL lets a reader
/// read while the writer writes, so a page never holds up a clip.
public final class SQLiteCatalogue: ClipCatalogue {
    /// The catalogue's name in the storage directory (and beside it, SQLite's `-wal` and `-shm`).
    public static let name = CatalogueFile.name
    /// The version of the tables this code writes (SQLite's `user_version`).
    static let schemaVersion = 2

    /// The catalogue's file, for messages.
    public let path: String
    private let database: Mutex<SQLiteDatabase>

    /// Opens the catalogue at `path`, making it (and its tables) when there is none;
    /// `":memory:"` is one in memory (tests). A file that is no catalogue, a damaged one or a
    /// newer version's throws an error whose `isUnreadable` is true: set it aside and rebuild.
    /// With `readOnly`, only reads (`vigil clips` beside a running agent).
    public init(path: String, readOnly: Bool = false) throws(CatalogueError) {
        self.path = path
        let database = try SQLiteDatabase(path: path, create: !readOnly, readOnly: readOnly)
        database.waitWhenBusy(milliseconds: 10_000)
        if !readOnly {
            try database.execute("PRAGMA journal_mode = WAL")
            try database.execute("PRAGMA synchronous = FULL")
            // The log is copied into the database every 100 pages (400 KB) and kept at 1 MB at
            // most: on a small card the catalogue's files stay small, and once copied the log is
            // written again from its start, in blocks it already has — a clip's entry needs no
            // new space on a disk that has just filled.
            try database.execute("PRAGMA wal_autocheckpoint = 100")
            try database.execute("PRAGMA journal_size_limit = 1048576")
        }
        // Read only, the catalogue is not checked whole (`quick_check` reads every page): a
        // listing begins at once and reads what it lists; a damaged page is an error where it is.
        try Self.check(database, wholeFile: !readOnly)
        if !readOnly { try Self.makeTables(database) }
        self.database = Mutex(database)
    }

    /// A catalogue in memory, for tests and `vigil analyze`-like uses: the same SQL, no file.
    public static func inMemory() throws(CatalogueError) -> SQLiteCatalogue {
        try SQLiteCatalogue(path: ":memory:")
    }

    /// SQLite's own check of the file (`quick_check`: every page and index readable) with
    /// `wholeFile`, and the version of its tables: a newer one is refused rather than written
    /// over.
    private static func check(_ database: SQLiteDatabase, wholeFile: Bool) throws(CatalogueError) {
        let verdict = wholeFile ? try database.rows("PRAGMA quick_check") { $0.text(0) ?? "" } : ["ok"]
        guard verdict == ["ok"] else {
            throw CatalogueError(
                description:
                    "the clip catalogue \(database.path) is damaged (\(verdict.prefix(3).joined(separator: "; "))): it is set aside and rebuilt from the clips",
                isUnreadable: true)
        }
        let version = try database.rows("PRAGMA user_version") { $0.integer(0) }.first ?? 0
        guard version <= schemaVersion else {
            throw CatalogueError(
                description:
                    "the clip catalogue \(database.path) was written by a newer version of Vigil (tables version \(version), this one knows \(schemaVersion)): it is set aside and rebuilt from the clips — or install that version again",
                isUnreadable: true)
        }
    }

    private static func makeTables(_ database: SQLiteDatabase) throws(CatalogueError) {
        let version = try database.rows("PRAGMA user_version") { $0.integer(0) }.first ?? 0
        guard version < schemaVersion else { return }
        try database.transaction { () throws(CatalogueError) in
            try database.execute(
                """
                CREATE TABLE IF NOT EXISTS clip (
                    file TEXT PRIMARY KEY NOT NULL,
                    start_ms INTEGER NOT NULL,
                    age_ms INTEGER NOT NULL,
                    day TEXT NOT NULL,
                    cause TEXT,
                    damaged INTEGER NOT NULL,
                    bytes INTEGER NOT NULL,
                    picture_bytes INTEGER NOT NULL,
                    upload TEXT,
                    upload_detail TEXT,
                    record TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS clip_by_start ON clip (start_ms, file);
                CREATE INDEX IF NOT EXISTS clip_by_day ON clip (day, start_ms, file);
                CREATE INDEX IF NOT EXISTS clip_by_age ON clip (age_ms, file);
                CREATE INDEX IF NOT EXISTS clip_by_upload ON clip (upload, start_ms, file);
                CREATE TABLE IF NOT EXISTS recording (file TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value TEXT) WITHOUT ROWID;
                PRAGMA user_version = \(schemaVersion);
                """)
        }
    }

    // MARK: Writing

    public func add(_ entry: CatalogueEntry) throws(CatalogueError) {
        try add([entry])
    }

    public func add(_ entries: [CatalogueEntry]) throws(CatalogueError) {
        guard !entries.isEmpty else { return }
        var rows: [[SQLiteValue]] = []
        rows.reserveCapacity(entries.count)
        for entry in entries { rows.append(try Self.row(entry)) }
        try database.withLock { (database) throws(CatalogueError) in
            try database.transaction { () throws(CatalogueError) in
                for row in rows { try database.run(Self.upsert, row) }
            }
        }
    }

    /// An entry in, over the one under its name; an upload state not given keeps the old one.
    private static let upsert = """
        INSERT INTO clip
            (file, start_ms, age_ms, day, cause, damaged, bytes, picture_bytes, upload, upload_detail, record)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (file) DO UPDATE SET
            start_ms = excluded.start_ms, age_ms = excluded.age_ms, day = excluded.day, cause = excluded.cause,
            damaged = excluded.damaged, bytes = excluded.bytes, picture_bytes = excluded.picture_bytes,
            upload = coalesce(excluded.upload, clip.upload),
            upload_detail = CASE WHEN excluded.upload IS NULL THEN clip.upload_detail ELSE excluded.upload_detail END,
            record = excluded.record
        """

    public func synchronize(with entries: [CatalogueEntry]) throws(CatalogueError) -> (written: Int, removed: Int) {
        var wanted: [String: [SQLiteValue]] = [:]
        wanted.reserveCapacity(entries.count)
        for entry in entries { wanted[entry.file] = try Self.row(entry) }
        let changed = try database.withLock { (database) throws(CatalogueError) in
            try database.transaction { () throws(CatalogueError) in
                // What it holds now, by name: its record and its picture's bytes, to compare.
                var held: [String: (record: String, pictureBytes: Int64)] = [:]
                for (file, record, pictureBytes) in try database.rows(
                    "SELECT file, record, picture_bytes FROM clip", [],
                    { ($0.text(0) ?? "", $0.text(1) ?? "", $0.integer(2)) })
                {
                    held[file] = (record, pictureBytes)
                }
                var written = 0
                for (file, row) in wanted {
                    if let now = held[file], case .text(let record) = row[10], case .integer(let pictureBytes) = row[7],
                        now.record == record, now.pictureBytes == pictureBytes
                    {
                        continue
                    }
                    try database.run(Self.upsert, row)
                    written += 1
                }
                var removed = 0
                for file in held.keys where wanted[file] == nil {
                    try database.run("DELETE FROM clip WHERE file = ?", [.text(file)])
                    removed += 1
                }
                try database.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('synchronized', '1')", [])
                return (written, removed)
            }
        }
        // Copied into the database now, so the next entries reuse the log's blocks.
        try? database.withLock { (database) throws(CatalogueError) in
            try database.execute("PRAGMA wal_checkpoint(PASSIVE)")
        }
        return changed
    }

    public func remove(_ files: [String]) throws(CatalogueError) {
        guard !files.isEmpty else { return }
        try database.withLock { (database) throws(CatalogueError) in
            try database.transaction { () throws(CatalogueError) in
                for file in files { try database.run("DELETE FROM clip WHERE file = ?", [.text(file)]) }
            }
        }
    }

    public func shiftAges(from: Int64, to: Int64) throws(CatalogueError) {
        guard to > from else { return }
        try database.withLock { (database) throws(CatalogueError) in
            try database.transaction { () throws(CatalogueError) in
                try database.run(
                    "UPDATE clip SET age_ms = CASE WHEN age_ms <= ? THEN age_ms + ? ELSE ? END WHERE age_ms < ?",
                    [.integer(from), .integer(to - from), .integer(to), .integer(to)])
            }
        }
    }

    public func beginRecording(_ file: String) throws(CatalogueError) {
        try database.withLock { (database) throws(CatalogueError) in
            try database.run("INSERT OR REPLACE INTO recording (file) VALUES (?)", [.text(file)])
        }
    }

    public func endRecording(_ file: String) throws(CatalogueError) {
        try database.withLock { (database) throws(CatalogueError) in
            try database.run("DELETE FROM recording WHERE file = ?", [.text(file)])
        }
    }

    public func setUpload(_ state: UploadState?, of file: String) throws(CatalogueError) {
        try setUploads([(file, state)])
    }

    public func setUploads(_ states: [(file: String, state: UploadState?)]) throws(CatalogueError) {
        guard !states.isEmpty else { return }
        try database.withLock { (database) throws(CatalogueError) in
            try database.transaction { () throws(CatalogueError) in
                for (file, state) in states {
                    let (name, detail) = Self.columns(state)
                    try database.run(
                        "UPDATE clip SET upload = ?, upload_detail = ? WHERE file = ?", [name, detail, .text(file)])
                }
            }
        }
    }

    public func uploads(
        after file: String?, limit: Int
    ) throws(CatalogueError) -> [(file: String, state: UploadState?)] {
        try database.withLock { (database) throws(CatalogueError) in
            try database.rows(
                "SELECT file, upload, upload_detail FROM clip WHERE file > ? ORDER BY file LIMIT ?",
                [.text(file ?? ""), .integer(Int64(max(1, limit)))]
            ) { (file: $0.text(0) ?? "", state: Self.state($0.text(1), $0.text(2))) }
        }
    }

    // MARK: Reading

    /// The columns every read selects, in the order `entry(from:)` reads them.
    private static let selected = "record, picture_bytes, upload, upload_detail, start_ms, age_ms"

    public func entry(_ file: String) throws(CatalogueError) -> CatalogueEntry? {
        try read("SELECT \(Self.selected) FROM clip WHERE file = ?", [.text(file)]).first?.entry
    }

    public func page(_ query: ClipQuery) throws(CatalogueError) -> ClipPage {
        var (conditions, values) = Self.filters(query)
        if let before = query.before {
            conditions.append("(start_ms, file) < (?, ?)")
            values += [.integer(before.start), .text(before.file)]
        }
        // By an upload state: SQLite's choice (`clip_by_upload`, where the catalogue has it).
        let index =
            query.day != nil ? " INDEXED BY clip_by_day" : query.upload != nil ? "" : " INDEXED BY clip_by_start"
        values.append(.integer(Int64(query.limit + 1)))
        let rows = try read(
            "SELECT \(Self.selected) FROM clip\(index)\(Self.whereClause(conditions)) "
                + "ORDER BY start_ms DESC, file DESC LIMIT ?", values)
        let entries = rows.prefix(query.limit)
        let next =
            rows.count > query.limit ? entries.last.map { ClipCursor(start: $0.start, file: $0.entry.file) } : nil
        return ClipPage(entries: entries.map(\.entry), next: next)
    }

    public func days(_ query: ClipQuery, before: String?, limit: Int) throws(CatalogueError) -> [DayCount] {
        var (conditions, values) = Self.filters(query)
        if let before {
            conditions.append("day < ?")
            values.append(.text(before))
        }
        values.append(.integer(Int64(max(1, limit))))
        return try database.withLock { (database) throws(CatalogueError) in
            try database.rows(
                "SELECT day, count(*) FROM clip INDEXED BY clip_by_day\(Self.whereClause(conditions)) "
                    + "GROUP BY day ORDER BY day DESC LIMIT ?", values
            ) { DayCount(day: $0.text(0) ?? "", clips: Int($0.integer(1))) }
        }
    }

    public func totals() throws(CatalogueError) -> CatalogueTotals {
        try database.withLock { (database) throws(CatalogueError) in
            try database.rows("SELECT count(*), total(bytes + picture_bytes) FROM clip") {
                CatalogueTotals(clips: Int($0.integer(0)), bytes: Int64($0.real(1)))
            }.first ?? CatalogueTotals(clips: 0, bytes: 0)
        }
    }

    public func oldest(after: AgeCursor?, limit: Int) throws(CatalogueError) -> [AgedEntry] {
        var values: [SQLiteValue] = []
        var condition = ""
        if let after {
            condition = "WHERE (age_ms, file) > (?, ?) "
            values = [.integer(after.age), .text(after.file)]
        }
        values.append(.integer(Int64(max(0, limit))))
        return try read(
            "SELECT \(Self.selected) FROM clip INDEXED BY clip_by_age \(condition)ORDER BY age_ms, file LIMIT ?",
            values
        ).map { AgedEntry(entry: $0.entry, age: $0.age) }
    }

    public func misdated(before: Int64, after: Int64, limit: Int) throws(CatalogueError) -> [AgedEntry] {
        try read(
            "SELECT \(Self.selected) FROM clip WHERE age_ms < ? OR age_ms > ? ORDER BY age_ms, file LIMIT ?",
            [.integer(before), .integer(after), .integer(Int64(max(0, limit)))]
        ).map { AgedEntry(entry: $0.entry, age: $0.age) }
    }

    public func isSynchronized() throws(CatalogueError) -> Bool {
        try database.withLock { (database) throws(CatalogueError) in
            try database.rows("SELECT value FROM meta WHERE key = 'synchronized'") { $0.text(0) }.first == "1"
        }
    }

    public func recording() throws(CatalogueError) -> [String] {
        try database.withLock { (database) throws(CatalogueError) in
            try database.rows("SELECT file FROM recording ORDER BY file") { $0.text(0) ?? "" }
        }
    }

    // MARK: Rows

    private func read(
        _ sql: String, _ values: [SQLiteValue]
    ) throws(CatalogueError) -> [(
        entry: CatalogueEntry, start: Int64, age: Int64
    )] {
        let rows = try database.withLock { (database) throws(CatalogueError) in
            try database.rows(sql, values) { row in
                (
                    record: row.text(0) ?? "", pictureBytes: row.integer(1), upload: row.text(2),
                    detail: row.text(3), start: row.integer(4), age: row.integer(5)
                )
            }
        }
        // Decoded outside the lock: the writer waits only for SQLite.
        var entries: [(entry: CatalogueEntry, start: Int64, age: Int64)] = []
        entries.reserveCapacity(rows.count)
        for row in rows {
            guard let record = try? JSONDecoder().decode(ClipRecord.self, from: Data(row.record.utf8)) else {
                throw CatalogueError(
                    description:
                        "the clip catalogue \(path) holds a record that is no clip's (\(row.record.prefix(80))): it is set aside and rebuilt from the clips",
                    isUnreadable: true)
            }
            entries.append(
                (
                    CatalogueEntry(
                        record: record, pictureBytes: row.pictureBytes,
                        upload: Self.state(row.upload, row.detail)), row.start, row.age
                ))
        }
        return entries
    }

    /// An entry's row, in the order `add` inserts it.
    private static func row(_ entry: CatalogueEntry) throws(CatalogueError) -> [SQLiteValue] {
        let line: [UInt8]
        do { line = try EventsJournal.line(entry.record) } catch {
            throw CatalogueError(description: error.description)
        }
        let (upload, detail) = columns(entry.upload)
        return [
            .text(entry.file), .integer(CatalogueOrder.key(entry)), .integer(CatalogueOrder.ageKey(entry)),
            .text(entry.day), .optional(entry.record.cause?.rawValue), .integer(entry.record.damaged == true ? 1 : 0),
            .integer(Int64(clamping: entry.record.bytes)), .integer(entry.pictureBytes), upload, detail,
            .text(String(decoding: line.dropLast(), as: UTF8.self)),
        ]
    }

    private static func columns(_ state: UploadState?) -> (SQLiteValue, SQLiteValue) {
        switch state {
        case nil: (.null, .null)
        case .waiting: (.text("waiting"), .null)
        case .uploaded(let url): (.text("uploaded"), .text(url))
        case .failed(let reason): (.text("failed"), .text(reason))
        }
    }

    private static func state(_ name: String?, _ detail: String?) -> UploadState? {
        switch name {
        case "waiting": .waiting
        case "uploaded": .uploaded(url: detail ?? "")
        case "failed": .failed(reason: detail ?? "")
        default: nil
        }
    }

    /// The conditions of `query`'s filters (not its cursor), with their values.
    private static func filters(_ query: ClipQuery) -> ([String], [SQLiteValue]) {
        var conditions: [String] = []
        var values: [SQLiteValue] = []
        if let day = query.day {
            conditions.append("day = ?")
            values.append(.text(day))
        }
        if let cause = query.cause {
            conditions.append("cause = ?")
            values.append(.text(cause.rawValue))
        }
        if let damaged = query.damaged { conditions.append(damaged ? "damaged = 1" : "damaged = 0") }
        if let upload = query.upload {
            conditions.append("upload = ?")
            values.append(.text(upload))
        }
        return (conditions, values)
    }

    private static func whereClause(_ conditions: [String]) -> String {
        conditions.isEmpty ? " " : " WHERE " + conditions.joined(separator: " AND ") + " "
    }
}
