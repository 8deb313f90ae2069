import Foundation
import QuickTime
import Recorder
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The storage directory as a careless admin leaves it: shared by two agents, not there yet
/// (a USB disk not mounted), emptied under the agent's feet.
@Suite(.serialized) struct StorageDirectoryTests {
    /// Something crosses from 2 s to 5 s, and from 14 s to 17 s.
    static let twoEvents = scene(seconds: 24, objects: [crossing(2, 5), crossing(14, 17)])

    /// A second `vigil run` on the directory a first one records into (with no pre-roll, so
    /// the first one's open clip is still an empty file) exits 75 naming the first one's pid,
    /// before it repairs anything; `vigil repair` leaves the open clip alone (exit 75). The
    /// first agent's clip is saved whole, with one journal line.
    @Test func aSecondAgentOnTheSameDirectoryLeavesTheFirstOnesClipAlone() throws {
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let footage = try writeFootage(scene(seconds: 8, objects: [crossing(1, 5)]), to: dir.file("scene.y4m"))
        let storage = dir.file("clips")
        let config = try writeConfig(
            dir.file("vigil.conf"), footage: footage, storage: storage, realtime: true,
            recording: "pre_roll = 0.0; post_roll = 1.0;")
        let first = try AgentProcess(config: config)
        #expect(first.waitUntil(timeout: 120) { !movieFiles(in: storage).isEmpty }, "\(first.output)")
        let file = try #require(movieFiles(in: storage).first, "\(first.output)")

        let second = try AgentProcess(config: config)
        #expect(second.waitForExit(timeout: 60) == 75, "\(second.output)")
        let refused = logLines(
            second.output,
            "another agent records into this storage directory — stop it, or give this one another storage.path")
        #expect(refused.count == 1 && refused.allSatisfy { logValue($0, "pid") == "\(first.pid)" }, "\(second.output)")
        #expect(logLines(second.output, "removed an interrupted clip with no video in it").isEmpty)
        #expect(logLines(second.output, "repaired an interrupted clip").isEmpty)

        let repair = try runTool(builtExecutable("vigil"), ["repair", storage + "/" + file])
        #expect(repair.status == 75, "\(repair.stdout)\(repair.stderr)")
        #expect((repair.stdout + repair.stderr).contains("skipped"), "\(repair.stdout)\(repair.stderr)")

        #expect(first.waitForExit(timeout: 120) == 0, "\(first.output)")
        let saved = logLines(first.output, "clip saved")
        #expect(saved.map { logValue($0, "file") } == [file], "\(first.output)")
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == [file])
        #expect((try? MovieRepair.inspect(path: storage + "/" + file)) == .complete)
        try expectPlayable(storage + "/" + file)
    }

    /// The storage directory's parent is not there at start (a USB disk not mounted yet): the
    /// agent does not make it, says once that it waits, keeps the event that comes meanwhile
    /// in memory, and writes it as a clip once the disk is there; the next event is recorded
    /// as usual.
    @Test func aStorageDirectoryThatIsNotThereYetIsWaitedFor() throws {
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let disk = dir.file("usb")
        let storage = disk + "/clips"
        let (feeder, agent) = try fedAgent(Self.twoEvents, in: dir, storage: storage)
        try feeder.feed(until: 8)
        // Nothing but the log says the clip is held in memory.
        try #require(
            agent.waitFor("msg=\"clip kept in memory until the storage directory is back\"", timeout: 120) != nil,
            "\(agent.output)")
        #expect(!FileManager.default.fileExists(atPath: disk), "the mount point was made")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
        // Back: the clip held is written and journaled.
        try #require(agent.waitUntil(timeout: 120) { journalRecords(in: storage).count == 1 }, "\(agent.output)")
        try feeder.feed(until: 24)
        feeder.close()
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let output = agent.output

        let waiting = logLines(
            output, "storage directory unavailable; clips wait for it — is the disk mounted and writable?")
        #expect(waiting.count == 1 && waiting.allSatisfy { logValue($0, "level") == "warning" }, "\(output)")
        let held = logLines(output, "the storage directory is unavailable; the clip is kept in memory until it is back")
        #expect(held.count == 1 && held.allSatisfy { logValue($0, "event") == "1" }, "\(output)")
        let fromMemory = logLines(output, "clip written from memory; the storage directory is back")
        #expect(fromMemory.count == 1, "\(output)")
        #expect(logLines(output, "clip not recorded").isEmpty, "\(output)")
        let saved = logLines(output, "clip saved").compactMap { logValue($0, "file") }
        try #require(saved.count == 2, "\(output)")
        #expect(saved.first == fromMemory.first.flatMap { logValue($0, "file") })
        #expect(movieFiles(in: storage) == saved.sorted())
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == saved)
        for file in saved { try expectPlayable(storage + "/" + file) }
        #expect(!output.contains("level=error"), "\(output)")
    }

    /// A USB disk that goes away between events and comes back (here its mount point renamed
    /// away and back): the event while it is gone is kept in memory and written when it is
    /// back, so no event is lost; the directory is claimed again.
    @Test func aDiskThatGoesAwayAndComesBackLosesNoEvent() throws {
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let disk = dir.file("usb")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
        let storage = disk + "/clips"
        let footage = scene(seconds: 36, objects: [crossing(2, 5), crossing(14, 17), crossing(26, 29)])
        let (feeder, agent) = try fedAgent(footage, in: dir, storage: storage)
        try feeder.feed(until: 10)
        try #require(agent.waitUntil(timeout: 120) { journalRecords(in: storage).count == 1 }, "\(agent.output)")
        try FileManager.default.moveItem(atPath: disk, toPath: disk + ".away")
        try feeder.feed(until: 22)
        // Nothing but the log says the clip is held in memory.
        try #require(
            agent.waitFor("msg=\"clip kept in memory until the storage directory is back\"", timeout: 120) != nil,
            "\(agent.output)")
        try FileManager.default.moveItem(atPath: disk + ".away", toPath: disk)
        // Back: the clip held is written and journaled.
        try #require(agent.waitUntil(timeout: 120) { journalRecords(in: storage).count == 2 }, "\(agent.output)")
        try feeder.feed(until: 36)
        feeder.close()
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let output = agent.output

        let saved = logLines(output, "clip saved").compactMap { logValue($0, "file") }
        #expect(saved.count == 3, "\(output)")
        #expect(logLines(output, "clip written from memory; the storage directory is back").count == 1, "\(output)")
        #expect(movieFiles(in: storage) == saved.sorted())
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == saved)
        for file in saved { try expectPlayable(storage + "/" + file) }
        #expect((try? String(contentsOfFile: storage + "/.vigil.lock", encoding: .utf8)) == "\(agent.pid)\n")
        #expect(!output.contains("level=error"), "\(output)")
    }

    /// The clip's directory is removed while the clip is written: the clip is reported lost
    /// (an error with its times), never saved, and has no journal line; the next event is
    /// recorded.
    @Test func aClipRemovedWhileItIsWrittenIsLostNotSaved() throws {
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let storage = dir.file("clips")
        let (feeder, agent) = try fedAgent(Self.twoEvents, in: dir, storage: storage)
        try feeder.feed(until: 4)
        #expect(agent.waitUntil(timeout: 120) { !movieFiles(in: storage).isEmpty }, "\(agent.output)")
        let file = try #require(movieFiles(in: storage).first, "\(agent.output)")
        let day = storage + "/" + String(file.prefix { $0 != "/" })
        try FileManager.default.removeItem(atPath: day)
        try feeder.feed(until: 24)
        feeder.close()
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let output = agent.output

        let lost = logLines(output, "clip lost: its file was removed while it was written")
        #expect(
            lost.count == 1
                && lost.allSatisfy {
                    logValue($0, "level") == "error" && logValue($0, "file") == file && logValue($0, "start") != nil
                        && logValue($0, "end") != nil
                },
            "\(output)")
        let saved = logLines(output, "clip saved").compactMap { logValue($0, "file") }
        #expect(!saved.contains(file) && saved.count == 1, "\(output)")
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == saved)
        #expect(movieFiles(in: storage) == saved)
        for name in saved { try expectPlayable(storage + "/" + name) }
    }

    /// The storage directory is on a file system mounted read-only at start (a card the
    /// kernel remounted after an error, the lock file of an earlier run on it): the agent does
    /// not take it for another agent's (exit 75, restarted by systemd every 10 s for ever) but
    /// waits for it like a disk not mounted yet — said once, with the file system's own words
    /// — and records once it is writable again.
    @Test func aStorageDirectoryOnAReadOnlyFileSystemIsWaitedFor() throws {
        let fs = try SmallFileSystem(megabytes: 32)
        defer { fs.unmount() }
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let storage = fs.path + "/clips"
        try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: storage + "/.vigil.lock", contents: Data("4242\n".utf8)))
        try fs.remount(readOnly: true)
        let (feeder, agent) = try fedAgent(Self.twoEvents, in: dir, storage: storage)
        try feeder.feed(until: 8)
        // The warning is the behaviour under test: nothing but the log says it.
        let waiting = try #require(
            agent.waitFor(
                "msg=\"storage directory unavailable; clips wait for it — is the disk mounted and writable?\"",
                timeout: 120), "\(agent.output)")
        #expect(logValue(waiting, "error")?.contains("Read-only file system") == true, "\(waiting)")
        #expect(agent.isRunning, "\(agent.output)")
        try fs.remount(readOnly: false)
        // Back: the clip held meanwhile is written and journaled.
        try #require(agent.waitUntil(timeout: 120) { journalRecords(in: storage).count == 1 }, "\(agent.output)")
        try feeder.feed(until: 24)
        feeder.close()
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let output = agent.output

        #expect(
            logLines(
                output,
                "another agent records into this storage directory — stop it, or give this one another storage.path"
            )
            .isEmpty, "\(output)")
        #expect(
            logLines(output, "storage directory unavailable; clips wait for it — is the disk mounted and writable?")
                .count
                == 1, "\(output)")
        // The event while it was read-only was kept in memory and written once it was not.
        let saved = logLines(output, "clip saved").compactMap { logValue($0, "file") }
        #expect(saved.count == 2, "\(output)")
        #expect(logLines(output, "clip not recorded").isEmpty, "\(output)")
        #expect(movieFiles(in: storage) == saved.sorted())
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == saved)
        for file in saved { try expectPlayable(storage + "/" + file) }
        // The lock file the earlier run left holds this agent's pid now.
        #expect((try? String(contentsOfFile: storage + "/.vigil.lock", encoding: .utf8)) == "\(agent.pid)\n")
    }

    /// `events.jsonl` is a named pipe (someone's idea of a live feed): the agent neither
    /// blocks opening it (SIGTERM would not end that wait) nor stops recording. It moves it
    /// aside (renamed, not deleted), says so once as an error naming what it was, and writes
    /// a new journal; the clip is saved and journaled.
    @Test func aJournalThatIsANamedPipeIsMovedAsideAndRecordingGoesOn() throws {
        let dir = try TemporaryDirectory("vigil-faults-storage")
        defer { dir.remove() }
        let footage = try writeFootage(scene(seconds: 8, objects: [crossing(1, 5)]), to: dir.file("scene.y4m"))
        let storage = dir.file("clips")
        try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: false)
        #expect(mkfifo(storage + "/" + EventsJournal.name, 0o644) == 0)
        let agent = try AgentProcess(config: writeConfig(dir.file("vigil.conf"), footage: footage, storage: storage))
        let status = agent.waitForExit(timeout: 120)
        if status == nil {
            // Stuck opening the pipe: a writer that comes and goes lets it go.
            let fd = open(storage + "/" + EventsJournal.name, O_WRONLY | O_NONBLOCK)
            if fd >= 0 { close(fd) }
        }
        #expect(status == 0, "\(agent.output)")
        let output = agent.output

        let aside = storage + "/events.jsonl.not-a-file"
        let moved = logLines(
            output,
            "the events journal is not a regular file; moved aside, a new journal is written from the clips on disk")
        #expect(
            moved.count == 1
                && moved.allSatisfy {
                    logValue($0, "level") == "error" && logValue($0, "moved_to") == aside
                        && logValue($0, "error")?.contains("named pipe (FIFO)") == true
                }, "\(output)")
        #expect(isNamedPipe(aside))
        let saved = logLines(output, "clip saved").compactMap { logValue($0, "file") }
        #expect(saved.count == 1, "\(output)")
        #expect(try EventsJournal(directory: storage).records().records.map(\.file) == saved)
        #expect(logLines(output, "events journal not written").isEmpty, "\(output)")
        for file in saved { try expectPlayable(storage + "/" + file) }
    }
}
