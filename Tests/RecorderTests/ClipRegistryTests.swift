import Foundation
import Media
import QuickTime
import Synchronization
import TestSupport
import Testing

@testable import Recorder

/// Rule 4: retention sees every clip the agent wrote — the journal is the registry of its own
/// files — and still never anything else.
@Suite struct ClipRegistryTests {
    let utc = TimeZone(identifier: "UTC")!
    let base = Date(timeIntervalSince1970: 1_796_000_000)

    /// Clips of the current pattern, and older ones written under another pattern and camera
    /// name (named in the journal); a file with a clip-like name the journal does not know,
    /// and links and names that lead out, which the journal names.
    @Test func retentionDeletesTheJournalsClipsOfEarlierPatternsOldestFirstAndNothingElse() throws {
        let storage = MemoryStorage(capacity: 100 << 20)
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        let earlier = ClipNaming(pattern: "cam/{camera}_%Y%m%d%H%M%S.mov", camera: "barn", timeZone: utc)
        let journal = EventsJournal(storage: storage)
        func record(_ file: String) -> ClipRecord {
            ClipRecord(
                file: file, camera: "x", start: "", end: "", cause: nil, triggerTime: nil, triggerSourceSeconds: nil,
                preRollSeconds: nil, durationSeconds: 1, frames: 1, audioFrames: 0, bytes: 1, peakScore: nil, part: nil)
        }
        var old: [String] = []
        var current: [String] = []
        for i in 0..<3 {
            let date = base.addingTimeInterval(Double(i) * 3600)
            old.append(earlier.relativePath(for: date))
            storage.put(old[i], [UInt8](repeating: 1, count: 5 << 20), modified: date)
            try journal.append(record(old[i]))
        }
        for i in 0..<3 {
            let date = base.addingTimeInterval(86_400 * 10 + Double(i) * 3600)
            current.append(naming.relativePath(for: date))
            storage.put(current[i], [UInt8](repeating: 1, count: 5 << 20), modified: date)
            if i < 2 { try journal.append(record(current[i])) }  // the last one lost its line
        }
        // Not the agent's: an earlier-pattern name the journal does not know, a link, names
        // leading out, and the journal itself, even when a (corrupt) line names them.
        let stranger = earlier.relativePath(for: base.addingTimeInterval(-3600))
        storage.put(stranger, [UInt8](repeating: 1, count: 1 << 20), modified: base.addingTimeInterval(-86_400 * 100))
        storage.link("cam/barn_20261101000000.mov")
        storage.put("events.jsonl.new", [1], modified: base.addingTimeInterval(-86_400 * 100))
        storage.put(".vigil.lock", [1], modified: base.addingTimeInterval(-86_400 * 100))
        for name in [
            "cam/barn_20261101000000.mov", "../escape.mov", EventsJournal.name, "events.jsonl.new", ".vigil.lock",
        ] {
            try journal.append(record(name))
        }

        let store = ClipStore(storage: storage, naming: naming)
        #expect(try store.clips().map(\.relativePath) == (old + current).sorted())

        // By age: the earlier clips are 10 days older; they go, oldest first.
        let byAge = store.sweep(
            RetentionPolicy(maxAgeDays: 5, maxSize: nil, minFree: 0), now: base.addingTimeInterval(86_400 * 11),
            protected: [])
        #expect(byAge.errors.isEmpty)
        #expect(byAge.deleted.map(\.clip.relativePath) == old)
        // By size, across both: the current clips, oldest first (the newest stays), never the others.
        let bySize = store.sweep(
            RetentionPolicy(maxAgeDays: nil, maxSize: 6 << 20, minFree: 0), now: base, protected: [])
        #expect(bySize.deleted.map(\.clip.relativePath) == Array(current.prefix(2)))
        #expect(
            storage.fileNames == [current[2], ".vigil.lock", "events.jsonl", "events.jsonl.new", stranger].sorted())
        #expect(throws: FileError.self) {
            try store.delete(StoredFile(relativePath: stranger, size: 0, modified: base))
        }
        for name in ["events.jsonl.new", ".vigil.lock"] {
            #expect(throws: FileError.self) {
                try store.delete(StoredFile(relativePath: name, size: 0, modified: base))
            }
        }
        #expect(storage.exists(stranger) && storage.exists("cam/barn_20261101000000.mov"))
    }

    /// A journal that cannot be read: retention still deletes the clips of the pattern (a full
    /// disk must always free space), and says why it deleted no others.
    @Test func aJournalThatCannotBeReadLeavesThePatternsClipsToRetention() throws {
        let memory = MemoryStorage(capacity: 100 << 20)
        let naming = ClipNaming(pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: "shed", timeZone: utc)
        let clip = naming.relativePath(for: base)
        let newest = naming.relativePath(for: base.addingTimeInterval(60))
        memory.put(clip, [1], modified: base)
        memory.put(newest, [1], modified: base.addingTimeInterval(60))
        memory.put("cam/barn_20261101000000.mov", [1], modified: base)
        memory.put(EventsJournal.name, Array("{\"file\":\"cam/barn_20261101000000.mov\",\"x\":1}\n".utf8))
        let problem = FileError(path: memory.path(EventsJournal.name), operation: "read", reason: "I/O error")
        let storage = JournalReadHook(memory) { _ throws(FileError) in throw problem }
        let store = ClipStore(storage: storage, naming: naming)
        #expect(try store.clips().map(\.relativePath) == [clip, newest])
        let sweep = store.sweep(
            RetentionPolicy(maxAgeDays: 1, maxSize: nil, minFree: 0), now: base.addingTimeInterval(86_400 * 2),
            protected: [])
        #expect(sweep.deleted.map(\.clip.relativePath) == [clip])
        #expect(sweep.errors == [problem])
        #expect(memory.fileNames == ["cam/barn_20261101000000.mov", EventsJournal.name, newest].sorted())
    }
}
