import Foundation
import Media
import QuickTime
import Recorder
import Storage
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The storage directory on disk: what the POSIX calls do with real files, links and a real
/// (small) file system.
@Suite struct DiskStorageTests {
    let naming = ClipNaming(
        pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: TimeZone(identifier: "UTC")!)

    func write(_ path: String, mb: Int, modified: Date) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: path, contents: Data(count: mb << 20)))
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
    }

    /// Fills a 40 MB file system with clips and things that are not clips, then sweeps.
    @Test func sweepsARealSmallFileSystemDeletingOnlyItsOwnClips() throws {
        let fs = try SmallFileSystem(megabytes: 40)
        defer { fs.unmount() }
        let root = fs.path + "/clips"
        let outside = fs.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let base = Date(timeIntervalSince1970: 1_796_000_000)
        var names: [String] = []
        for i in 0..<6 {
            let date = base.addingTimeInterval(Double(i) * 3600)
            let name = naming.relativePath(for: date)
            names.append(name)
            try write(root + "/" + name, mb: 5, modified: date)
        }
        // Not ours: a file outside the pattern, a symlink to a file outside, a symlinked
        // directory full of clip-named files, and a file outside the store.
        try write(root + "/2026-11-29/holiday.mov", mb: 1, modified: base.addingTimeInterval(-86_400 * 400))
        try write(
            outside + "/2026-11-29/shed-20261129-000000.mov", mb: 1, modified: base.addingTimeInterval(-86_400 * 400))
        try FileManager.default.createSymbolicLink(
            atPath: root + "/2026-11-28", withDestinationPath: outside + "/2026-11-29")
        try FileManager.default.createDirectory(atPath: root + "/2026-11-27", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: root + "/2026-11-27/shed-20261127-000000.mov",
            withDestinationPath: outside + "/2026-11-29/shed-20261129-000000.mov")

        let store = ClipStore(storage: DiskStorage(root: root), naming: naming)
        #expect(try store.clips().map(\.relativePath).sorted() == names.sorted())
        let free = try store.storage.freeBytes()
        #expect(free > 0 && free < 40 << 20)

        // Keep 15 MB free: about 8 MB must go, so the two oldest clips; the open one (the
        // oldest of all, say) is never touched.
        let policy = RetentionPolicy(maxAgeDays: nil, maxSize: nil, minFree: free + (8 << 20))
        let swept = store.sweep(policy, now: base, protected: [names[0]])
        let (deleted, errors) = (swept.deleted, swept.errors)
        #expect(errors.isEmpty)
        #expect(deleted.map(\.clip.relativePath) == [names[1], names[2]])
        #expect(try store.storage.freeBytes() >= free + (8 << 20))
        let fm = FileManager.default
        #expect(fm.fileExists(atPath: root + "/" + names[0]))
        #expect(fm.fileExists(atPath: root + "/2026-11-29/holiday.mov"))
        #expect(fm.fileExists(atPath: outside + "/2026-11-29/shed-20261129-000000.mov"))
        #expect((try? fm.destinationOfSymbolicLink(atPath: root + "/2026-11-27/shed-20261127-000000.mov")) != nil)

        // By age and size: everything of ours but the clip being written and the newest clip
        // saved can go; nothing else.
        let all = store.sweep(
            RetentionPolicy(maxAgeDays: 1, maxSize: 1, minFree: 0), now: base.addingTimeInterval(86_400 * 10),
            protected: [names[0]])
        #expect(all.deleted.count == 2)
        #expect(try store.clips().map(\.relativePath) == [names[0], names[5]])
        #expect(fm.fileExists(atPath: root + "/2026-11-29/holiday.mov"))
    }

    @Test func walksNoLinkAndDeletesOnlyRegularFiles() throws {
        let dir = try TemporaryDirectory("vigil-store")
        defer { dir.remove() }
        let outside = try TemporaryDirectory("vigil-outside")
        defer { outside.remove() }
        let date = Date(timeIntervalSince1970: 1_796_000_000)
        try write(dir.file("2026-11-30/shed-20261130-000000.mov"), mb: 0, modified: date)
        try write(outside.file("2026-11-29/shed-20261129-000000.mov"), mb: 0, modified: date)
        try FileManager.default.createSymbolicLink(
            atPath: dir.file("2026-11-29"), withDestinationPath: outside.file("2026-11-29"))
        try FileManager.default.createSymbolicLink(
            atPath: dir.file("2026-11-30/shed-20261130-000001.mov"),
            withDestinationPath: outside.file("2026-11-29/shed-20261129-000000.mov"))
        let storage = DiskStorage(root: dir.path)
        let files = try storage.walk()
        #expect(files.map(\.relativePath) == ["2026-11-30/shed-20261130-000000.mov"])
        #expect(files.first?.modified == date)
        #expect(storage.exists("2026-11-30/shed-20261130-000001.mov"))

        #expect(throws: FileError.self) { try storage.delete("2026-11-30/shed-20261130-000001.mov") }
        #expect(throws: FileError.self) { try storage.delete("../vigil-outside/2026-11-29/shed-20261129-000000.mov") }
        #expect(throws: FileError.self) { _ = try storage.createMovie("../escape.mov") }
        #expect(FileManager.default.fileExists(atPath: outside.file("2026-11-29/shed-20261129-000000.mov")))

        // The last file of a dated directory takes the directory with it; a directory that
        // still holds something (here the planted link) stays.
        try write(dir.file("2026-11-28/shed-20261128-000000.mov"), mb: 0, modified: date)
        try storage.delete("2026-11-28/shed-20261128-000000.mov")
        #expect(!FileManager.default.fileExists(atPath: dir.file("2026-11-28")))
        try storage.delete("2026-11-30/shed-20261130-000000.mov")
        #expect(FileManager.default.fileExists(atPath: dir.file("2026-11-30")))
    }

    @Test func moviesAppendsAndReplacements() throws {
        let dir = try TemporaryDirectory("vigil-store")
        defer { dir.remove() }
        // A storage directory whose parent is missing (a disk not mounted) is not made.
        let storage = DiskStorage(root: dir.file("clips/deeper"))
        #expect(throws: FileError.self) { try storage.createRoot() }
        #expect(!FileManager.default.fileExists(atPath: dir.file("clips")))
        try FileManager.default.createDirectory(atPath: dir.file("clips"), withIntermediateDirectories: false)
        try storage.createRoot()
        let movie = try storage.createMovie("2026-11-30/a.mov")
        try movie.append([1, 2, 3])
        try movie.close()
        #expect(try storage.openMovie("2026-11-30/a.mov").read(at: 0, count: 10) == [1, 2, 3])
        #expect(throws: FileError.self) { _ = try storage.openMovie("2026-11-30/b.mov") }

        // Read only: a clip being written reads as far as it goes, without waiting for or
        // taking its lock, and nothing can be written through it.
        let writing = try storage.createMovie("2026-11-30/c.mov")
        try writing.append([4, 5])
        #expect(throws: FileError.self) { _ = try storage.openMovie("2026-11-30/c.mov") }
        let reading = try storage.readMovie("2026-11-30/c.mov")
        #expect(try reading.read(at: 0, count: 10) == [4, 5])
        #expect(throws: FileError.self) { try reading.append([6]) }
        try reading.close()
        try writing.close()
        try storage.delete("2026-11-30/c.mov")

        #expect(try storage.read("events.jsonl") == nil)
        try storage.append(Array("one\n".utf8), to: "events.jsonl")
        try storage.append(Array("two\n".utf8), to: "events.jsonl")
        #expect(try storage.read("events.jsonl") == Array("one\ntwo\n".utf8))
        // Rewritten by root (`sudo vigil clips --rescan`), the journal stays its owner's.
        let isRoot = geteuid() == 0
        if isRoot { #expect(chown(dir.file("clips/deeper/events.jsonl"), 4321, 4322) == 0) }
        try storage.replace("events.jsonl", with: Array("two\n".utf8))
        #expect(try storage.read("events.jsonl") == Array("two\n".utf8))
        if isRoot {
            let attributes = try FileManager.default.attributesOfItem(atPath: dir.file("clips/deeper/events.jsonl"))
            #expect((attributes[.ownerAccountID] as? NSNumber)?.intValue == 4321)
            #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.intValue == 4322)
        }
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: storage.root).sorted() == [
                "2026-11-30", "events.jsonl",
            ])
    }

    /// The storage directory may be a link (to a USB disk, say): it is used through it.
    @Test func aStorageDirectoryReachedThroughALinkIsUsed() throws {
        let dir = try TemporaryDirectory("vigil-store")
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.file("usb/clips"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: dir.file("clips"), withDestinationPath: dir.file("usb/clips"))
        let storage = DiskStorage(root: dir.file("clips"))
        try storage.createRoot()
        let movie = try storage.createMovie("2026-11-30/shed-20261130-000000.mov")
        try movie.append([1])
        try movie.close()
        #expect(try storage.walk().map(\.relativePath) == ["2026-11-30/shed-20261130-000000.mov"])
        #expect(FileManager.default.fileExists(atPath: dir.file("usb/clips/2026-11-30/shed-20261130-000000.mov")))
        #expect(try storage.freeBytes() > 0)

        // Something there that is not a directory is said so.
        #expect(FileManager.default.createFile(atPath: dir.file("file"), contents: Data()))
        #expect(
            throws: FileError(
                path: dir.file("file"), operation: "create the directory", reason: "it exists and is not a directory")
        ) {
            try DiskStorage(root: dir.file("file")).createRoot()
        }
    }

    /// A link planted with the journal's name is not followed: the journal is not written
    /// through it (here to /dev/full; it could as well be a file of someone else's).
    @Test func aJournalThatIsALinkIsNotWrittenThroughIt() throws {
        let dir = try TemporaryDirectory("vigil-journal")
        defer { dir.remove() }
        let journal = EventsJournal(directory: dir.path)
        try FileManager.default.createSymbolicLink(atPath: journal.path, withDestinationPath: "/dev/full")
        let record = ClipRecord(
            file: "a.mov", camera: "shed", start: "", end: "", cause: nil, triggerTime: nil, triggerSourceSeconds: nil,
            preRollSeconds: nil, durationSeconds: 1, frames: 30, audioFrames: 0, bytes: 1, peakScore: nil, part: 1)
        #expect(
            throws: EventsJournal.JournalError(
                description: "cannot append to \(journal.path): it is a symbolic link; refusing to follow it")
        ) {
            try journal.append(record)
        }
    }

    /// Runs `body` on a thread of its own and waits at most `seconds` for it; nil when it did
    /// not return (a call stuck in `open`). `unblock` then lets it go, so no thread is left
    /// stuck behind the test.
    func within<T: Sendable>(
        _ seconds: Double, unblock: () -> Void, _ body: @escaping @Sendable () -> T
    ) -> T? {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<T?>(nil)
        Thread.detachNewThread {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        if done.wait(timeout: .now() + seconds) == .success { return result.withLock { $0 } }
        for _ in 0..<300 {
            unblock()
            if done.wait(timeout: .now() + 0.1) == .success { break }
        }
        return nil
    }

    /// A named pipe with the journal's name, or a clip's, is refused at once, saying what it
    /// is and what to do — never opened: opening one nobody writes waits for ever (SIGTERM
    /// does not end the wait), and reading one waits for a writer.
    @Test func aNamedPipeInTheStorageDirectoryIsRefusedWithoutWaiting() throws {
        let dir = try TemporaryDirectory("vigil-fifo")
        defer { dir.remove() }
        let storage = DiskStorage(root: dir.path)
        let clip = naming.relativePath(for: Date(timeIntervalSince1970: 1_796_000_000))
        try FileManager.default.createDirectory(
            atPath: dir.file(clip.withoutLastPathComponent), withIntermediateDirectories: true)
        for name in [EventsJournal.name, clip] { #expect(mkfifo(dir.file(name), 0o644) == 0) }
        // A writer that comes and goes lets a reader stuck in `open` return.
        let unblock = {
            for name in [EventsJournal.name, clip] {
                let fd = open(dir.file(name), O_WRONLY | O_NONBLOCK)
                if fd >= 0 { close(fd) }
            }
        }
        let attempts: [(String, @Sendable () -> FileError?)] = [
            ("read the journal", { Self.failure { () throws(FileError) in _ = try storage.read(EventsJournal.name) } }),
            (
                "append to the journal",
                {
                    Self.failure { () throws(FileError) in
                        try storage.append(Array("{}\n".utf8), to: EventsJournal.name)
                    }
                }
            ),
            ("read a clip", { Self.failure { () throws(FileError) in _ = try storage.readMovie(clip) } }),
            ("open a clip for repair", { Self.failure { () throws(FileError) in _ = try storage.openMovie(clip) } }),
        ]
        for (what, attempt) in attempts {
            let error = within(30, unblock: unblock, attempt)
            try #require(error != nil, "\(what): still waiting after 30 s")
            let description = error??.description ?? "no error"
            #expect(
                description.contains("it is a named pipe (FIFO), not a regular file; refusing")
                    && description.contains("move it out of the storage directory"),
                "\(what): \(description)")
        }
        // The pipes are still there, untouched.
        for name in [EventsJournal.name, clip] {
            #expect(isNamedPipe(dir.file(name)))
        }
    }

    /// The error `body` throws, or nil.
    static func failure(_ body: () throws(FileError) -> Void) -> FileError? {
        do { try body() } catch { return error }
        return nil
    }

    /// Only a lock another agent holds is another agent: on a file system mounted read-only
    /// the lock file cannot be opened to write, which is storage to wait for, and so is a
    /// storage directory that cannot be made there.
    @Test func aReadOnlyDirectoryIsUnavailableNotClaimedElsewhere() throws {
        let fs = try SmallFileSystem(megabytes: 4)
        defer { fs.unmount() }
        let storage = DiskStorage(root: fs.path + "/clips")
        try storage.createRoot()
        do {
            let first = try storage.claim()
            do {
                _ = try storage.claim()
                Issue.record("claimed twice")
            } catch {
                #expect(error.cause == .held && error.heldBy == getpid(), "\(error)")
            }
            withExtendedLifetime(first) {}
        }
        try fs.remount(readOnly: true)
        do {
            _ = try storage.claim()
            Issue.record("claimed on a read-only file system")
        } catch {
            #expect(error.cause == .unavailable && error.description.contains("Read-only file system"), "\(error)")
        }
        do {
            try DiskStorage(root: fs.path + "/other").createRoot()
            Issue.record("made a directory on a read-only file system")
        } catch {
            #expect(error.isReadOnly, "\(error)")
        }
        #expect(throws: FileError.self) { try storage.probe() }
    }
}
