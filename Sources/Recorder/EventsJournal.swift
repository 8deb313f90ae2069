import FoundationEssentials
import Media

/// One finished clip, as a line of `<storage>/events.jsonl`.
public struct ClipRecord: Codable, Equatable, Sendable {
    /// The clip's path relative to the storage directory.
    public var file: String
    public var camera: String
    /// Wall-clock time of the first and just after the last frame (ISO 8601 with offset).
    public var start: String
    public var end: String
    /// What started the event: motion, or an outside signal (`vigil trigger`, MQTT). Nil, and
    /// left out of the line, when not known (a clip finished by repair).
    public var cause: TriggerCause?
    /// Wall-clock time of the motion (or the signal) that started the event (nil, and left out
    /// of the line, for a clip finished by repair after the agent was interrupted: that is not
    /// known then).
    public var triggerTime: String?
    /// The trigger in seconds since the source's first frame.
    public var triggerSourceSeconds: Double?
    /// How much of the clip comes before the trigger, in seconds (0 for a continuation part).
    public var preRollSeconds: Double?
    public var durationSeconds: Double
    public var frames: Int
    public var audioFrames: Int
    public var bytes: UInt64
    public var peakScore: Double?
    /// 1 for the first clip of an event, 2 and on for the parts a long event is split into.
    public var part: Int?
    /// True for a clip the agent was interrupted while writing, finished by repair when it
    /// started again.
    public var repaired: Bool?
    /// True for a line written from the clip's file because the journal had none for it
    /// (`EventsJournal.rebuild`): only what the movie says is in it.
    public var rebuilt: Bool?
    /// The event's picture beside the clip (`<clip>.jpg`), relative to the storage directory.
    public var snapshot: String?
    /// True for a clip start-up repair could not read, moved aside as `NAME.mov.damaged`
    /// (`file` is that name): its bytes are kept, but no player opens it.
    public var damaged: Bool?
    /// When `start` was read from a wrong clock (before 2026, in the future, or before a step
    /// of the clock the agent saw): the time retention ages the clip from instead
    /// (`RetentionClock`).
    public var agedFrom: String?

    /// The journal's keys: the names of a saved clip's fields everywhere (the journal, MQTT's
    /// `saved` event, the hooks' `VIGIL_*` facts; docs/reference/events.md lists them).
    enum CodingKeys: String, CodingKey, CaseIterable {
        case file, camera, start, end
        case cause = "trigger"
        case triggerTime = "trigger_time"
        case triggerSourceSeconds = "trigger_source_s"
        case preRollSeconds = "preroll_s"
        case durationSeconds = "duration_s"
        case frames
        case audioFrames = "audio_frames"
        case bytes
        case peakScore = "peak_score"
        case part
        case repaired
        case rebuilt
        case snapshot
        case damaged
        case agedFrom = "aged_from"
    }

    /// Lines written before `trigger` said what started the event held its time there: such a
    /// line reads as a motion event triggered at that time.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        file = try c.decode(String.self, forKey: .file)
        camera = try c.decode(String.self, forKey: .camera)
        start = try c.decode(String.self, forKey: .start)
        end = try c.decode(String.self, forKey: .end)
        triggerTime = try c.decodeIfPresent(String.self, forKey: .triggerTime)
        if let trigger = try c.decodeIfPresent(String.self, forKey: .cause) {
            if let cause = TriggerCause(rawValue: trigger) {
                self.cause = cause
            } else {
                cause = .motion
                if triggerTime == nil { triggerTime = trigger }
            }
        }
        triggerSourceSeconds = try c.decodeIfPresent(Double.self, forKey: .triggerSourceSeconds)
        preRollSeconds = try c.decodeIfPresent(Double.self, forKey: .preRollSeconds)
        durationSeconds = try c.decode(Double.self, forKey: .durationSeconds)
        frames = try c.decode(Int.self, forKey: .frames)
        audioFrames = try c.decode(Int.self, forKey: .audioFrames)
        bytes = try c.decode(UInt64.self, forKey: .bytes)
        peakScore = try c.decodeIfPresent(Double.self, forKey: .peakScore)
        part = try c.decodeIfPresent(Int.self, forKey: .part)
        repaired = try c.decodeIfPresent(Bool.self, forKey: .repaired)
        rebuilt = try c.decodeIfPresent(Bool.self, forKey: .rebuilt)
        snapshot = try c.decodeIfPresent(String.self, forKey: .snapshot)
        damaged = try c.decodeIfPresent(Bool.self, forKey: .damaged)
        agedFrom = try c.decodeIfPresent(String.self, forKey: .agedFrom)
    }

    public init(
        file: String, camera: String, start: String, end: String, cause: TriggerCause?, triggerTime: String?,
        triggerSourceSeconds: Double?, preRollSeconds: Double?, durationSeconds: Double, frames: Int,
        audioFrames: Int, bytes: UInt64, peakScore: Double?, part: Int?, repaired: Bool? = nil, rebuilt: Bool? = nil,
        snapshot: String? = nil, damaged: Bool? = nil, agedFrom: String? = nil
    ) {
        self.file = file
        self.camera = camera
        self.start = start
        self.end = end
        self.cause = cause
        self.triggerTime = triggerTime
        self.triggerSourceSeconds = triggerSourceSeconds
        self.preRollSeconds = preRollSeconds
        self.durationSeconds = durationSeconds
        self.frames = frames
        self.audioFrames = audioFrames
        self.bytes = bytes
        self.peakScore = peakScore
        self.part = part
        self.repaired = repaired
        self.rebuilt = rebuilt
        self.snapshot = snapshot
        self.damaged = damaged
        self.agedFrom = agedFrom
    }

    /// Every key a journal line may have, in the order docs/reference/events.md lists them.
    public static var keys: [String] { CodingKeys.allCases.map(\.stringValue) }

    /// The record as text under the journal's keys, every key, "" for what is not known: the
    /// hooks' facts (`VIGIL_<KEY>`). Numbers as the journal writes them, flags as `true` (or "").
    public var facts: [(key: String, value: String)] {
        CodingKeys.allCases.map { ($0.stringValue, text(of: $0)) }
    }

    private func text(of key: CodingKeys) -> String {
        func flag(_ value: Bool?) -> String { value == true ? "true" : "" }
        switch key {
        case .file: return file
        case .camera: return camera
        case .start: return start
        case .end: return end
        case .cause: return cause?.rawValue ?? ""
        case .triggerTime: return triggerTime ?? ""
        case .triggerSourceSeconds: return triggerSourceSeconds.map { String($0) } ?? ""
        case .preRollSeconds: return preRollSeconds.map { String($0) } ?? ""
        case .durationSeconds: return String(durationSeconds)
        case .frames: return String(frames)
        case .audioFrames: return String(audioFrames)
        case .bytes: return String(bytes)
        case .peakScore: return peakScore.map { String($0) } ?? ""
        case .part: return part.map { String($0) } ?? ""
        case .repaired: return flag(repaired)
        case .rebuilt: return flag(rebuilt)
        case .snapshot: return snapshot ?? ""
        case .damaged: return flag(damaged)
        case .agedFrom: return agedFrom ?? ""
        }
    }

    /// Wall-clock times as the journal writes them: local time with its UTC offset, to the
    /// millisecond (ISO 8601, as `ISO8601DateFormatter` wrote them with fractional seconds).
    public static func timestamp(_ date: Date, timeZone: any LocalTimeZone) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = (milliseconds / 1000).rounded(.down)
        let t = timeZone.localTime(secondsSince1970: seconds)
        var text =
            "\(DecimalText.zeroPadded(t.year, 4))-\(DecimalText.zeroPadded(t.month, 2))-\(DecimalText.zeroPadded(t.day, 2))T"
            + "\(DecimalText.zeroPadded(t.hour, 2)):\(DecimalText.zeroPadded(t.minute, 2)):\(DecimalText.zeroPadded(t.second, 2)).\(DecimalText.zeroPadded(Int(milliseconds - seconds * 1000), 3))"
        if t.utcOffset == 0 {
            text += "Z"
        } else {
            let offset = t.utcOffset.magnitude
            text +=
                (t.utcOffset < 0 ? "-" : "+") + DecimalText.zeroPadded(Int(offset / 3600), 2) + ":"
                + DecimalText.zeroPadded(Int(offset / 60 % 60), 2)
        }
        return text
    }

    /// The date a journal timestamp (`timestamp(_:timeZone:)`'s form: `2026-11-30T11:04:05.000Z`,
    /// or with an offset such as `+01:00`; the fraction optional) stands for; nil for anything else.
    public static func date(fromTimestamp text: String) -> Date? {
        let bytes = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? {
            guard range.upperBound <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[range] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ at: Int, _ ascii: Unicode.Scalar) -> Bool { at < bytes.count && bytes[at] == UInt8(ascii: ascii) }
        guard let year = number(0..<4), byte(4, "-"), let month = number(5..<7), byte(7, "-"),
            let day = number(8..<10), byte(10, "T"), let hour = number(11..<13), byte(13, ":"),
            let minute = number(14..<16), byte(16, ":"), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var position = 19
        var fraction = 0.0
        if byte(position, ".") {
            var scale = 0.1
            position += 1
            while let digit = number(position..<(position + 1)) {
                fraction += Double(digit) * scale
                scale /= 10
                position += 1
            }
        }
        var offset = 0
        if byte(position, "Z") {
            position += 1
        } else if byte(position, "+") || byte(position, "-") {
            guard let hours = number((position + 1)..<(position + 3)), byte(position + 3, ":"),
                let minutes = number((position + 4)..<(position + 6))
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (byte(position, "-") ? -1 : 1)
            position += 6
        } else {
            return nil
        }
        guard position == bytes.count else { return nil }
        // Days from 1970-01-01 of the proleptic Gregorian date (H. Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}

/// `events.jsonl` in the storage directory: one JSON object per finished clip, appended and
/// synced, pruned of the clips retention deleted, and rebuilt from the clips on disk when it
/// is missing, damaged or behind. It is also the registry of the agent's own files
/// (`ClipStore`): a clip it names stays the agent's whatever the file pattern is now.
///
/// Reading it never loses a line to a damaged one: `JournalText` says how records are found.
public struct EventsJournal: Sendable {
    /// The journal's name in the storage directory.
    public static let name = "events.jsonl"
    /// Where something that is not a regular file but has the journal's name is moved (`-1`,
    /// `-2`, … when taken), so that a new journal can be written.
    public static let setAsideName = "events.jsonl.not-a-file"
    public let storage: any ClipStorage

    public init(storage: any ClipStorage) {
        self.storage = storage
    }

    /// The journal's path, for messages.
    public var path: String { storage.path(Self.name) }

    public struct JournalError: Error, CustomStringConvertible, Sendable, Equatable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public func append(_ record: ClipRecord) throws(JournalError) {
        let line = try Self.line(record)
        do { try storage.append(line, to: Self.name) } catch {
            throw JournalError(description: error.description)
        }
    }

    /// A record as the journal writes it: JSON with sorted keys, and a newline.
    public static func line(_ record: ClipRecord) throws(JournalError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do { return [UInt8](try encoder.encode(record)) + [UInt8(ascii: "\n")] } catch {
            throw JournalError(description: "cannot encode the journal line for \(record.file): \(error)")
        }
    }

    /// Drops the lines of clips `exists` says are gone (retention deleted them), so the journal
    /// stays as small as the clip store however long the agent runs: only those. The line of a
    /// clip `exists` says is there is kept, and so is a damaged line unless it still names
    /// clips, all gone (`rebuild` drops the others once every clip has a line). The file is
    /// replaced at once (written beside it, then renamed), so a crash leaves the old journal or
    /// the new one; in the new one, records that were glued together are on lines of their
    /// own. Returns how many lines (or records of a glued line) were dropped.
    @discardableResult
    public func prune(keeping exists: (String) -> Bool) throws(JournalError) -> Int {
        guard let bytes = try read() else { return 0 }
        let text = JournalText(bytes)
        var dropped = 0
        let kept = text.text { piece in
            let files = piece.files
            guard !files.isEmpty, !files.contains(where: exists) else { return true }
            dropped += 1
            return false
        }
        guard dropped > 0 else { return 0 }
        do { try storage.replace(Self.name, with: kept) } catch {
            throw JournalError(description: "\(error.description) — the journal was not shortened")
        }
        return dropped
    }

    /// Writes into the lines of the clips `agedFrom` names the date retention ages each from
    /// (`ClipRecord.agedFrom`, in `timeZone`'s local time); other lines stay as they are. The
    /// file is replaced at once, as `prune` does. Returns how many lines changed.
    @discardableResult
    public func stamp(agedFrom: [String: Date], timeZone: any LocalTimeZone) throws(FileError) -> Int {
        guard !agedFrom.isEmpty, let bytes = try storage.read(Self.name) else { return 0 }
        var changed = 0
        let text = JournalText(bytes).text { piece -> JournalText.Rewrite in
            guard case .record(var record, _) = piece, let date = agedFrom[record.file] else { return .keep }
            record.agedFrom = ClipRecord.timestamp(date, timeZone: timeZone)
            guard let line = try? Self.line(record) else { return .keep }
            changed += 1
            return .replace(Array(line.dropLast()))
        }
        guard changed > 0 else { return 0 }
        try storage.replace(Self.name, with: text)
        return changed
    }

    /// Every record in the journal — also those in a damaged line, or glued to one — with the
    /// numbers of the lines that hold something that is no record.
    public func records() throws(JournalError) -> (records: [ClipRecord], unreadableLines: [Int]) {
        guard let bytes = try read() else { return ([], []) }
        let text = JournalText(bytes)
        return (text.records, text.damagedLines)
    }

    private func read() throws(JournalError) -> [UInt8]? {
        do { return try storage.read(Self.name) } catch {
            throw JournalError(description: error.description)
        }
    }
}
