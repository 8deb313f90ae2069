import Agent
import FoundationEssentials
import Logging
import Media
import POSIX
import QuickTime
import Recorder

/// The upload thread: reads the queue, then sends what waits, one clip at a time.
extension UploadSink {
    /// What the thread does next.
    enum Work {
        case upload(String, any ClipStorage)
        /// Clips uploaded (and read back) `delete_local_after` ago, to delete on the board.
        case deleteLocal([String])
        /// The file has grown to many times what it must hold: written anew.
        case compact(any ClipStorage)
        /// Clips saved: said waiting in the catalogue.
        case saidWaiting([String], any ClipStorage)
    }

    func run(on storage: any ClipStorage) {
        // Recording first: the thread's reads and its CPU (MD5, TLS) yield to the agent's.
        do { try ThreadPriority.lowerForThisThread() } catch {
            log.debug("the upload thread's priority could not be lowered", [("error", .string(error.description))])
        }
        guard let (journal, movedTo) = load(storage) else { return }
        // A new queue: written whole, with what was queued again and what could not be written.
        if movedTo != nil { compact(storage) }
        log.info(
            "uploading clips",
            [
                ("to", .string(settings.destination?.display ?? "")), ("waiting", .int(journal.backlogCount)),
                ("libcurl", .string(CurlTransfer.version)),
            ])
        // Set aside in an earlier run: a restart is what puts a server right.
        let setAside = journal.compacted.compactMap(\.setAside).filter { storage.exists($0) }
        if !setAside.isEmpty {
            append(setAside.map { UploadRecord(queued: $0, at: timestamp()) }, in: storage)
            log.info("clips set aside in an earlier run are tried again", [("clips", .int(setAside.count))])
        }
        enterQueueInCatalogue(storage)
        if let problem = settings.problem {
            log.error(
                "uploads wait: a file they need cannot be read; clips are queued and uploaded once it is put right and the agent restarted",
                [("problem", .string(problem.description))])
        }
        while let work = next() {
            switch work {
            case .upload(let file, let storage):
                upload(file, from: storage)
                condition.withLock { state.sending = nil }
            case .deleteLocal(let files): deleteLocal(files)
            case .compact(let storage): compact(storage)
            case .saidWaiting(let files, let storage):
                fileLock.withLock {
                    // Those still waiting (not deleted meanwhile).
                    let waiting = condition.withLock { files.filter { state.journal?.waits($0) == true } }
                    enter(waiting.map { UploadRecord(queued: $0, at: "") }, in: storage)
                }
            }
        }
    }

    /// Brings the catalogue and the queue together, a page of the catalogue at a time (its
    /// names and states only): where the queue names a clip, its state is written into the
    /// entry that says otherwise (a directory catalogued from its journal at its first start; a
    /// kill between a line and its state); a clip on the board the catalogue says waits, or
    /// failed, and the queue does not name (the queue lost) is queued again. Then the queue
    /// forgets the uploads the catalogue holds. Said when any was written or queued.
    private func enterQueueInCatalogue(_ storage: any ClipStorage) {
        var after: String?
        var written = 0
        var again: [String] = []
        var problem: CatalogueError?
        while problem == nil, !store.transfer.stop.isOn {
            let page: [(file: String, state: UploadState?)]
            do throws(CatalogueError) {
                page = try sinkCatalogue(of: storage).uploads(after: after, limit: 1000)
            } catch {
                problem = error
                break
            }
            guard let last = page.last else { break }
            after = last.file
            var lost: [String] = []
            // Under the queue's lock: no line's state is written meanwhile, over the queue's.
            fileLock.withLock {
                let changes = condition.withLock { () -> [(file: String, state: UploadState?)] in
                    page.compactMap { entry in
                        let known: UploadState?
                        switch state.journal?.state(of: entry.file) {
                        case .waiting?: known = .waiting
                        case .uploaded(let record)?: known = .uploaded(url: record.url ?? "")
                        case .setAside(let record)?: known = .failed(reason: record.reason ?? "")
                        case nil:
                            switch entry.state {
                            case .waiting?, .failed?: lost.append(entry.file)
                            case .uploaded?, nil: break
                            }
                            return nil
                        }
                        return known == entry.state ? nil : (entry.file, known)
                    }
                }
                do throws(CatalogueError) { try sinkCatalogue(of: storage).setUploads(changes) } catch {
                    problem = error
                }
                if problem == nil { written += changes.count }
            }
            lost = lost.filter { storage.exists($0) }
            if problem == nil, !lost.isEmpty {
                append(lost.map { UploadRecord(queued: $0, at: timestamp()) }, in: storage)
                again += lost
            }
        }
        if let problem {
            forgetCatalogue()
            log.warning(
                "the clip catalogue was not told where each upload stands; the page and vigil clips may show an upload's state wrong until the agent starts again",
                [("path", .string(storage.path(CatalogueFile.name))), ("error", .string(problem.description))])
            return
        }
        if written > 0 {
            log.info("upload states written into the clip catalogue from the queue", [("clips", .int(written))])
        }
        if !again.isEmpty {
            log.info(
                "clips the catalogue says wait and the upload queue did not name are queued again",
                [("clips", .int(again.count)), ("first", .string(again[0]))])
        }
        condition.withLock {
            for (file, record) in state.journal?.uploads ?? [:] where forgets(record) {
                state.journal?.forgetUpload(file)
            }
        }
    }

    // MARK: Reading the queue

    /// Reads the queue (tried again, with a wait, while it cannot be), and makes it the one in
    /// memory; nil when the agent stops first. A queue that is not a regular file is moved
    /// aside (its new name returned) and a new one begun.
    private func load(_ storage: any ClipStorage) -> (UploadJournal, movedTo: String?)? {
        var retry = Retry(maximum: longestWait)
        while true {
            do throws(FileError) {
                return try read(storage)
            } catch {
                guard !store.transfer.stop.isOn else { return nil }
                let wait = retry.failed(at: clock.now()).retryIn.seconds
                log.error(
                    "the upload queue cannot be read; uploads wait until it can — check the file's permissions",
                    [
                        ("path", .string(storage.path(UploadJournal.name))), ("error", .string(error.description)),
                        ("retry_in", .seconds(wait)),
                    ])
                let stopping = condition.withLock {
                    if !state.stopping { condition.wait(seconds: wait) }
                    return state.stopping
                }
                if stopping { return nil }
            }
            if store.transfer.stop.isOn { return nil }
        }
    }

    /// One reading of the queue: opened (its length taken) while no line can be appended, then
    /// read a piece at a time, the lines appended since taken after it. The agent stopping
    /// between two pieces ends it as an error the caller does not report.
    private func read(_ storage: any ClipStorage) throws(FileError) -> (UploadJournal, movedTo: String?) {
        var opened: (file: any MovieFile, length: UInt64)?
        var movedTo: String?
        var failure: FileError?
        fileLock.withLock {
            do throws(FileError) {
                let file = try storage.readMovie(UploadJournal.name)
                opened = (file, file.length)
            } catch {
                if error.isNotRegularFile {
                    do throws(FileError) {
                        movedTo = try storage.moveAside(UploadJournal.name, to: UploadJournal.notAFileName)
                        log.warning(
                            "the upload queue is not a regular file; moved aside, a new queue is begun and the clips the events journal has on the board are queued again",
                            [
                                ("path", .string(storage.path(UploadJournal.name))),
                                ("moved_to", .string(storage.path(movedTo ?? ""))),
                                ("error", .string(error.description)),
                            ])
                    } catch {
                        failure = error
                    }
                } else if !error.isMissing {
                    failure = error
                }
            }
            // What was written is in the file; what could not be waits in memory.
            if failure == nil { condition.withLock { state.pending.removeAll { $0.written } } }
        }
        if let failure { throw failure }
        var journal = UploadJournal()
        if let opened {
            defer { try? opened.file.close() }
            guard
                let read = try UploadJournal.read(
                    opened.file, length: opened.length, until: { [store] in store.transfer.stop.isOn })
            else { throw FileError(path: storage.path(UploadJournal.name), operation: "read", reason: "stopped") }
            journal = read
        }
        if movedTo != nil { queueAgain(into: &journal, from: storage) }
        condition.withLock {
            for (record, _) in state.pending { journal.apply(record) }
            state.pending = []
            state.journal = journal
            condition.broadcast()
        }
        return (journal, movedTo)
    }

    /// The queue was lost (moved aside): every clip the events journal has on the board is
    /// queued again, oldest first (before the clips saved since), in `journal`, which is then
    /// written whole.
    private func queueAgain(into journal: inout UploadJournal, from storage: any ClipStorage) {
        let records: [ClipRecord]
        do { records = try EventsJournal(storage: storage).records().records } catch {
            log.warning(
                "the events journal cannot be read; the clips it names are not queued again",
                [("error", .string(error.description))])
            return
        }
        let at = timestamp()
        var queued = 0
        for file in records.map(\.file) where !ClipNaming.isDamaged(file) && storage.exists(file) {
            guard journal.state(of: file) == nil else { continue }
            journal.apply(UploadRecord(queued: file, at: at))
            queued += 1
        }
        log.info("clips queued again from the events journal", [("clips", .int(queued))])
    }

    /// Writes the queue anew with what it must hold (`UploadJournal.compacted`), while no line
    /// can be appended.
    func compact(_ storage: any ClipStorage) {
        fileLock.withLock {
            let (records, lines) = condition.withLock { (state.journal?.compacted ?? [], state.journal?.lines ?? 0) }
            do throws(FileError) {
                try storage.replace(UploadJournal.name, with: records.flatMap(UploadJournal.line))
            } catch {
                log.warning(
                    "the upload queue was not written anew; it grows until it can be",
                    [("lines", .int(lines)), ("error", .string(error.description))])
                condition.withLock { state.compactionFailedAt = lines }
                return
            }
            condition.withLock {
                state.journal?.rewritten()
                state.compactionFailedAt = 0
            }
            log.debug(
                "the upload queue was written anew", [("lines_before", .int(lines)), ("lines", .int(records.count))])
        }
    }

    // MARK: Sending

    /// The next thing to do, waiting for it (a clip queued or saved, the time of the next try,
    /// a clip's time to be deleted on the board); nil when the agent stops.
    private func next() -> Work? {
        condition.withLock {
            while !state.stopping {
                guard let journal = state.journal, let storage = state.storage else {
                    condition.wait()
                    continue
                }
                if !state.saved.isEmpty {
                    defer { state.saved = [] }
                    return .saidWaiting(state.saved, storage)
                }
                if journal.wantsCompacting, journal.lines > 2 * state.compactionFailedAt { return .compact(storage) }
                if settings.problem != nil {
                    condition.wait()
                    continue
                }
                var wait: Double?
                if let after = settings.deleteLocalAfter {
                    let now = wallNow()
                    var due: [String] = []
                    // Only a copy read back whole: a size or an ETag is what a lying server says.
                    for (file, record) in journal.uploads
                    where record.readBack == true && !state.deleting.contains(file) {
                        let at = ClipRecord.date(fromTimestamp: record.at) ?? now
                        let left = at.addingTimeInterval(after).timeIntervalSince(now)
                        if left <= 0 { due.append(file) } else { wait = min(wait ?? left, left) }
                    }
                    if !due.isEmpty { return .deleteLocal(due.sorted()) }
                }
                let now = clock.now()
                if let file = pick(journal) {
                    guard let nextTry = state.nextTry, now < nextTry else {
                        state.sending = file
                        store.transfer.abandon.turnOff()
                        return .upload(file, storage)
                    }
                    wait = min(wait ?? .infinity, (nextTry - now).seconds)
                }
                if let wait { condition.wait(seconds: min(wait, 3600)) } else { condition.wait() }
            }
            return nil
        }
    }

    /// The clip to send next (under `condition`): the oldest saved, unless it is the one that
    /// just failed right after another clip's upload worked — then the next, so that one clip
    /// never holds the others up.
    private func pick(_ journal: UploadJournal) -> String? {
        let backlog = journal.backlog.lazy.filter { !self.state.recording.contains($0) }
        if let avoid = state.avoid, let other = backlog.first(where: { $0 != avoid }) { return other }
        return backlog.first
    }

    private func upload(_ file: String, from storage: any ClipStorage) {
        // With delete_local_after, the copy on the server is read back: the clip is deleted
        // on the board only if that matches.
        let readBack = settings.deleteLocalAfter != nil
        let result: Result<(UploadReceipt, Int64), UploadProblem>
        do throws(UploadProblem) {
            var receipt = try store.upload(file, from: storage, readBack: readBack)
            var sent = receipt.bytes
            if settings.snapshots {
                let picture = ClipNaming.snapshotPath(of: file)
                if picture != file, storage.exists(picture) {
                    let withIt = try store.upload(picture, from: storage, readBack: readBack)
                    receipt.seconds += withIt.seconds
                    sent += withIt.bytes
                }
            }
            result = .success((receipt, sent))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let (receipt, sent)):
            uploaded(file, receipt, sent: sent, in: storage)
        case .failure(.stopped):
            return
        case .failure(.fileGone) where condition.withLock({ !(state.journal?.waits(file) ?? false) }):
            // Deleted on the board while it was sent (retention on a full disk, a person): the
            // queue has forgotten it already, and the error line said it.
            log.debug("upload given up: the clip was deleted on the board", [("file", .string(file))])
        case .failure(.fileGone(let why)):
            // The directory must be there for a missing file to be gone (not a disk unmounted).
            if storage.exists(UploadJournal.name) {
                log.warning(
                    "a queued clip is not on the board any more; not uploaded",
                    [("file", .string(file)), ("why", .string(why))])
                append(
                    [UploadRecord(deleted: file, at: timestamp(), reason: "not on the board when its upload began")],
                    in: storage)
            } else {
                failed(file, why, in: storage)
            }
        case .failure(let problem):
            failed(file, problem.description, in: storage)
        }
    }

    /// Hands the clips to the agent's writer to delete (it never deletes the clip being written,
    /// logs each, and tells the sinks: the journal drops its line, the queue its file).
    private func deleteLocal(_ files: [String]) {
        for file in files {
            // Asked once in a run: when no agent takes it (stopping), the next run asks again.
            let requests = condition.withLock {
                state.deleting.insert(file)
                return state.context.requests
            }
            _ = requests.deleteClip(file, by: "upload.delete_local_after, after its upload")
        }
    }

    /// `sent`: the bytes of the clip and its picture.
    private func uploaded(_ file: String, _ receipt: UploadReceipt, sent: Int64, in storage: any ClipStorage) {
        let at = timestamp()
        let seconds = (receipt.seconds * 1000).rounded() / 1000
        append(
            [
                UploadRecord(
                    uploaded: file, at: at, url: receipt.url, bytes: UInt64(receipt.bytes), seconds: seconds,
                    readBack: receipt.readBack ? true : nil)
            ], in: storage)
        let (recovered, waiting, context) = condition.withLock {
            let recovery = state.retry.succeeded(at: clock.now())
            defer {
                state.lastProblem = nil
                state.nextTry = nil
                state.lastTry = (file, true)
                state.avoid = nil
                state.tries[file] = nil
                counts.uploaded += 1
                counts.bytes += sent
            }
            return (recovery?.tries ?? 0, waitingCount, state.context)
        }
        if recovered > 0 { log.info("uploads work again", [("failed_tries", .int(recovered))]) }
        log.info(
            "clip uploaded",
            [
                ("file", .string(file)), ("url", .string(receipt.url)), ("bytes", .int(receipt.bytes)),
                ("seconds", .seconds(receipt.seconds)), ("waiting", .int(waiting)),
            ])
        // MQTT's `uploaded` event, `hooks.on_upload`.
        context.announce(
            .clipUploaded(
                ClipUploaded(
                    file: file, path: storage.path(file), camera: camera, url: receipt.url, bytes: receipt.bytes,
                    seconds: seconds, at: at, waiting: waiting)))
    }

    private func failed(_ file: String, _ problem: String, in storage: any ClipStorage) {
        let (delay, repeated, failures, tries, setAside) = condition.withLock {
            // Right after another clip's upload worked: the server is there and takes clips.
            let evidence = state.lastTry.map { $0.worked && $0.file != file } ?? false
            var tries = state.tries[file, default: Tries()]
            tries.failed += 1
            if evidence { tries.strikes += 1 }
            let setAside = tries.strikes >= Self.setAsideAfter
            state.tries[file] = setAside ? nil : tries
            state.lastTry = (file, false)
            state.avoid = evidence && !setAside ? file : nil
            let now = clock.now()
            let delay = state.retry.failed(at: now).retryIn
            state.nextTry = now + delay
            counts.failures += 1
            defer { state.lastProblem = problem }
            return (delay.seconds, state.lastProblem == problem, state.retry.failures, tries.failed, setAside)
        }
        if setAside {
            append([UploadRecord(setAside: file, at: timestamp(), reason: problem, tries: tries)], in: storage)
            log.error(
                "upload set aside: the server refused this clip again and again while it took others; it is not tried again until the agent restarts — see what the server says (error), put it right there, then restart the agent",
                [("file", .string(file)), ("error", .string(problem)), ("tries", .int(tries))])
            return
        }
        // Each new problem is an error line; the same one again only now and then.
        if !repeated || failures.isPowerOfTwo {
            log.error(
                "upload failed; the clip stays queued and is tried again",
                [
                    ("file", .string(file)), ("error", .string(problem)), ("retry_in", .seconds(delay)),
                    ("failed_tries", .int(failures)),
                ])
        }
    }
}

extension Int {
    fileprivate var isPowerOfTwo: Bool { self > 0 && (self & (self - 1)) == 0 }
}
