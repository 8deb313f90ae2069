import FoundationEssentials
import Media

/// Retention from the clip catalogue: the same rules as `RetentionPolicy.decide`, asked of the
/// catalogue's index instead of a walk of the directory and a read of the journal, so a sweep
/// costs what it deletes (and the clips it must skip), not what is kept:
///
/// - the totals are the catalogue's (`totals`), the order the age index's (`oldest`);
/// - a clip dated by a wrong clock is found by its date (`misdated`) and given the date it ages
///   from (now) in its entry and its journal line, once;
/// - a step of the wall clock moves every clip's age in one statement (`shiftAges`), said by
///   the writer when it sees the step.
///
/// Never the clips in `protected` (the one being recorded), never the newest clip saved (by its
/// start; a damaged one is never that clip), and a clip held for its upload only when the disk
/// is full (`RetentionPolicy`). A clip the catalogue lists whose file someone else deleted is
/// taken out of it like a deleted clip.
extension ClipStore {
    /// How many entries are read from the catalogue at a time.
    static let batch = 200
    /// At most this many misdated clips are given a date per sweep (the next sweep goes on).
    static let misdatedPerSweep = 1000

    /// Applies `policy` now from `catalogue`: what it deleted, the problems it met, the free
    /// space then (see `sweep(_:now:protected:fullDisk:clock:waiting:)`). At most `limit`
    /// clips are deleted unless the disk is full (`fullDisk`) or below `minFree`: `more` then
    /// says whether the rules would delete more, for another sweep soon.
    public func sweep(
        _ policy: RetentionPolicy, catalogue: any ClipCatalogue, now: Date = Date(), protected: Set<String>,
        fullDisk need: Int64? = nil, waiting: UploadHold = [], limit: Int = .max
    ) -> Sweep {
        var sweep = Sweep()
        let plausible = RetentionClock.isPlausible(now)
        let nowMs = Int64((now.timeIntervalSince1970 * 1000).rounded())
        if plausible {
            do { sweep.stamped = try dateMisdated(catalogue: catalogue, now: now, nowMs: nowMs) } catch {
                sweep.errors.append(
                    FileError(path: storage.path(CatalogueFile.name), operation: "date", reason: error.description))
            }
        }
        let totals: CatalogueTotals
        let newest: String?
        let free: Int64
        do {
            totals = try catalogue.totals()
            newest = try catalogue.page(ClipQuery(damaged: false, limit: 1)).entries.first?.file
        } catch {
            sweep.errors.append(
                FileError(path: storage.path(CatalogueFile.name), operation: "read", reason: error.description))
            return sweep
        }
        do { free = try storage.freeBytes() } catch {
            sweep.errors.append(error)
            return sweep
        }
        var kept = protected
        if let newest { kept.insert(newest) }

        var taken: [Deletion] = []
        var takenFiles = Set<String>()
        var total = totals.bytes
        var room = free
        func take(_ aged: AgedEntry, _ reason: DeletionReason) {
            let clip = Self.storedFile(aged.entry)
            taken.append(Deletion(clip: clip, reason: reason, notUploaded: waiting.holds(clip.relativePath)))
            takenFiles.insert(clip.relativePath)
            total -= clip.totalSize
            room += clip.totalSize
        }
        /// Walks the clips oldest first, skipping those kept and taken (and, unless `held`,
        /// those waiting for their upload), while `body` says go on.
        func walk(held: Bool, _ body: (AgedEntry) -> Bool) throws(CatalogueError) {
            var after: AgeCursor?
            while true {
                let batch = try catalogue.oldest(after: after, limit: Self.batch)
                for aged in batch {
                    let file = aged.entry.file
                    if kept.contains(file) || takenFiles.contains(file) { continue }
                    if !held && waiting.holds(file) { continue }
                    guard body(aged) else { return }
                }
                guard batch.count == Self.batch, let last = batch.last else { return }
                after = last.cursor
            }
        }
        do {
            // Age, then size: at most `limit`, clips waiting for their upload held back.
            if let days = policy.maxAgeDays, plausible {
                let cutoff = nowMs - Int64(days) * 86_400_000
                try walk(held: false) { aged in
                    guard aged.age < cutoff else { return false }
                    guard taken.count < limit else {
                        sweep.more = true
                        return false
                    }
                    take(aged, .olderThan(days: days))
                    return true
                }
            }
            if let maxSize = policy.maxSize, total > maxSize {
                try walk(held: false) { aged in
                    guard total > maxSize else { return false }
                    guard taken.count < limit else {
                        sweep.more = true
                        return false
                    }
                    take(aged, .storeLargerThan(bytes: maxSize))
                    return true
                }
            }
            // A full disk takes clips that wait too, whatever the limit.
            if let need, room < need {
                try walk(held: true) { aged in
                    take(aged, .diskFull)
                    return room < need
                }
            }
            if room < policy.minFree {
                // Only when the clips can make up the room: otherwise they are kept and the
                // shortfall said (other data took the space).
                var keptBytes: Int64 = 0
                for file in kept {
                    if let entry = try catalogue.entry(file) { keptBytes += entry.totalBytes }
                }
                if room + max(0, total - keptBytes) >= policy.minFree {
                    try walk(held: true) { aged in
                        take(aged, .freeSpaceBelow(bytes: policy.minFree))
                        return room < policy.minFree
                    }
                } else {
                    sweep.shortfall = policy.minFree - room
                }
            }
        } catch {
            sweep.errors.append(
                FileError(path: storage.path(CatalogueFile.name), operation: "read", reason: error.description))
        }

        for deletion in taken {
            do {
                try delete(deletion.clip, named: [deletion.clip.relativePath])
                sweep.deleted.append(deletion)
            } catch  where error.isMissing {
                // Someone deleted it: its entry goes all the same.
                sweep.gone.append(deletion.clip.relativePath)
            } catch {
                sweep.errors.append(error)
            }
        }
        sweep.freeBytes = try? storage.freeBytes()
        if sweep.shortfall != nil {
            let short = policy.minFree - (sweep.freeBytes ?? free)
            sweep.shortfall = short > 0 ? short : nil
        }
        return sweep
    }

    /// Gives the clips a wrong clock dated (before 2026, or in the future) the date they age
    /// from — now — in their entries and journal lines; how many.
    private func dateMisdated(catalogue: any ClipCatalogue, now: Date, nowMs: Int64) throws(CatalogueError) -> Int {
        let earliest = Int64(RetentionClock.earliestPlausibleDate.timeIntervalSince1970 * 1000)
        let latest = nowMs + Int64(RetentionClock.futureTolerance * 1000)
        let misdated = try catalogue.misdated(before: earliest, after: latest, limit: Self.misdatedPerSweep)
        guard !misdated.isEmpty else { return 0 }
        var dates: [String: Date] = [:]
        let entries = misdated.map { aged in
            var entry = aged.entry
            // A clip whose start is no date at all (a line that lost it) ages from its file's
            // time, when that is plausible; any other from now.
            var date = now
            if entry.started == nil, let file = try? storage.readTail(entry.file, maxBytes: 0),
                RetentionClock.isPlausible(file.modified), file.modified <= now
            {
                date = file.modified
            }
            entry.record.agedFrom = ClipRecord.timestamp(date, timeZone: naming.timeZone)
            dates[entry.file] = date
            return entry
        }
        // The journal first: a rebuild of the catalogue from it keeps the dates.
        _ = try? EventsJournal(storage: storage).stamp(agedFrom: dates, timeZone: naming.timeZone)
        try catalogue.add(entries)
        return entries.count
    }

    /// A catalogue entry as the file retention deletes.
    public static func storedFile(_ entry: CatalogueEntry) -> StoredFile {
        StoredFile(
            relativePath: entry.file, size: Int64(clamping: entry.record.bytes),
            modified: entry.started ?? Date(timeIntervalSince1970: 0), pictureSize: entry.pictureBytes,
            recorded: entry.started, agedFrom: entry.record.agedFrom.flatMap(ClipRecord.date(fromTimestamp:)))
    }
}
