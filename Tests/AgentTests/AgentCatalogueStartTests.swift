import AgentTestSupport
import Capture
import Foundation
import Media
import QuickTime
import Recorder
import TestSupport
import Testing

@testable import Agent

/// The start of an agent whose catalogue lists the clips: it looks at the clips the catalogue
/// says were being recorded, and at nothing else — no walk of the directory, no read of the
/// whole journal — whatever the number of clips; and retention deletes from the catalogue, a
/// batch at a time.
@Suite(.serialized) struct AgentCatalogueStartTests {
    /// A saved clip's record, as the agent writes it.
    static func record(_ file: String, at date: Date, _ summary: MovieSummary? = nil) -> ClipRecord {
        ClipRecord(
            file: file, camera: "yard", start: ClipRecord.timestamp(date), end: ClipRecord.timestamp(date),
            cause: .motion, triggerTime: ClipRecord.timestamp(date), triggerSourceSeconds: 1, preRollSeconds: 1,
            durationSeconds: summary?.duration.seconds ?? 0.8, frames: summary?.videoFrames ?? 20,
            audioFrames: summary?.audioFrames ?? 0, bytes: summary?.bytes ?? 1000, peakScore: 0.5, part: 1)
    }

    /// `count` clips an hour apart before `now`, written and entered as the agent enters them.
    static func saved(_ count: Int, before now: Date, into storage: MemoryStorage) throws -> [String] {
        let (dates, names) = AgentJournalTests.hourly(count, before: now)
        for (name, date) in zip(names, dates) {
            let summary = try TestClips.write(name, into: storage, created: date, gops: 1)
            try storage.enter(record(name, at: date, summary))
        }
        return names
    }

    /// Killed while it recorded: the next start repairs that clip, enters it and writes its
    /// line, without a walk of the directory or a read of the whole journal.
    @Test func aStartWithAWholeCatalogueLooksOnlyAtTheClipBeingRecorded() throws {
        let storage = MemoryStorage()
        let now = Date()
        let names = try Self.saved(12, before: now, into: storage)
        let first = try runAtStart(on: storage)
        #expect(first.errors.isEmpty, "\(first.errors)")
        let catalogue = try storage.openCatalogue()
        #expect(try catalogue.isSynchronized())

        let killed = AgentJournalTests.naming.relativePath(for: now.addingTimeInterval(-60))
        try catalogue.beginRecording(killed)
        try TestClips.writeInterrupted(killed, into: storage, created: now.addingTimeInterval(-60))
        let walks = storage.walks
        let journalReads = storage.reads(of: EventsJournal.name)
        let second = try runAtStart(on: storage)

        #expect(storage.walks == walks, "the start walked the directory")
        #expect(storage.reads(of: EventsJournal.name) == journalReads, "the start read the whole journal")
        #expect(second.output.contains("repaired an interrupted clip"), "\(second.output)")
        #expect(try catalogue.recording().isEmpty)
        #expect(try catalogue.entry(killed)?.record.repaired == true)
        #expect(try catalogue.totals().clips == names.count + 1)
        let journal = try EventsJournal(storage: storage).records()
        #expect(journal.records.map(\.file) == names + [killed])
        #expect(journal.unreadableLines.isEmpty)
        #expect(second.errors.isEmpty, "\(second.errors)")
    }

    /// Killed after a clip's file was finished and before it was entered (or finished since by
    /// `vigil repair`): the next start enters it from its movie and writes its line — still
    /// without a walk of the directory or a read of the whole journal.
    @Test func aClipFinishedButNeverEnteredIsEnteredFromItsMovieAtStart() throws {
        let storage = MemoryStorage()
        let now = Date()
        let names = try Self.saved(5, before: now, into: storage)
        _ = try runAtStart(on: storage)
        let catalogue = try storage.openCatalogue()
        let finished = AgentJournalTests.naming.relativePath(for: now.addingTimeInterval(-90))
        try catalogue.beginRecording(finished)
        let summary = try TestClips.write(finished, into: storage, created: now.addingTimeInterval(-90))
        let walks = storage.walks
        let journalReads = storage.reads(of: EventsJournal.name)

        let agent = try runAtStart(on: storage)
        #expect(storage.walks == walks, "the start walked the directory")
        #expect(storage.reads(of: EventsJournal.name) == journalReads, "the start read the whole journal")
        #expect(agent.events.notices(.journalRebuilt).isEmpty, "\(agent.output)")
        let entry = try #require(try catalogue.entry(finished))
        #expect(entry.record.rebuilt == true && entry.record.frames == summary.videoFrames)
        #expect(try catalogue.recording().isEmpty)
        #expect(try EventsJournal(storage: storage).records().records.map(\.file) == names + [finished])
        #expect(agent.events.clipsSaved.map(\.record.file) == [finished])
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }

    /// A line a power cut tore at the journal's end (its clip entered in the catalogue) is
    /// mended at the next start: the journal is rebuilt, and is whole.
    @Test func aLineTornAtTheJournalsEndIsMendedAtStart() throws {
        let storage = MemoryStorage()
        let now = Date()
        let names = try Self.saved(3, before: now, into: storage)
        _ = try runAtStart(on: storage)

        let last = AgentJournalTests.naming.relativePath(for: now.addingTimeInterval(-120))
        let summary = try TestClips.write(last, into: storage, created: now.addingTimeInterval(-120), gops: 1)
        let record = Self.record(last, at: now.addingTimeInterval(-120), summary)
        try storage.openCatalogue().add(CatalogueEntry(record: record))
        let line = try AgentJournalTests.line(record)
        storage.put(EventsJournal.name, (storage.contents(EventsJournal.name) ?? []) + line.prefix(40))

        let agent = try runAtStart(on: storage)
        #expect(agent.events.notices(.journalRebuilt).count == 1, "\(agent.output)")
        let journal = try EventsJournal(storage: storage).records()
        #expect(journal.unreadableLines.isEmpty)
        #expect(Set(journal.records.map(\.file)) == Set(names + [last]))
        #expect(agent.errors.isEmpty, "\(agent.errors)")

        // Whole now: the next start reads only its end.
        let reads = storage.reads(of: EventsJournal.name)
        let again = try runAtStart(on: storage)
        #expect(again.events.notices(.journalRebuilt).isEmpty, "\(again.output)")
        #expect(storage.reads(of: EventsJournal.name) == reads)
    }

    /// 250 clips older than `max_age_days`: retention deletes them from the catalogue, 100 at
    /// a time (the writer goes on between batches), every one but the newest saved, each
    /// taken out of the catalogue and told; no walk of the directory.
    @Test func retentionDeletesFromTheCatalogueABatchAtATime() throws {
        let storage = MemoryStorage()
        let now = Date()
        let old = now.addingTimeInterval(-40 * 86_400)
        var entries: [CatalogueEntry] = []
        for i in 0..<250 {
            let date = old.addingTimeInterval(Double(i) * 60)
            let name = AgentJournalTests.naming.relativePath(for: date)
            storage.put(name, [UInt8](repeating: 1, count: 1000), modified: date)
            entries.append(CatalogueEntry(record: Self.record(name, at: date)))
            try EventsJournal(storage: storage).append(entries[i].record)
        }
        let catalogue = try storage.openCatalogue()
        _ = try catalogue.synchronize(with: entries)
        let walks = storage.walks

        let agent = try runAtStart(on: storage, config: testConfig(storage: "max_age_days = 30;"))

        let batches = agent.events.all.compactMap { event -> Int? in
            if case .clipsDeleted(let deleted) = event { deleted.deletions.count } else { nil }
        }
        #expect(batches == [100, 100, 49], "\(agent.output)")
        #expect(Set(agent.events.deletions.map(\.clip.relativePath)) == Set(entries.dropLast().map(\.file)))
        #expect(try catalogue.totals().clips == 1)
        #expect(storage.fileNames.filter { $0.hasSuffix(".mov") } == [entries.last!.file])
        #expect(storage.walks == walks, "retention walked the directory")
        #expect(agent.errors.isEmpty, "\(agent.errors)")
    }
}
