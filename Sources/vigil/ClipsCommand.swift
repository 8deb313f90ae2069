import Agent
import Configuration
import FoundationEssentials
import Media
import POSIX
import Recorder
import Storage

/// `vigil clips`: the recorded clips, from the clip catalogue a page at a time; without one (a
/// directory no agent of this version started), from the events journal and every clip on disk
/// it lacks.
enum ClipsCommand: Command {
    static let name = "clips"
    static let abstract = "List recorded clips from the clip catalogue."
    static let synopsis = "[--config FILE] [--json] [--rescan]"
    static let discussion = """
        Reads the clip catalogue (storage.path/catalogue.sqlite, which the agent keeps; read
        only, beside a running agent too) and prints one line per clip, newest first, a page at
        a time: when it starts, how long it is, the motion score, and its file (marked
        "deleted" when it is gone from the disk, "damaged" for a clip the agent could not
        repair and moved aside as NAME.mov.damaged), and with uploads whether it is uploaded,
        waits, or failed — the server refused it again and again and the agent set it aside
        until it restarts.
        A directory with no catalogue yet (an earlier version wrote it; the agent makes the
        catalogue when it starts) or one that cannot be read is listed from
        storage.path/events.jsonl instead, oldest first, and that is said on stderr: a damaged
        line (a full disk can tear one) is said, and the lines in it and after it are still
        read; clips on disk that have no line are listed too, from their movie files, marked
        "not in the journal"; the upload column comes from storage.path/uploads.jsonl.
        --rescan rebuilds the journal from the clips on disk, as the agent does when it
        starts on a directory with no catalogue: it adds their lines (marked rebuilt: no
        trigger, pre-roll or score), and drops damaged lines once their clips have lines
        again; then the catalogue is made to list the same clips (files copied in or deleted
        by hand are seen so), and clips a kill left unfinished are repaired when the agent
        next starts. It holds the storage
        directory's lock meanwhile: while an agent records into the directory it is refused
        (exit 75). Run it as the agent's user (sudo -u vigil), so that the journal stays the
        agent's to write.
        --json prints the clips' journal records, one JSON line each.
        """
    static let options = [
        configOption, OptionSpec(name: "json", valueName: nil, help: "print the clips' journal records as JSON lines"),
        OptionSpec(name: "rescan", valueName: nil, help: "rebuild the journal from the clips on disk"),
    ]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard let (_, settings) = loadSettings(arguments) else { return .config }
        let storage = DiskStorage(root: settings.storage.path)
        let journal = EventsJournal(storage: storage)
        let store = ClipStore(
            storage: storage,
            naming: ClipNaming(
                pattern: settings.storage.filePattern, camera: settings.camera.name, timeZone: SystemTimeZone()))
        let rescan = arguments.flag("rescan")
        if !rescan {
            switch openCatalogue(storage) {
            case .opened(let catalogue):
                return list(catalogue, storage: storage, settings: settings, json: arguments.flag("json"))
            case .none:
                printError(
                    "vigil clips: no clip catalogue in \(settings.storage.path) yet (a directory an earlier version "
                        + "wrote): listed from \(EventsJournal.name); start the agent once and it makes the catalogue")
            case .unreadable(let problem):
                // The problem says what to do (a damaged catalogue: the agent sets it aside).
                printError("vigil clips: \(problem); the clips are listed from \(EventsJournal.name) meanwhile")
            }
        }
        // A rescan rewrites the journal: it holds the directory's claim meanwhile, so that no
        // agent appends a line the rewrite would lose. (A directory no agent ever claimed has
        // no lock file, and none is made here: made by another user, it would lock the agent out.)
        var claim: (any StorageClaim)?
        if rescan, storage.exists(DiskStorage.lockName) {
            do { claim = try storage.claim() } catch {
                printError(
                    "vigil clips: cannot rescan: \(error.description); the agent rebuilt the journal when it "
                        + "started — stop it to rescan (vigil clips alone lists every clip meanwhile)")
                return .temporaryFailure
            }
        }
        let rebuild: JournalRebuild
        do {
            rebuild = try withExtendedLifetime(claim) { () throws(EventsJournal.JournalError) in
                try journal.rebuild(from: store, write: rescan)
            }
        } catch {
            printError("vigil clips: \(error.description)")
            return .ioError
        }
        report(rebuild, journal: journal.path, rescan: rescan)
        if rescan, let problem = rescanCatalogue(storage, from: rebuild) {
            printError("vigil clips: \(problem)")
            return .ioError
        }
        // The journal's lines: after a rescan, the added ones are among them.
        let lines = rescan ? rebuild.records : rebuild.kept
        if arguments.flag("json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for r in lines {
                if let data = try? encoder.encode(r) { printOut(String(decoding: data, as: UTF8.self)) }
            }
            return .success
        }
        if rebuild.records.isEmpty {
            printOut("no clips recorded yet in \(settings.storage.path)")
            return .success
        }
        // With uploads (on, or done before), a column says which clips are off the board.
        let uploads = try? UploadJournal.read(from: storage)
        let uploading = settings.upload.enabled || uploads != nil
        let queue = uploads ?? UploadJournal()
        func upload(_ file: String) -> String {
            guard uploading else { return "" }
            let state =
                switch queue.state(of: file) {
                case .uploaded?: "uploaded"
                case .waiting?: "waiting"
                case .setAside?: "failed"
                case nil: "-"
                }
            return state.padding(to: 10)
        }
        printOut(header(uploading: uploading))
        for r in rebuild.records {
            let mark = storage.exists(r.file) && !rescan && rebuild.added.contains(r) ? "  (not in the journal)" : ""
            printOut(row(r, upload: upload(r.file), mark: mark, in: storage))
        }
        printOut("\(rebuild.records.count) clip(s) in \(settings.storage.path)")
        if uploading {
            let to = settings.upload.destination.map { " to \($0.display)" } ?? ""
            let failed = queue.setAside.count
            printOut(
                "\(queue.uploads.count) uploaded\(to), \(queue.backlogCount) waiting"
                    + (failed > 0 ? ", \(failed) failed (set aside; the agent tries them again when it restarts)" : "")
                    + " (\(UploadJournal.name))")
        }
        return .success
    }

    /// Makes the catalogue list what the rebuilt journal lists (one that cannot be read is moved
    /// aside, with its log, and made again), and says the clips a kill left unfinished being
    /// recorded, so that the agent's next start repairs them; the problem, if it could not.
    private static func rescanCatalogue(_ storage: DiskStorage, from rebuild: JournalRebuild) -> String? {
        do {
            let catalogue: any ClipCatalogue
            do { catalogue = try storage.openCatalogue() } catch  where error.isUnreadable {
                for name in CatalogueFile.names where storage.exists(name) {
                    do { _ = try storage.moveAside(name, to: name + ".damaged") } catch {
                        return "\(error.description) — the catalogue that cannot be read stays"
                    }
                }
                printError("vigil clips: \(error.description); moved aside, a new one is made from the clips")
                catalogue = try storage.openCatalogue()
            }
            let changed = try catalogue.synchronize(with: rebuild.entries)
            for file in rebuild.interrupted { try catalogue.beginRecording(file) }
            printError(
                "vigil clips: the clip catalogue lists the \(rebuild.entries.count) clip(s) on disk "
                    + "(\(changed.written) written, \(changed.removed) removed)"
                    + (rebuild.interrupted.isEmpty
                        ? "" : "; \(rebuild.interrupted.count) interrupted clip(s) are repaired when the agent starts"))
            return nil
        } catch {
            return error.description
        }
    }

    /// What is wrong with the journal, and what the rescan did about it, on stderr.
    private static func report(_ rebuild: JournalRebuild, journal: String, rescan: Bool) {
        if let aside = rebuild.setAside {
            printError(
                "vigil clips: \(aside.problem); "
                    + (aside.movedTo.map { "moved to \(journal.withoutLastPathComponent)/\($0), a new journal written" }
                        ?? "the clips on disk are listed; the agent moves it aside when it starts (so does --rescan)"))
        }
        if let first = rebuild.damagedLines.first {
            printError(
                "vigil clips: \(journal): \(rebuild.damagedLines.count) damaged line(s), first at line \(first); "
                    + "the clips' lines in and after them are read")
        }
        for clip in rebuild.unreadable {
            printError("vigil clips: \(clip.file): \(clip.problem); not listed")
        }
        if rescan {
            if rebuild.written {
                printError(
                    "vigil clips: \(journal) rebuilt: \(rebuild.added.count) line(s) added (marked rebuilt), "
                        + "\(rebuild.droppedDamaged) damaged and \(rebuild.droppedDuplicates) duplicate line(s) dropped"
                )
            }
        } else {
            var wrong: [String] = []
            if !rebuild.added.isEmpty {
                wrong.append("lacks \(rebuild.added.count) clip(s) on disk (listed, marked \"not in the journal\")")
            }
            if rebuild.droppedDamaged > 0 {
                wrong.append("holds \(rebuild.droppedDamaged) damaged line(s) beyond recovery")
            }
            if rebuild.droppedDuplicates > 0 {
                wrong.append("holds \(rebuild.droppedDuplicates) rebuilt line(s) of clips that have their own")
            }
            guard !wrong.isEmpty else { return }
            printError(
                "vigil clips: the journal " + wrong.joined(separator: " and ")
                    + "; vigil clips --rescan rebuilds it (the agent does when it starts)")
        }
    }
}
