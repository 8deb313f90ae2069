import Recorder

/// The clip catalogue (Recorder's `ClipCatalogue`, SQLite beside the clips): opened when the
/// storage directory comes up, made to list what the rebuilt journal lists, and kept current
/// as clips are saved and deleted — each entry written before anyone is told of the clip.
extension ClipWriter {
    /// Opens the storage directory's catalogue and makes it list the clips `rebuild` found (the
    /// journal's records of the clips on disk): a catalogue that cannot be read is moved aside,
    /// with its log, and made again. On failure the agent records without it, and says so.
    func bringUpCatalogue(after rebuild: JournalRebuild?) {
        let storage = settings.storage
        catalogue = nil
        let opened: any ClipCatalogue
        do { opened = try openOrRemakeCatalogue(in: storage) } catch {
            log.error(
                "clip catalogue not opened: the web page and the API list no clips until the agent starts again",
                [("path", .string(storage.path(CatalogueFile.name))), ("error", .string(error.description))])
            return
        }
        if let rebuild {
            let entries = rebuild.records.compactMap { record -> CatalogueEntry? in
                guard let pictureBytes = rebuild.onDisk[record.file] else { return nil }
                return CatalogueEntry(record: record, pictureBytes: pictureBytes)
            }
            do {
                let changed = try opened.synchronize(with: entries)
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
            }
        }
        catalogue = opened
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
            do {
                try catalogue?.add(
                    CatalogueEntry(record: saved.record, pictureBytes: Int64(saved.snapshotJPEG?.count ?? 0)))
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
    }
}
