internal import CSQLite
import Recorder

/// One connection to a SQLite database (Debian's libsqlite3), for the catalogue: opened without
/// following a symbolic link, its calls checked, its errors said with the file's path. Not
/// shared between threads: its owner serializes the calls (`SQLiteCatalogue` holds it in a
/// mutex).
final class SQLiteDatabase {
    let path: String
    private let handle: OpaquePointer

    /// Opens (and with `create`, makes) the database at `path`; `:memory:` is one in memory.
    init(path: String, create: Bool, readOnly: Bool = false) throws(CatalogueError) {
        self.path = path
        var opened: OpaquePointer?
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        let status = sqlite3_open_v2(path, &opened, flags, nil)
        guard status == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            if let opened { sqlite3_close_v2(opened) }
            throw Self.error(status, message, path: path, doing: "open")
        }
        handle = opened
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs statements that return nothing the caller reads (the schema, a pragma, a
    /// transaction's begin and end).
    func execute(_ sql: String) throws(CatalogueError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard status == SQLITE_OK else {
            throw Self.error(
                status, message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(status)), path: path,
                doing: sql)
        }
    }

    /// Waits up to `milliseconds` for another connection's lock (a reader of another thread,
    /// `vigil clips` beside the agent) before a call says the database is busy.
    func waitWhenBusy(milliseconds: Int32) { sqlite3_busy_timeout(handle, milliseconds) }

    /// Prepares `sql` with its `?` bound to `values`, in order.
    func statement(_ sql: String, _ values: [SQLiteValue] = []) throws(CatalogueError) -> SQLiteStatement {
        var prepared: OpaquePointer?
        let status = sqlite3_prepare_v2(handle, sql, -1, &prepared, nil)
        guard status == SQLITE_OK, let prepared else { throw failure(status, doing: sql) }
        let statement = SQLiteStatement(prepared, database: self, sql: sql)
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            let bound: Int32
            switch value {
            case .null: bound = sqlite3_bind_null(prepared, position)
            case .integer(let number): bound = sqlite3_bind_int64(prepared, position, number)
            case .real(let number): bound = sqlite3_bind_double(prepared, position, number)
            case .text(let text):
                // withCString always has an address, an empty string's too.
                let count = Int32(text.utf8.count)
                bound = text.withCString { vigil_sqlite3_bind_text(prepared, position, $0, count) }
            }
            guard bound == SQLITE_OK else { throw failure(bound, doing: sql) }
        }
        return statement
    }

    /// Runs `sql` (with `values` bound) to its end; how many rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [SQLiteValue] = []) throws(CatalogueError) -> Int {
        let statement = try statement(sql, values)
        while try statement.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// The rows `sql` returns, each read by `row`.
    func rows<Row>(
        _ sql: String, _ values: [SQLiteValue] = [], _ row: (SQLiteStatement) -> Row
    )
        throws(CatalogueError) -> [Row]
    {
        let statement = try statement(sql, values)
        var rows: [Row] = []
        while try statement.step() { rows.append(row(statement)) }
        return rows
    }

    /// Runs `body` in one transaction, committed when it returns and rolled back when it throws.
    func transaction<Result>(_ body: () throws(CatalogueError) -> Result) throws(CatalogueError) -> Result {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    func failure(_ status: Int32, doing: String) -> CatalogueError {
        Self.error(status, String(cString: sqlite3_errmsg(handle)), path: path, doing: doing)
    }

    /// The catalogue's error for a SQLite status: a damaged or foreign file is unreadable (set
    /// aside and rebuilt); a full disk, a lock or a read-only file says so.
    static func error(_ status: Int32, _ message: String, path: String, doing: String) -> CatalogueError {
        let primary = status & 0xFF
        let what = doing.split(separator: " ").prefix(3).joined(separator: " ")
        switch primary {
        case SQLITE_CORRUPT, SQLITE_NOTADB:
            return CatalogueError(
                description:
                    "the clip catalogue \(path) is damaged (\(message)): it is set aside and rebuilt from the clips",
                isUnreadable: true)
        case SQLITE_FULL:
            return CatalogueError(
                description: "the clip catalogue \(path) cannot grow: the disk is full (\(message)) — free some space",
                isOutOfSpace: true)
        case SQLITE_BUSY, SQLITE_LOCKED:
            return CatalogueError(
                description:
                    "the clip catalogue \(path) is locked by another program (\(message)) — close what holds it (an sqlite3 shell?)"
            )
        case SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN, SQLITE_AUTH:
            return CatalogueError(
                description:
                    "the clip catalogue \(path) cannot be opened for writing (\(message)) — check that it is a file the agent's user owns, in a directory it may write"
            )
        default:
            return CatalogueError(description: "the clip catalogue \(path) failed at \(what): \(message)")
        }
    }
}

/// A value bound to a statement's `?`.
enum SQLiteValue {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    static func optional(_ text: String?) -> SQLiteValue { text.map { .text($0) } ?? .null }
}

/// A prepared statement, finalized when dropped.
final class SQLiteStatement {
    private let handle: OpaquePointer
    private let database: SQLiteDatabase
    private let sql: String

    init(_ handle: OpaquePointer, database: SQLiteDatabase, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(handle) }

    /// The next row: true when there is one to read, false at the end.
    func step() throws(CatalogueError) -> Bool {
        let status = sqlite3_step(handle)
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.failure(status, doing: sql)
        }
    }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func real(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}
