import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

/// `vigil clips --rescan` and the clip catalogue: the agent trusts a catalogue that lists the
/// clips (it does not walk the directory at start), so what was changed by hand is seen by a
/// rescan — a clip deleted, a clip copied in, a clip a kill left unfinished.
extension ClipsCommandTests {
    @Test func aRescanMakesTheCatalogueListTheClipsOnDiskAndMarksTheUnfinishedForRepair() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        let storage = fixture.storage
        var files: [String] = []
        for i in 0..<3 {
            let created = ClipsDirectory.created.addingTimeInterval(Double(i) * 3600)
            let name = fixture.naming.relativePath(for: created)
            let summary = try TestClips.write(name, into: storage, created: created, gops: 1)
            var record = Self.record(fixture, minutes: i * 60)
            record.bytes = summary.bytes
            try storage.enter(record)
            files.append(name)
        }
        // By hand: the first clip deleted, a clip copied in, and a clip a kill left unfinished.
        try storage.delete(files[0])
        let copied = fixture.naming.relativePath(for: ClipsDirectory.created.addingTimeInterval(4 * 3600))
        try TestClips.write(copied, into: storage, created: ClipsDirectory.created.addingTimeInterval(4 * 3600))
        let unfinished = fixture.naming.relativePath(for: ClipsDirectory.created.addingTimeInterval(5 * 3600))
        try TestClips.writeInterrupted(
            unfinished, into: storage, created: ClipsDirectory.created.addingTimeInterval(5 * 3600))

        let rescanned = try clips("--config", fixture.config, "--rescan")
        #expect(rescanned.status == 0, "\(rescanned.stderr)")
        #expect(
            rescanned.stderr.contains(
                "the clip catalogue lists the 3 clip(s) on disk (1 written, 1 removed); "
                    + "1 interrupted clip(s) are repaired when the agent starts"), "\(rescanned.stderr)")
        let catalogue = try storage.openCatalogue()
        #expect(try catalogue.entry(files[0]) == nil)
        #expect(try catalogue.entry(copied)?.record.rebuilt == true)
        #expect(try catalogue.recording() == [unfinished])
        #expect(try catalogue.isSynchronized())

        // The listing that follows is the catalogue's: newest first, the deleted clip gone.
        let listed = try clips("--config", fixture.config, "--json")
        #expect(listed.status == 0 && listed.stderr.isEmpty, "\(listed.stderr)")
        let named = listed.stdout.split(separator: "\n").compactMap { line -> String? in
            (try? JSONDecoder().decode(ClipRecord.self, from: Data(line.utf8)))?.file
        }
        #expect(named == [copied, files[2], files[1]], "\(listed.stdout)")
    }
}
