import FoundationEssentials
import Media
import QuickTime

/// What `EventsJournal.rebuild` did (or, not writing, would do).
public struct JournalRebuild: Equatable, Sendable {
    /// The journal's records that stay, in their order.
    public var kept: [ClipRecord]
    /// Lines for the clips on disk that had none, from their files, marked rebuilt, oldest first.
    public var added: [ClipRecord]
    /// The numbers of the lines of the journal as it was read that held something that is no
    /// record (a torn line, garbage).
    public var damagedLines: [Int]
    /// Damaged pieces of lines dropped: beyond recovery, and their clip has a line again (or,
    /// for one that names no clip, every clip on disk has one).
    public var droppedDamaged: Int
    /// Rebuilt lines dropped because their clip has the line the agent wrote too.
    public var droppedDuplicates: Int
    /// Clips moved aside as damaged whose lines now name them (marked damaged).
    public var followed: [String] = []
    /// Clips on disk left without a line, and why: a movie still being written or
    /// interrupted (repair finishes it), or a file that cannot be read.
    public var unreadable: [UnreadableClip]
    /// True when the journal was rewritten.
    public var written: Bool
    /// Something other than a regular file had the journal's name (a named pipe, a
    /// directory): what was wrong, and where it was moved (nil when it was not: a rebuild that
    /// does not write). The journal is then read as empty and a new one written.
    public var setAside: SetAside?
    /// The clips found on disk, each with the bytes of its picture beside it.
    public var onDisk: [String: Int64] = [:]

    public struct SetAside: Equatable, Sendable {
        public var problem: String
        /// Its new name in the storage directory.
        public var movedTo: String?
    }

    /// The records of the journal after the rebuild.
    public var records: [ClipRecord] { kept + added }

    /// The catalogue's entries for the clips on disk, as the rebuilt journal says them.
    public var entries: [CatalogueEntry] {
        records.compactMap { record in onDisk[record.file].map { CatalogueEntry(record: record, pictureBytes: $0) } }
    }

    /// The clips a kill left unfinished (repair finishes them when the agent starts).
    public var interrupted: [String] { unreadable.filter(\.isInterrupted).map(\.file) }

    public struct UnreadableClip: Equatable, Sendable {
        public var file: String
        public var problem: String
        /// Not a complete movie: still being recorded, or interrupted (not damaged).
        public var isInterrupted = false
    }
}

extension EventsJournal {
    /// Makes the journal whole again from the clips on disk (`store`: the agent's pattern and
    /// the files the journal names), when it is missing, damaged or behind — a line torn by a
    /// full disk, a kill between a clip's close and its line:
    /// - every clip on disk without a line gets one, read from its movie (creation time,
    ///   duration, frames, audio frames, bytes) and marked rebuilt; what only the recording
    ///   knew (trigger, peak score, pre-roll, part) is left out, and the camera is the one its
    ///   damaged line still names, or `store.naming`'s; a clip moved aside as damaged
    ///   (`NAME.mov.damaged`) is not read: its line says when its file was last written, its
    ///   size, and that it is damaged;
    /// - the line of a clip moved aside as damaged follows it: it names the new name, marked
    ///   damaged, and keeps what the agent knew;
    /// - a damaged piece of a line is dropped once its clip has a line again (one naming no
    ///   clip, once every clip on disk has one), and a rebuilt line once its clip has the
    ///   line the agent wrote too;
    /// - every other line stays as it was, in its order (records glued together each on a
    ///   line of its own); the line of a clip on disk is never dropped.
    ///
    /// Movies are only read. With `write`, the journal is replaced at once when anything
    /// changed (written beside it, then renamed), after checking that nobody appended to it
    /// meanwhile (the agent, when `vigil clips --rescan` runs beside it).
    ///
    /// Something other than a regular file with the journal's name (a named pipe, which would
    /// block whoever opens it, a directory) is never opened: with `write` it is moved aside
    /// (`EventsJournal.setAsideName`, renamed in place, nothing deleted) and a new journal
    /// written; without, the journal is read as empty. `setAside` says which.
    @discardableResult
    public func rebuild(from store: ClipStore, write: Bool = true) throws(JournalError) -> JournalRebuild {
        var contents: [String: Result<MovieContents?, MovieRepairError>] = [:]
        var setAside: JournalRebuild.SetAside?
        for _ in 0..<3 {
            var before: [UInt8]
            do { before = try storage.read(Self.name) ?? [] } catch {
                guard error.isNotRegularFile else { throw JournalError(description: error.description) }
                setAside = JournalRebuild.SetAside(problem: error.description, movedTo: write ? try moveAside() : nil)
                before = []
            }
            var (rebuild, after) = try plan(from: before, store: store, contents: &contents)
            rebuild.setAside = setAside
            guard write, after != before else { return rebuild }
            do {
                guard try storage.read(Self.name) ?? [] == before else { continue }
                try storage.replace(Self.name, with: after)
            } catch {
                throw JournalError(description: "\(error.description) — the journal was not rebuilt")
            }
            rebuild.written = true
            return rebuild
        }
        throw JournalError(
            description: "\(path) kept changing while it was rebuilt (is the agent writing it?); try again")
    }

    /// Moves what has the journal's name aside, to the first free `setAsideName`; its new name.
    private func moveAside() throws(JournalError) -> String {
        do { return try storage.moveAside(Self.name, to: Self.setAsideName) } catch {
            throw JournalError(description: "\(error.description) — the journal cannot be written")
        }
    }

    /// What the rebuild of the journal's `bytes` is, and its bytes after it. `contents` keeps the
    /// movies read, for another try.
    private func plan(
        from bytes: [UInt8], store: ClipStore, contents: inout [String: Result<MovieContents?, MovieRepairError>]
    ) throws(JournalError) -> (JournalRebuild, [UInt8]) {
        let text = JournalText(bytes)
        let named = JournalText.files(in: bytes)
        let clips: [StoredFile]
        do { clips = try store.clips(named: named) } catch {
            // No storage directory yet: no clips.
            guard error.isMissing else { throw JournalError(description: error.description) }
            clips = []
        }
        let storage = self.storage
        let records = text.records
        let lined = Set(records.map(\.file))
        var damagedCameras: [String: String] = [:]
        for (_, piece) in text.pieces {
            guard case .damaged(_, let naming) = piece else { continue }
            for clip in naming { damagedCameras[clip.file] = clip.camera ?? damagedCameras[clip.file] }
        }

        // Clips moved aside as damaged whose lines still name them as they were.
        var follow: [String: String] = [:]
        for clip in clips where ClipNaming.isDamaged(clip.relativePath) && !lined.contains(clip.relativePath) {
            let original = ClipNaming.undamagedPath(of: clip.relativePath)
            if lined.contains(original) && !storage.exists(original) { follow[original] = clip.relativePath }
        }
        let following = Set(follow.values)

        var added: [(created: Date, record: ClipRecord)] = []
        var unreadable: [JournalRebuild.UnreadableClip] = []
        for clip in clips where !lined.contains(clip.relativePath) && !following.contains(clip.relativePath) {
            let relative = clip.relativePath
            if ClipNaming.isDamaged(relative) {
                // No player opens it and repair could not: only what its file says.
                let timeZone = store.naming.timeZone
                let camera = damagedCameras[relative] ?? damagedCameras[ClipNaming.undamagedPath(of: relative)]
                added.append(
                    (
                        clip.modified,
                        ClipRecord(
                            file: relative, camera: camera ?? store.naming.camera,
                            start: ClipRecord.timestamp(clip.modified, timeZone: timeZone),
                            end: ClipRecord.timestamp(clip.modified, timeZone: timeZone), cause: nil,
                            triggerTime: nil, triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 0,
                            frames: 0, audioFrames: 0, bytes: UInt64(clip.size), peakScore: nil, part: nil,
                            rebuilt: true, damaged: true)
                    ))
                continue
            }
            let read =
                contents[relative]
                ?? Result { () throws(MovieRepairError) in
                    try MovieRepair.contents(
                        path: storage.path(relative),
                        opening: { _ throws(FileError) in try storage.readMovie(relative) })
                }
            contents[relative] = read
            switch read {
            case .success(let movie?):
                added.append(
                    (
                        movie.created,
                        ClipRecord(
                            rebuilt: relative, from: movie, camera: damagedCameras[relative] ?? store.naming.camera,
                            timeZone: store.naming.timeZone)
                    ))
            case .success(nil):
                unreadable.append(
                    .init(
                        file: relative,
                        problem: "not a complete movie: still being recorded, or interrupted (repair finishes it)",
                        isInterrupted: true))
            case .failure(let error):
                unreadable.append(.init(file: relative, problem: error.problem))
            }
        }
        added.sort { ($0.created, $0.record.file) < ($1.created, $1.record.file) }

        let linedAfter = lined.union(added.map(\.record.file)).union(following)
        let written = Set(records.filter { $0.rebuilt != true }.map(\.file))
        var kept: [ClipRecord] = []
        var droppedDamaged = 0
        var droppedDuplicates = 0
        var after = text.text { piece -> JournalText.Rewrite in
            switch piece {
            case .record(var record, _):
                if record.rebuilt == true, written.contains(record.file) {
                    droppedDuplicates += 1
                    return .drop
                }
                if let damaged = follow[record.file], let line = try? Self.line(record.movedAside(to: damaged)) {
                    record = record.movedAside(to: damaged)
                    kept.append(record)
                    return .replace(line.dropLast())
                }
                kept.append(record)
                return .keep
            case .damaged(_, let naming):
                // Its clips have lines (or are gone); one naming none may be any clip's.
                let beyondRecovery =
                    naming.isEmpty
                    ? unreadable.isEmpty
                    : naming.allSatisfy { linedAfter.contains($0.file) || !storage.exists($0.file) }
                if beyondRecovery { droppedDamaged += 1 }
                return beyondRecovery ? .drop : .keep
            }
        }
        for (_, record) in added { after += try Self.line(record) }
        return (
            JournalRebuild(
                kept: kept, added: added.map(\.record), damagedLines: text.damagedLines, droppedDamaged: droppedDamaged,
                droppedDuplicates: droppedDuplicates, followed: follow.values.sorted(), unreadable: unreadable,
                written: false,
                onDisk: Dictionary(
                    clips.map { ($0.relativePath, $0.pictureSize) }, uniquingKeysWith: { first, _ in first })
            ),
            after
        )
    }
}

extension ClipRecord {
    /// The line of a clip on disk that had none, from what its movie says (marked rebuilt: what
    /// only the recording knew — trigger, peak score, pre-roll, part — is left out).
    public init(rebuilt file: String, from movie: MovieContents, camera: String, timeZone: any LocalTimeZone) {
        let end = movie.created.addingTimeInterval(movie.videoDuration.seconds)
        self.init(
            file: file, camera: camera, start: ClipRecord.timestamp(movie.created, timeZone: timeZone),
            end: ClipRecord.timestamp(end, timeZone: timeZone), cause: nil, triggerTime: nil,
            triggerSourceSeconds: nil, preRollSeconds: nil,
            durationSeconds: movie.videoDuration.seconds.rounded(toPlaces: 3),
            frames: movie.videoFrames, audioFrames: movie.audioFrames, bytes: movie.bytes,
            peakScore: nil, part: nil, rebuilt: true)
    }

    /// This line for its clip moved aside as damaged, as `file`.
    func movedAside(to file: String) -> ClipRecord {
        var record = self
        record.file = file
        record.damaged = true
        return record
    }
}
