import FoundationEssentials

/// The events journal's bytes as they are read: the records in each line, and the bytes
/// around them that are no record.
///
/// How records are found, so that a damaged line never hides another:
/// - Lines end at a newline byte. JSON escapes a newline inside a string, so a newline never
///   belongs to a record: it always ends one line and starts the next.
/// - A record is a JSON object that starts with `{"` and ends at the brace that closes it
///   (braces inside strings do not count) and that decodes as a `ClipRecord`.
/// - Inside a line, every `{"` that is not inside a record already found is tried as a start.
///
/// A line torn by a full disk or a crash is the start of a record: an object never closed.
/// When the next line was appended to it with no newline between, the record glued after it
/// is still found: read from the torn start, the glued record's braces and quotes cannot
/// close the torn object (it stays open, or the rest reads as one unterminated string), so
/// no record is taken from the torn start, and the glued record's own `{"` is tried next. A
/// line whose record is whole but whose newline is missing reads as two records. What is
/// left (the torn start, binary garbage) is a damaged piece of its line.
struct JournalText {
    /// A clip a damaged piece still names, and the camera named before it.
    struct NamedClip: Equatable {
        var file: String
        var camera: String?
    }

    enum Piece {
        case record(ClipRecord, bytes: ArraySlice<UInt8>)
        /// Bytes that are no record, with the clips they still name: a torn line cut after
        /// its `file` field names its clip (and its camera, which comes before).
        case damaged(bytes: ArraySlice<UInt8>, naming: [NamedClip])

        /// The files the piece names.
        var files: [String] {
            switch self {
            case .record(let record, _): [record.file]
            case .damaged(_, let naming): naming.map(\.file)
            }
        }
    }

    /// Every piece in the order of the bytes, with the number of its line (from 1).
    private(set) var pieces: [(line: Int, piece: Piece)] = []

    /// The longest record tried: a line is a few hundred bytes; a file name at most 4 kB.
    static let longestRecord = 64 << 10

    init(_ bytes: [UInt8]) {
        let decoder = JSONDecoder()
        for (i, line) in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).enumerated() {
            var damagedStart = line.startIndex
            var position = line.startIndex
            func endDamaged(at end: Int) {
                let bytes = line[damagedStart..<end]
                guard bytes.contains(where: { !Self.isWhitespace($0) }) else { return }
                var naming: [NamedClip] = []
                var camera: String?
                for field in Self.stringFields(["camera", "file"], in: bytes) {
                    if field.key == "camera" {
                        camera = field.value
                    } else {
                        naming.append(NamedClip(file: field.value, camera: camera))
                        camera = nil
                    }
                }
                pieces.append((i + 1, .damaged(bytes: bytes, naming: naming)))
            }
            while position < line.endIndex {
                if line[position] == UInt8(ascii: "{"), position + 1 < line.endIndex,
                    line[position + 1] == UInt8(ascii: "\""), let end = Self.objectEnd(in: line, from: position),
                    let record = try? decoder.decode(ClipRecord.self, from: Data(line[position..<end]))
                {
                    endDamaged(at: position)
                    pieces.append((i + 1, .record(record, bytes: line[position..<end])))
                    position = end
                    damagedStart = end
                } else {
                    position += 1
                }
            }
            endDamaged(at: line.endIndex)
        }
    }

    var records: [ClipRecord] {
        pieces.compactMap { if case .record(let record, _) = $0.piece { record } else { nil } }
    }

    /// The numbers of the lines with a damaged piece.
    var damagedLines: [Int] {
        var lines: [Int] = []
        for (line, piece) in pieces {
            if case .damaged = piece, lines.last != line { lines.append(line) }
        }
        return lines
    }

    /// The files the journal's bytes name — in records and in damaged pieces alike: every
    /// whole `"file":"…"` string — found without decoding the records (retention asks every
    /// minute). JSON escapes the quotes inside a string, so the key is found only where it is one.
    static func files(in bytes: [UInt8]) -> Set<String> {
        Set(stringFields(["file"], in: bytes[...]).map(\.value))
    }

    /// The pieces `keep` says, each on a line of its own.
    func text(keeping keep: (Piece) -> Bool) -> [UInt8] {
        text { keep($0) ? .keep : .drop }
    }

    /// What becomes of a piece when the journal is written again.
    enum Rewrite {
        case keep
        case drop
        /// The piece's bytes give way to these (a record's new line, without its newline).
        case replace([UInt8])
    }

    /// The pieces as `rewrite` says, each on a line of its own.
    func text(_ rewrite: (Piece) -> Rewrite) -> [UInt8] {
        var text: [UInt8] = []
        for (_, piece) in pieces {
            switch rewrite(piece) {
            case .drop: continue
            case .replace(let bytes): text += bytes
            case .keep:
                switch piece {
                case .record(_, let bytes), .damaged(let bytes, _): text += bytes
                }
            }
            text.append(UInt8(ascii: "\n"))
        }
        return text
    }

    /// Just after the brace that closes the object starting at `start` (a `{`); nil when it is
    /// not closed within the line (or within `longestRecord` bytes).
    private static func objectEnd(in line: ArraySlice<UInt8>, from start: Int) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        for position in start..<min(line.endIndex, start + longestRecord) {
            let byte = line[position]
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"): depth += 1
            case UInt8(ascii: "}"):
                depth -= 1
                if depth == 0 { return position + 1 }
            default: break
            }
        }
        return nil
    }

    /// Every whole string field `"key":"…"` with one of these keys, in the order of the bytes.
    private static func stringFields(_ keys: [String], in bytes: ArraySlice<UInt8>) -> [(key: String, value: String)] {
        let patterns = keys.map { ($0, Array("\"\($0)\":\"".utf8)) }
        var fields: [(key: String, value: String)] = []
        var position = bytes.startIndex
        while let quote = bytes[position...].firstIndex(of: UInt8(ascii: "\"")) {
            position = quote + 1
            guard let (key, pattern) = patterns.first(where: { bytes[quote...].starts(with: $0.1) }),
                let (value, end) = stringValue(in: bytes, openingQuote: quote + pattern.count - 1)
            else { continue }
            fields.append((key, value))
            position = end
        }
        return fields
    }

    /// The JSON string whose opening quote is at `open`, and just after its closing quote;
    /// nil when it does not end on its line or is not a valid string. A closing quote must be
    /// followed by what follows a value in a record (`,` `}`), the end of a line (or of the
    /// bytes), or the `{` of a record glued there: a string torn with its line, the next line
    /// glued to it, would otherwise end at the glued record's first quote.
    private static func stringValue(in bytes: ArraySlice<UInt8>, openingQuote open: Int) -> (value: String, end: Int)? {
        var escaped = false
        var hasEscapes = false
        for position in (open + 1)..<bytes.endIndex {
            let byte = bytes[position]
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
                hasEscapes = true
            } else if byte == UInt8(ascii: "\n") {
                return nil
            } else if byte == UInt8(ascii: "\"") {
                guard position + 1 == bytes.endIndex || followsValue(bytes[position + 1]) else { return nil }
                let value: String?
                if hasEscapes {
                    let json = [UInt8(ascii: "[")] + bytes[open...position] + [UInt8(ascii: "]")]
                    value = (try? JSONDecoder().decode([String].self, from: Data(json)))?.first
                } else {
                    value = String(validating: bytes[(open + 1)..<position], as: UTF8.self)
                }
                return value.map { ($0, position + 1) }
            }
        }
        return nil
    }

    /// Whether `byte` may follow a string value: see `stringValue`.
    private static func followsValue(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "{")
            || byte == UInt8(ascii: "\n") || isWhitespace(byte)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
    }
}

extension EventsJournal {
    /// How much of the journal's end a start reads (`endsWhole`, `names`): a few hundred lines.
    public static let tailBytes = 1 << 16

    /// Whether the journal whose end is `tail` ends whole: a newline, after a line that is a
    /// record (not a line a power cut tore, which a rebuild mends).
    public static func endsWhole(_ tail: FileTail) -> Bool {
        guard tail.bytes.last == UInt8(ascii: "\n") else { return false }
        let body = tail.bytes.dropLast()
        let start = body.lastIndex(of: UInt8(ascii: "\n")).map { body.index(after: $0) } ?? body.startIndex
        guard start > body.startIndex || tail.isWhole else { return false }  // one line longer than the tail
        return JournalText(Array(body[start...]) + [UInt8(ascii: "\n")]).records.count == 1
    }

    /// Whether the journal whose end is `tail` names `file` there.
    public static func names(_ file: String, in tail: FileTail) -> Bool {
        JournalText.files(in: tail.bytes).contains(file)
    }
}
