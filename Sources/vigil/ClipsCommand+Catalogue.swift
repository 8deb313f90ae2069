import Configuration
import FoundationEssentials
import Media
import Recorder
import Storage

/// `vigil clips` from the clip catalogue: read only (an agent may hold the directory and write
/// the catalogue meanwhile: SQLite's WAL lets a reader read beside it), a page at a time,
/// newest first, so that its memory does not grow with the clips and its first line is out
/// before the rest is read.
extension ClipsCommand {
    /// The storage directory's catalogue, when it has one that opens.
    enum CatalogueOpening {
        case opened(SQLiteCatalogue)
        /// No catalogue: no agent of this version has started on the directory.
        case none
        case unreadable(String)
    }

    static func openCatalogue(_ storage: DiskStorage) -> CatalogueOpening {
        guard storage.exists(CatalogueFile.name) else { return .none }
        do { return .opened(try SQLiteCatalogue(path: storage.path(CatalogueFile.name), readOnly: true)) } catch {
            return .unreadable(error.description)
        }
    }

    /// Lists `catalogue`'s clips a page at a time; the upload column (with uploads on, or done
    /// before: their queue is there) from the states the upload sink keeps in it.
    static func list(
        _ catalogue: SQLiteCatalogue, storage: DiskStorage, settings: Settings, json: Bool
    ) -> ExitCode {
        let uploading = settings.upload.enabled || storage.exists(UploadJournal.name)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var query = ClipQuery(limit: ClipQuery.largestPage)
        var clips = 0
        var (uploaded, waiting, failed) = (0, 0, 0)
        while true {
            let page: ClipPage
            do { page = try catalogue.page(query) } catch {
                printError(
                    "vigil clips: \(error.description)"
                        + (clips > 0 ? " (after \(clips) clip(s) listed)" : "")
                        + "; vigil clips lists the journal while the catalogue is away (move it aside)")
                return .ioError
            }
            if clips == 0, page.entries.isEmpty, !json {
                printOut("no clips recorded yet in \(settings.storage.path)")
                return .success
            }
            if clips == 0, !json { printOut(header(uploading: uploading)) }
            for entry in page.entries {
                clips += 1
                if json {
                    if let data = try? encoder.encode(entry.record) { printOut(String(decoding: data, as: UTF8.self)) }
                    continue
                }
                let state: String
                switch entry.upload {
                case .uploaded?:
                    uploaded += 1
                    state = "uploaded"
                case .waiting?:
                    waiting += 1
                    state = "waiting"
                case .failed?:
                    failed += 1
                    state = "failed"
                case nil:
                    state = "-"
                }
                printOut(row(entry.record, upload: uploading ? state.padding(to: 10) : "", mark: "", in: storage))
            }
            guard let next = page.next else { break }
            query.before = next
        }
        if json { return .success }
        printOut("\(clips) clip(s) in \(settings.storage.path)")
        if uploading {
            let to = settings.upload.destination.map { " to \($0.display)" } ?? ""
            printOut(
                "\(uploaded) uploaded\(to), \(waiting) waiting"
                    + (failed > 0 ? ", \(failed) failed (set aside; the agent tries them again when it restarts)" : "")
                    + " (\(CatalogueFile.name))")
        }
        return .success
    }

    /// The listing's first line: its columns.
    static func header(uploading: Bool) -> String {
        "start".padding(to: 31) + "duration".padding(to: 10) + "peak".padding(to: 8)
            + (uploading ? "upload".padding(to: 10) : "") + "file"
    }

    /// A clip's line: its start, duration, peak score, `upload` (its column, padded, or empty),
    /// its file, and what is to say of it: deleted (gone from the disk), damaged, `mark`.
    static func row(_ r: ClipRecord, upload: String, mark: String, in storage: DiskStorage) -> String {
        let duration = DecimalText.fixed(r.durationSeconds, 1) + "s"
        let peak =
            r.damaged == true
            ? "damaged"
            : r.peakScore.map { DecimalText.fixed($0, 3) }
                ?? (r.repaired == true ? "repaired" : (r.rebuilt == true ? "rebuilt" : "-"))
        let onDisk = storage.exists(r.file)
        var said = onDisk ? mark : "  (deleted)"
        if r.damaged == true, onDisk { said = "  (damaged: no player opens it)" + said }
        return r.start.padding(to: 31) + duration.padding(to: 10) + peak.padding(to: 8) + upload + r.file + said
    }
}
