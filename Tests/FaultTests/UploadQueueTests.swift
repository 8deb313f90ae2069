import Foundation
import Media
import Recorder
import Storage
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `vigil run` with an upload queue grown to 60 MB (a board that uploaded for years without a
/// restart), the server out of reach: the queue is read off the recording path, a line at a
/// time, so memory stays bounded, every clip starts with its pre-roll, and a stop is prompt.
@Suite struct UploadQueueTests {
    @Test func aQueueOf60MBKeepsMemoryBoundedAndClipsWhole() throws {
        let dir = try TemporaryDirectory("vigil-fault-queue")
        defer { dir.remove() }
        let storage = dir.file("clips")
        try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
        let queue = UploadQueues.large(bytes: 60 << 20, camera: "yard")
        #expect(FileManager.default.createFile(atPath: storage + "/uploads.jsonl", contents: Data(queue)))
        let footage = try writeFootage(
            scene(seconds: 24, objects: [crossing(3, 6), crossing(13, 16)]), to: dir.file("scene.y4m"))
        let (upload, unanswered) = try unansweredUpload(in: dir)
        defer { close(unanswered) }
        let agent = try AgentProcess(
            config: writeConfig(
                dir.file("vigil.conf"), footage: footage, storage: storage, realtime: true, extra: upload))
        func queueBytes() -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: storage + "/uploads.jsonl"))?[.size] as? Int) ?? .max
        }
        #expect(agent.waitUntil(timeout: 300) { journalRecords(in: storage).count >= 2 }, "\(agent.output)")
        // The queue read, and so written anew (on a busy machine reading it may take longer than
        // recording the clips).
        #expect(agent.waitUntil(timeout: 300) { queueBytes() < 1 << 20 }, "the queue was read: \(agent.output)")
        let peak = Self.peakResidentKB(agent.pid)
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        // The peak resident memory: the agent's own, not the queue's 60 MB many times over.
        print("a queue of 60 MB: peak resident \((peak ?? 0) >> 10) MB")
        #expect(peak.map { $0 < 200 << 10 } == true, "peak resident \(String(describing: peak)) kB")
        // Every clip begins with its pre-roll (1 s): nothing on the recording path waited for the queue.
        let records = try EventsJournal(storage: DiskStorage(root: storage)).records().records
        #expect(records.count == 2, "\(records)")
        for record in records {
            let start = try #require(ClipRecord.date(fromTimestamp: record.start))
            let trigger = try #require(record.triggerTime.flatMap(ClipRecord.date(fromTimestamp:)))
            #expect(trigger.timeIntervalSince(start) > 0.5, "\(record.file) starts at its trigger: \(record)")
        }
        #expect(queueBytes() < 1 << 20, "the queue is written anew, small: \(queueBytes()) bytes")
    }

    /// The highest resident memory of a running process so far (VmHWM, kB).
    static func peakResidentKB(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }
}
