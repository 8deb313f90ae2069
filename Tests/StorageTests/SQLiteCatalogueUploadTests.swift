import Foundation
import Recorder
import Storage
import TestSupport
import Testing

/// Upload states in a real SQLite file: many written in one transaction, read back a page of
/// names at a time (what the upload sink walks at start), a page by state through its index,
/// and a catalogue opened read only beside the one that writes (`vigil clips` beside the agent).
@Suite struct SQLiteCatalogueUploadTests {
    @Test func statesWrittenAtOnceAreWalkedAPageOfNamesAtATime() throws {
        let directory = try TemporaryDirectory("vigil-catalogue-uploads")
        defer { directory.remove() }
        let catalogue = try SQLiteCatalogue(path: directory.file(CatalogueFile.name))
        let entries = (0..<2500).map { SQLiteCatalogueTests.entry($0, start: 1_796_428_800 + Double($0) * 60) }
        try catalogue.add(entries)
        var states: [(file: String, state: UploadState?)] = []
        for (index, entry) in entries.enumerated() {
            switch index % 4 {
            case 0: states.append((entry.file, .uploaded(url: "s3://clips/" + entry.file)))
            case 1: states.append((entry.file, .waiting))
            case 2: states.append((entry.file, .failed(reason: "PUT: 403")))
            default: break
            }
        }
        states.append((file: "2026-01-01/none.mov", state: .waiting))  // no entry: no error
        try catalogue.setUploads(states)

        var walked: [(file: String, state: UploadState?)] = []
        var pages = 0
        var after: String?
        while true {
            let page = try catalogue.uploads(after: after, limit: 1000)
            guard let last = page.last else { break }
            pages += 1
            walked += page
            after = last.file
        }
        #expect(pages == 3)
        #expect(walked.map(\.file) == entries.map(\.file).sorted())
        let byFile = Dictionary(uniqueKeysWithValues: states.map { ($0.file, $0.state) })
        #expect(walked.allSatisfy { byFile[$0.file].flatMap { $0 } == $0.state })

        // A page by state, newest first; and beside the writer, a reader that opened read only.
        let reader = try SQLiteCatalogue(path: catalogue.path, readOnly: true)
        let failed = try reader.page(ClipQuery(upload: "failed", limit: 3))
        #expect(failed.entries.map(\.file) == [entries[2498].file, entries[2494].file, entries[2490].file])
        #expect(failed.entries.first?.upload == .failed(reason: "PUT: 403"))
        try catalogue.setUpload(.uploaded(url: "s3://x"), of: entries[2498].file)
        #expect(try reader.page(ClipQuery(upload: "failed", limit: 1)).entries.map(\.file) == [entries[2494].file])
    }
}
