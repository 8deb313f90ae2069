import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

/// `vigil clips` with uploads: which clips are on the server, which wait, which the server
/// refused and the agent set aside.
extension ClipsCommandTests {
    @Test func saysWhichClipsAreUploadedWaitOrFailed() throws {
        let fixture = try ClipsDirectory()
        defer { fixture.dir.remove() }
        var files: [String] = []
        for i in 0..<3 {
            let created = ClipsDirectory.created.addingTimeInterval(Double(i) * 60)
            let name = fixture.naming.relativePath(for: created)
            let summary = try TestClips.write(name, into: fixture.storage, created: created, gops: 1)
            let start = ClipRecord.timestamp(created, timeZone: ClipsDirectory.utc)
            try EventsJournal(storage: fixture.storage).append(
                ClipRecord(
                    file: name, camera: "yard", start: start, end: start, cause: .motion, triggerTime: start,
                    triggerSourceSeconds: 1, preRollSeconds: 0, durationSeconds: summary.duration.seconds,
                    frames: summary.videoFrames, audioFrames: 0, bytes: summary.bytes, peakScore: 0.25, part: 1))
            files.append(name)
        }
        let at = "\"at\":\"2026-11-30T12:00:00.000Z\""
        let queue = [
            "{\(at),\"queued\":\"\(files[0])\"}", "{\(at),\"queued\":\"\(files[1])\"}",
            "{\(at),\"queued\":\"\(files[2])\"}",
            "{\(at),\"bytes\":1,\"seconds\":0.1,\"uploaded\":\"\(files[0])\",\"url\":\"s3://clips/yard/\(files[0])\"}",
            "{\(at),\"reason\":\"PUT: 403 AccessDenied\",\"set_aside\":\"\(files[1])\",\"tries\":5}",
        ]
        try (queue.joined(separator: "\n") + "\n").write(
            toFile: fixture.storage.path("uploads.jsonl"), atomically: true, encoding: .utf8)
        let listed = try clips("--config", fixture.config)
        #expect(listed.status == 0, "\(listed.stderr)")
        let rows = listed.stdout.split(separator: "\n").map(String.init)
        func row(_ file: String) -> String { rows.first { $0.hasSuffix(file) } ?? "" }
        #expect(row(files[0]).contains("uploaded"), "\(listed.stdout)")
        #expect(row(files[1]).contains("failed") && !row(files[1]).contains("waiting"), "\(listed.stdout)")
        #expect(row(files[2]).contains("waiting"), "\(listed.stdout)")
        #expect(rows.last?.contains("1 uploaded, 1 waiting, 1 failed") == true, "\(listed.stdout)")
    }
}
