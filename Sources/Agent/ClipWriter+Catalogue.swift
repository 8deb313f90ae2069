import Media
import QuickTime
import Recorder

/// The clip catalogue (Recorder's `ClipCatalogue`, SQLite beside the clips): opened when the
/// storage directory comes up, made to list what the rebuilt journal lists, and kept current
/// as clips are saved and deleted — each entry written before anyone is told of the clip.
extension ClipWriter {
    /// Opens the storage directory's catalogue (`catalogue`); one that cannot be read is moved
    /// aside, with its log, and made again. On failure the agent records without it, and says so.
    func openCatalogue() {
        let storage = settings.storage
        catalogue = nil
        do { catalogue = try openOrRemakeCatalogue(in: storage) } catch {
            log.error(
                "clip catalogue not opened: the web page and the API list no clips until the agent starts again",
                [("path", .string(storage.path(CatalogueFile.name))), ("error", .string(error.description))])
        }
    }

    /// Makes the catalogue list the clips `rebuild` found (the journal's records of the clips on
    /// disk), and says it does (`isSynchronized`); the clips it said were being recorded are no
    /// longer, but for those still not whole (being written elsewhere, or repair failed).
    func synchronizeCatalogue(with rebuild: JournalRebuild?) {
        let storage = settings.storage
        guard let catalogue, let rebuild else { return }
        let entries = rebuild.entries
        do {
            let changed = try catalogue.synchronize(with: entries)
            if changed.written + changed.removed > 0 {
                log.info(
                    "clip catalogue brought up to date",
                    [
                        ("clips", .int(entries.count)), ("written", .int(changed.written)),
                        ("removed", .int(changed.removed)),
                    ])
            }
        } catch {
            log.error(
                "clip catalogue not brought up to date",
                [("path", .string(storage.path(CatalogueFile.name))), ("error", .string(error.description))])
            return
        }
        let unfinished = Set(rebuild.unreadable.map(\.file))
        for file in (try? catalogue.recording()) ?? [] where !unfinished.contains(file) { endRecording(file) }
    }

    /// Removes what interrupted writes left where they can be: beside the journal and
    /// `latest.jpg`, and the pictures of the clips being recorded and of the newest clips.
    func removeLeftovers(_ catalogue: any ClipCatalogue) {
        let storage = settings.storage
        var clips = (try? catalogue.recording()) ?? []
        clips += ((try? catalogue.page(ClipQuery(limit: 20)))?.entries ?? []).map(\.file)
        let names = [EventsJournal.name, ClipNaming.latestPicture] + clips.map(ClipNaming.snapshotPath(of:))
        for name in Set(names.map { $0 + replacementSuffix }).sorted() where storage.exists(name) {
            let size = (try? storage.readTail(name, maxBytes: 0))?.size ?? 0
            removeLeftover(StoredFile(relativePath: name, size: size, modified: wallNow()))
        }
    }

    /// Repairs the clips the catalogue says were being recorded (a kill, a power cut): each
    /// becomes a normal movie with its entry and journal line. False when what it found needs
    /// the journal rebuilt from the clips (a clip finished but never entered).
    func repairRecording(_ catalogue: any ClipCatalogue) -> Bool {
        let storage = settings.storage
        let files: [String]
        do { files = try catalogue.recording() } catch {
            log.warning(
                "clip catalogue not read; every clip is looked at",
                [("path", .string(storage.path(CatalogueFile.name))), ("error", .string(error.description))])
            return false
        }
        var whole = true
        for file in files {
            guard storage.exists(file) else {
                endRecording(file)  // never made, or removed with no video in it
                continue
            }
            switch repairClip(file, size: (try? storage.readTail(file, maxBytes: 0))?.size) {
            case .complete:
                // Finished before the kill (or by `vigil repair` since): its entry and line may
                // be there, or not. Without an entry, it is entered from what its movie says,
                // and told saved like a clip repaired.
                guard let entry = try? catalogue.entry(file) else {
                    if !enterFinished(file) { whole = false }
                    continue
                }
                if !journalNames(file) {
                    do { try EventsJournal(storage: storage).append(entry.record) } catch {
                        whole = false
                        continue
                    }
                }
                endRecording(file)
            case .repaired, .removed, .movedAside:
                endRecording(file)
            case .left:
                break
            }
        }
        return whole
    }

    /// Enters a clip a kill left said being recorded that is a complete movie with no entry:
    /// its record from its movie (marked rebuilt), told saved; false when its movie cannot be
    /// read (the journal's rebuild then looks at it).
    private func enterFinished(_ file: String) -> Bool {
        let storage = settings.storage
        guard
            let movie = try? MovieRepair.contents(
                path: storage.path(file), opening: { _ throws(FileError) in try storage.readMovie(file) })
        else { return false }
        log.info("entered a clip an interrupted run had finished", [("file", .string(file))])
        let record = ClipRecord(rebuilt: file, from: movie, camera: settings.camera, timeZone: settings.naming.timeZone)
        tell(
            .clipSaved(ClipSaved(record: record, path: storage.path(file), origin: .repairedAtStart, storage: storage)))
        return true
    }

    /// Whether the journal's end is whole (a line a power cut tore is mended by a rebuild) and
    /// is there when the catalogue lists clips.
    func journalIsWhole(_ catalogue: any ClipCatalogue) -> Bool {
        guard let tail = try? settings.storage.readTail(EventsJournal.name, maxBytes: EventsJournal.tailBytes),
            tail.size > 0
        else {
            // None: whole only if there is nothing to list.
            return ((try? catalogue.totals())?.clips ?? 0) == 0
        }
        return EventsJournal.endsWhole(tail)
    }

    /// Whether the journal's last lines name `file`.
    private func journalNames(_ file: String) -> Bool {
        guard let tail = try? settings.storage.readTail(EventsJournal.name, maxBytes: EventsJournal.tailBytes)
        else { return false }
        return EventsJournal.names(file, in: tail)
    }

    /// Enters the clips a full disk kept out of the catalogue, now that there may be room.
    func enterUnentered() {
        guard let catalogue, !unentered.isEmpty else { return }
        do { try catalogue.add(unentered) } catch { return }
        log.info("clips entered in the catalogue now that there is room", [("clips", .int(unentered.count))])
        for entry in unentered { endRecording(entry.file) }
        unentered = []
    }

    /// The catalogue of `storage`; one that cannot be read moved aside (with its log) and made
    /// again, said.
    private func openOrRemakeCatalogue(in storage: any ClipStorage) throws(CatalogueError) -> any ClipCatalogue {
        let problem: CatalogueError
        do { return try storage.openCatalogue() } catch {
            guard error.isUnreadable else { throw error }
            problem = error
        }
        var moved: [String] = []
        for name in CatalogueFile.names where storage.exists(name) {
            do { moved.append(try storage.moveAside(name, to: name + ".damaged")) } catch {
                throw CatalogueError(description: "\(error.description) — the catalogue that cannot be read stays")
            }
        }
        log.error(
            "the clip catalogue cannot be read; moved aside, a new one is made from the clips",
            [
                ("path", .string(storage.path(CatalogueFile.name))),
                ("moved_to", .string(moved.map(storage.path).joined(separator: " "))),
                ("error", .string(problem.description)),
            ])
        return try storage.openCatalogue()
    }

    /// Tells the sinks of a clip saved or deleted, after writing it into the catalogue (a clip
    /// said saved is in it); other events go straight to the sinks.
    func tell(_ event: AgentEvent) {
        switch event {
        case .clipSaved(let saved) where saved.storage === settings.storage:
            let entry = CatalogueEntry(record: saved.record, pictureBytes: Int64(saved.snapshotJPEG?.count ?? 0))
            do {
                do { try catalogue?.add(entry) } catch  where error.isOutOfSpace {
                    // The disk filled: retention makes room (never this clip), and it goes in.
                    sweep(fullDisk: ClipWriter.fullDiskHeadroom, protecting: saved.record.file)
                    try catalogue?.add(entry)
                }
            } catch  where error.isOutOfSpace {
                // No room even so (the clips left are the newest): it goes in once a sweep
                // has made some, or at the next start (it is still said being recorded).
                if unentered.count < ClipWriter.unenteredLimit { unentered.append(entry) }
                log.warning(
                    "clip not entered in the catalogue yet: the disk is full; it is entered once there is room, or at the next start",
                    [("file", .string(saved.record.file)), ("error", .string(error.description))])
                events.handle(event)
                return
            } catch {
                log.error(
                    "clip not entered in the catalogue",
                    [("file", .string(saved.record.file)), ("error", .string(error.description))])
            }
        case .clipsDeleted(let deleted) where deleted.storage === settings.storage:
            do { try catalogue?.remove(deleted.deletions.map(\.clip.relativePath)) } catch {
                log.error(
                    "deleted clips not removed from the catalogue",
                    [
                        ("files", .string(deleted.deletions.map(\.clip.relativePath).joined(separator: " "))),
                        ("error", .string(error.description)),
                    ])
            }
        default:
            break
        }
        events.handle(event)
        // Entered and told: no longer being recorded (a kill before this repairs it again, and
        // finds it whole).
        if case .clipSaved(let saved) = event, saved.storage === settings.storage { endRecording(saved.record.file) }
    }
}

extension ClipWriter {
    /// Makes a clip's movie file, said being recorded in the catalogue first: a start after a
    /// kill repairs the clips the catalogue says were being recorded, and only those. A
    /// catalogue that cannot say it does not stop the clip (said: `vigil clips --rescan`
    /// repairs what a kill then leaves).
    func createMovie(_ relative: String) throws(FileError) -> any MovieFile {
        let storage = settings.storage
        if let catalogue {
            do { try catalogue.beginRecording(relative) } catch {
                log.warning(
                    "clip not said being recorded in the catalogue; if the agent is killed while it records, run vigil clips --rescan",
                    [("file", .string(relative)), ("error", .string(error.description))])
            }
        }
        do { return try storage.createMovie(relative) } catch {
            endRecording(relative)
            throw error
        }
    }

    /// The clip in `relative` is no longer being recorded (saved, or gone).
    func endRecording(_ relative: String) {
        do { try catalogue?.endRecording(relative) } catch {
            log.warning(
                "clip not said finished in the catalogue; the next start looks at it again",
                [("file", .string(relative)), ("error", .string(error.description))])
        }
    }
}

extension ClipWriter {
    /// A clip moved aside as damaged gets its entry and journal line at once, as the journal's
    /// rebuild would write them (what its file says: its size, now, damaged): retention counts
    /// and deletes it, the page lists it.
    func enterDamaged(_ file: String, bytes: Int64, in storage: any ClipStorage) {
        guard storage === settings.storage else { return }
        let now = ClipRecord.timestamp(wallNow())
        let record = ClipRecord(
            file: file, camera: settings.camera, start: now, end: now, cause: nil, triggerTime: nil,
            triggerSourceSeconds: nil, preRollSeconds: nil, durationSeconds: 0, frames: 0, audioFrames: 0,
            bytes: UInt64(max(0, bytes)), peakScore: nil, part: nil, rebuilt: true, damaged: true)
        do { try catalogue?.add(CatalogueEntry(record: record)) } catch {
            log.error(
                "clip not entered in the catalogue", [("file", .string(file)), ("error", .string(error.description))])
        }
        do { try EventsJournal(storage: storage).append(record) } catch {
            log.error("events journal not written", [("error", .string(error.description))])
        }
    }
}
