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

    enum CodingKeys: String, CodingKey {
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
    }

    public init(
        file: String, camera: String, start: String, end: String, cause: TriggerCause?, triggerTime: String?,
        triggerSourceSeconds: Double?, preRollSeconds: Double?, durationSeconds: Double, frames: Int,
        audioFrames: Int, bytes: UInt64, peakScore: Double?, part: Int?, repaired: Bool? = nil, rebuilt: Bool? = nil,
        snapshot: String? = nil, damaged: Bool? = nil
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
    }

    /// Wall-clock times as the journal writes them: local time with its UTC offset, to the
    /// millisecond (ISO 8601, as `ISO8601DateFormatter` wrote them with fractional seconds).
    public static func timestamp(_ date: Date, timeZone: any LocalTimeZone) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded()
        let seconds = (milliseconds / 1000).rounded(.down)
        let t = timeZone.localTime(Date(timeIntervalSince1970: seconds))
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
    static func line(_ record: ClipRecord) throws(JournalError) -> [UInt8] {
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
