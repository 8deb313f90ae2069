import FoundationEssentials
import Media

/// Why retention deleted a clip.
public enum DeletionReason: Equatable, Sendable, CustomStringConvertible {
    case olderThan(days: Int)
    case storeLargerThan(bytes: Int64)
    case freeSpaceBelow(bytes: Int64)
    /// The disk was full while a clip was written: space was needed now.
    case diskFull
    /// Someone deleted it (from the web page, signed in as `by`).
    case asked(by: String)

    public var description: String {
        switch self {
        case .olderThan(let days): "older than \(days) days"
        case .storeLargerThan(let bytes): "clips take more than \(bytes >> 20) MB"
        case .freeSpaceBelow(let bytes): "less than \(bytes >> 20) MB free"
        case .diskFull: "the disk was full"
        case .asked(let by): "deleted by \(by)"
        }
    }
}

public struct Deletion: Equatable, Sendable {
    public var clip: StoredFile
    public var reason: DeletionReason
    /// The clip was waiting to be uploaded (only a full disk deletes such a clip).
    public var notUploaded: Bool
    public init(clip: StoredFile, reason: DeletionReason, notUploaded: Bool = false) {
        self.clip = clip
        self.reason = reason
        self.notUploaded = notUploaded
    }
}

/// The clips retention holds back for their upload (deleted only when the disk is full): those
/// the upload queue says wait, or — while the queue has not been read yet — every clip.
public enum UploadHold: Sendable, Equatable, ExpressibleByArrayLiteral {
    case files(Set<String>)
    case all

    public init(arrayLiteral files: String...) { self = .files(Set(files)) }

    public func holds(_ file: String) -> Bool {
        switch self {
        case .files(let files): files.contains(file)
        case .all: true
        }
    }
}

/// Which clips to delete, oldest first:
///
/// - clips older than `maxAgeDays`, their age counted from when they were recorded as
///   `RetentionClock` says (from the journal, and when the clock was wrong from when it was
///   right; never while the clock reads a date before 2026);
/// - while all clips take more than `maxSize`;
/// - while the file system has less than `minFree` free — but only when deleting clips can
///   bring it there: when other data has taken the space, deleting every clip would lose the
///   recordings and still leave too little, so they are kept and the shortfall is reported;
/// - on a full disk (a write failed for want of space), while less than what is needed is free,
///   whatever `minFree` says: recording goes on at the cost of the oldest clips.
///
/// A clip counts with its picture (`StoredFile.totalSize`), and a clip moved aside as damaged
/// counts as a clip. Never the clip being written (`protected`), never the newest clip saved
/// (a damaged one is never that clip: no player opens it), and a clip held for its upload
/// (`waiting`) only when the disk is full: a write failed for want of room, or less than
/// `minFree` is free (then the room is made before a write fails: a clip that cannot be
/// finished for want of room loses more than the oldest waiting clip).
public struct RetentionPolicy: Equatable, Sendable {
    public var maxAgeDays: Int?
    public var maxSize: Int64?
    public var minFree: Int64

    public init(maxAgeDays: Int?, maxSize: Int64?, minFree: Int64) {
        self.maxAgeDays = maxAgeDays
        self.maxSize = maxSize
        self.minFree = minFree
    }

    /// What retention decides.
    public struct Decision: Equatable, Sendable {
        public var deletions: [Deletion]
        /// Bytes still missing to `minFree` after the deletions, when clips could not make
        /// them up (other data took the space) and were kept; nil when free space is enough.
        public var shortfall: Int64?
        /// The clock after the decision: what it decided about each clip's age, for the next.
        public var clock = RetentionClock()
        /// The clips whose journal lines should say another date they age from (`aged_from`).
        public var agedFrom: [String: Date] = [:]
    }

    /// Deletions for `clips` on a file system with `freeBytes` free. `fullDisk` is the space a
    /// write that failed for want of room needs (nil when no write is waiting). `clock` is
    /// what the agent knows of its wall clock (steps it saw) and decided before.
    public func decide(
        clips: [StoredFile], now: Date, freeBytes: Int64, protected: Set<String>, fullDisk need: Int64? = nil,
        clock: RetentionClock = RetentionClock(), waiting: UploadHold = []
    ) -> Decision {
        // Each clip's age, from when its clock says it was recorded: decided while the clock
        // is plausible, and the dates that differ from the journal's written back.
        var clock = clock
        var agedFrom: [String: Date] = [:]
        var ageFrom: [String: Date] = [:]
        if RetentionClock.isPlausible(now) {
            for clip in clips {
                let from = clock.agedFrom(clip, now: now)
                ageFrom[clip.relativePath] = from
                if let journal = clip.agedFrom ?? clip.recorded, abs(from.timeIntervalSince(journal)) > 1 {
                    agedFrom[clip.relativePath] = from
                }
            }
            clock.keep(only: Set(clips.map(\.relativePath)))
        }
        // Oldest first by that date (the file's time while the clock is not plausible): a clip
        // a wrong clock dated in the future is not the newest for ever.
        let order = { (clip: StoredFile) in (ageFrom[clip.relativePath] ?? clip.modified, clip.relativePath) }
        var candidates = clips.filter { !protected.contains($0.relativePath) }.sorted { order($0) < order($1) }
        // The newest clip saved stays, whatever the rules say: an event just recorded is kept.
        if let newest = candidates.lastIndex(where: { !ClipNaming.isDamaged($0.relativePath) }) {
            candidates.remove(at: newest)
        }
        // Clips not uploaded yet are held back from every rule but the full disk's.
        let held = candidates.filter { waiting.holds($0.relativePath) }
        candidates.removeAll { waiting.holds($0.relativePath) }
        var result: [Deletion] = []
        var total = clips.reduce(0) { $0 + $1.totalSize }
        var free = freeBytes
        func take(_ reason: DeletionReason, at index: Int = 0) {
            let clip = candidates.remove(at: index)
            total -= clip.totalSize
            free += clip.totalSize
            result.append(
                Deletion(clip: clip, reason: reason, notUploaded: waiting.holds(clip.relativePath)))
        }
        if let days = maxAgeDays {
            let cutoff = now.addingTimeInterval(-Double(days) * 86_400)
            while let old = candidates.firstIndex(where: { ageFrom[$0.relativePath].map { $0 < cutoff } ?? false }) {
                take(.olderThan(days: days), at: old)
            }
        }
        if let maxSize {
            while total > maxSize, !candidates.isEmpty { take(.storeLargerThan(bytes: maxSize)) }
        }
        // A full disk — a write failed for want of room, or less than `minFree` is free —
        // takes clips that wait too: recording, and the room the system needs, come first.
        candidates = (candidates + held).sorted { order($0) < order($1) }
        if let need {
            while free < need, !candidates.isEmpty { take(.diskFull) }
        }
        var shortfall: Int64?
        if free < minFree {
            if free + candidates.reduce(0, { $0 + $1.totalSize }) >= minFree {
                while free < minFree, !candidates.isEmpty { take(.freeSpaceBelow(bytes: minFree)) }
            } else {
                shortfall = minFree - free
            }
        }
        return Decision(deletions: result, shortfall: shortfall, clock: clock, agedFrom: agedFrom)
    }

    /// The deletions alone (see `decide`).
    public func deletions(clips: [StoredFile], now: Date, freeBytes: Int64, protected: Set<String>) -> [Deletion] {
        decide(clips: clips, now: now, freeBytes: freeBytes, protected: protected).deletions
    }
}

/// The agent's own clips in the storage directory, deleted oldest first as the retention
/// policy says: the files whose names its pattern makes, and the files the events journal
/// names (clips written under an earlier pattern or camera name, whatever their names) —
/// regular files below the directory (a walk lists no link), never the journal itself or a
/// hidden file the journal names, and nothing else.
public struct ClipStore: Sendable {
    public let storage: any ClipStorage
    public let naming: ClipNaming

    public init(storage: any ClipStorage, naming: ClipNaming) {
        self.storage = storage
        self.naming = naming
    }

    /// Every file below the directory whose relative path the naming pattern makes or the
    /// journal names (also in a damaged line that still names it). When the journal cannot be
    /// read, the pattern's alone (`sweep` says why): those are the agent's in any case.
    public func clips() throws(FileError) -> [StoredFile] {
        let journal = (try? journalIndex()) ?? JournalIndex()
        return try clips(named: journal.files, dates: journal.dates)
    }

    /// The files of `clips()`, given the files the journal names, each with the size of its
    /// picture and what the journal says of when it was recorded (`dates`).
    func clips(named: Set<String>, dates: [String: JournalIndex.Dates] = [:]) throws(FileError) -> [StoredFile] {
        let files = try storage.walk()
        var sizes: [String: Int64] = [:]
        for file in files where file.relativePath.hasSuffix(".jpg") { sizes[file.relativePath] = file.size }
        return files.filter { isOwn($0.relativePath, named: named) }.map { clip in
            var clip = clip
            clip.pictureSize = sizes[ClipNaming.snapshotPath(of: clip.relativePath)] ?? 0
            clip.recorded = dates[clip.relativePath]?.recorded
            clip.agedFrom = dates[clip.relativePath]?.agedFrom
            return clip
        }.sorted { $0.relativePath < $1.relativePath }
    }

    /// What writes a kill interrupted left behind: the new contents of a clip's picture, of
    /// `latest.jpg` or of the journal, written beside it (`replacementSuffix`) and never
    /// renamed over it. Only for names that are the agent's: a clip's picture by the pattern
    /// or the journal, whether the clip is still there or not.
    public func leftovers() throws(FileError) -> [StoredFile] {
        let named = (try? journalFiles()) ?? []
        return try storage.walk().filter { file in
            guard file.relativePath.hasSuffix(replacementSuffix) else { return false }
            let replaced = String(file.relativePath.dropLast(replacementSuffix.count))
            if replaced == EventsJournal.name || replaced == ClipNaming.latestPicture { return true }
            guard replaced.hasSuffix(".jpg") else { return false }
            let clip = String(replaced.dropLast(4)) + ".mov"
            return isOwn(clip, named: named) || isOwn(ClipNaming.damagedPath(of: clip), named: named)
        }.sorted { $0.relativePath < $1.relativePath }
    }

    /// Deletes one clip, after checking that it is one of this agent's (the storage checks
    /// again that it is a regular file, not a link).
    public func delete(_ clip: StoredFile) throws(FileError) {
        let named =
            naming.matches(ClipNaming.undamagedPath(of: clip.relativePath)) ? [] : try journalFiles()
        try delete(clip, named: named)
    }

    /// Deletes one clip `named` says is the agent's (the files the journal or the catalogue
    /// names; the pattern's are in any case), as `delete(_:)`.
    public func delete(_ clip: StoredFile, named: Set<String>) throws(FileError) {
        guard isOwn(clip.relativePath, named: named) else {
            throw FileError(
                path: storage.path(clip.relativePath), operation: "delete",
                reason: "it is not a clip file of this agent; refusing")
        }
        try storage.delete(clip.relativePath)
        // Its picture goes with it (a regular file beside it, or nothing).
        let picture = ClipNaming.snapshotPath(of: clip.relativePath)
        if picture != clip.relativePath, storage.exists(picture) { try? storage.delete(picture) }
    }

    /// Whether `relativePath` is one of the agent's clips: a name of its pattern, or one the
    /// journal names that is no hidden file (the storage's lock and probe files are); or such
    /// a clip moved aside as damaged (the journal may name it by either name); never the
    /// journal or a file beside it, never a name leading out.
    private func isOwn(_ relativePath: String, named: Set<String>) -> Bool {
        let parts = relativePath.split(separator: "/")
        guard !parts.contains(".."), relativePath != EventsJournal.name,
            !relativePath.hasPrefix(EventsJournal.name + ".")
        else { return false }
        let clip = ClipNaming.undamagedPath(of: relativePath)
        return naming.matches(clip)
            || ((named.contains(relativePath) || named.contains(clip)) && !parts.contains { $0.hasPrefix(".") })
    }

    /// The files the events journal names.
    private func journalFiles() throws(FileError) -> Set<String> {
        JournalText.files(in: try storage.read(EventsJournal.name) ?? [])
    }

    /// What the journal says of the clips: the files it names, and when each was recorded.
    struct JournalIndex {
        struct Dates {
            var recorded: Date?
            var agedFrom: Date?
        }
        var files: Set<String> = []
        var dates: [String: Dates] = [:]
    }

    private func journalIndex() throws(FileError) -> JournalIndex {
        let bytes = try storage.read(EventsJournal.name) ?? []
        var index = JournalIndex(files: JournalText.files(in: bytes))
        for record in JournalText(bytes).records {
            index.dates[record.file] = JournalIndex.Dates(
                recorded: ClipRecord.date(fromTimestamp: record.start),
                agedFrom: record.agedFrom.flatMap(ClipRecord.date(fromTimestamp:)))
        }
        return index
    }

    /// What a sweep did.
    public struct Sweep: Sendable {
        public var deleted: [Deletion] = []
        public var errors: [FileError] = []
        /// Free bytes after the sweep, when they could be read.
        public var freeBytes: Int64?
        /// Bytes still missing to `minFree`, clips kept (see `RetentionPolicy.decide`).
        public var shortfall: Int64?
        /// The clock after the sweep, for the next (`RetentionPolicy.Decision.clock`).
        public var clock = RetentionClock()
        /// Journal lines given the date their clip ages from (`aged_from`).
        public var stamped = 0
        /// Clips the catalogue listed that someone else deleted: their entries go too.
        public var gone: [String] = []
        /// The rules would delete more than the sweep's limit allowed: sweep again soon.
        public var more = false
    }

    /// Applies `policy` now: what it deleted, the problems it met, and the free space then.
    /// `fullDisk` is the space a write waiting for room needs. A journal that cannot be read
    /// is one of the problems: the clips of the pattern are still deleted as the policy says
    /// (a full disk must always free space), the others the journal names are not.
    public func sweep(
        _ policy: RetentionPolicy, now: Date = Date(), protected: Set<String>, fullDisk need: Int64? = nil,
        clock: RetentionClock = RetentionClock(), waiting: UploadHold = []
    ) -> Sweep {
        var sweep = Sweep(clock: clock)
        let journal: JournalIndex
        do { journal = try journalIndex() } catch {
            sweep.errors.append(error)
            journal = JournalIndex()
        }
        let named = journal.files
        let clips: [StoredFile]
        let free: Int64
        do {
            clips = try self.clips(named: named, dates: journal.dates)
            free = try storage.freeBytes()
        } catch {
            sweep.errors.append(error)
            return sweep
        }
        let decision = policy.decide(
            clips: clips, now: now, freeBytes: free, protected: protected, fullDisk: need, clock: clock,
            waiting: waiting)
        sweep.clock = decision.clock
        // The dates clips age from, where the clock was wrong, go into their lines first: a
        // restart must not forget them.
        let deleted = Set(decision.deletions.map(\.clip.relativePath))
        let stamps = decision.agedFrom.filter { !deleted.contains($0.key) }
        if !stamps.isEmpty {
            do {
                sweep.stamped = try EventsJournal(storage: storage).stamp(agedFrom: stamps, timeZone: naming.timeZone)
            } catch {
                sweep.errors.append(error)
            }
        }
        for deletion in decision.deletions {
            do {
                try delete(deletion.clip, named: named)
                sweep.deleted.append(deletion)
            } catch {
                sweep.errors.append(error)
            }
        }
        sweep.freeBytes = try? storage.freeBytes()
        sweep.shortfall = decision.shortfall.map { _ in policy.minFree - (sweep.freeBytes ?? free) }.flatMap {
            $0 > 0 ? $0 : nil
        }
        return sweep
    }
}
