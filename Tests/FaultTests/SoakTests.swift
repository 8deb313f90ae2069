import Foundation
import QuickTime
import Recorder
import Storage
import TestSupport
import Testing

/// The agent on a long stream of camera time, fed through a pipe as fast as it reads (an hour
/// passes in minutes), with two events every 10 s and a small cap on the clip store. Its
/// memory and open file descriptors must stay flat after the first minutes, the store within
/// its cap, and every clip left must be valid.
///
/// `make test-faults` runs 10 minutes of camera time; `make soak` an hour
/// (VIGIL_SOAK_SECONDS=3600). The figures are printed.
@Suite(.serialized) struct SoakTests {
    static var seconds: Double {
        ProcessInfo.processInfo.environment["VIGIL_SOAK_SECONDS"].flatMap(Double.init) ?? 600
    }
    static let capMB = 3

    struct Sample {
        var time: Double
        var rssKB: Int
        var fds: Int
        var storeBytes: Int64
    }

    @Test func anHourOfEventsLeavesMemoryFilesAndDiskFlat() throws {
        let seconds = Self.seconds
        let dir = try TemporaryDirectory("vigil-faults-soak")
        defer { dir.remove() }
        let pipe = dir.file("camera.y4m")
        guard mkfifo(pipe, 0o644) == 0 else { throw ToolError.notFound("mkfifo \(pipe)") }
        let storage = dir.file("clips")
        let config = try writeConfig(
            dir.file("vigil.conf"), footage: pipe, storage: storage,
            recording: "pre_roll = 1.0; post_roll = 1.0; max_clip = 10.0;",
            storageExtra: "min_free_mb = 1; max_size_mb = \(Self.capMB);")
        let started = Date()
        let agent = try AgentProcess(config: config)
        let feeder = Process()
        feeder.executableURL = URL(fileURLWithPath: builtExecutable("y4m-feeder"))
        feeder.arguments = [pipe, "320", "240", "30", String(seconds)]
        feeder.standardError = FileHandle.standardError
        try feeder.run()

        // Four times a second: the agent's resident memory, its open descriptors, the clip store.
        var samples: [Sample] = []
        while agent.isRunning {
            if let r = processResources(agent.pid) {
                samples.append(
                    Sample(
                        time: Date().timeIntervalSince(started), rssKB: r.rssKB, fds: r.fds,
                        storeBytes: movieFiles(in: storage).reduce(Int64(0)) { total, file in
                            total
                                + ((try? FileManager.default.attributesOfItem(atPath: storage + "/" + file)[.size]
                                    as? NSNumber)?.int64Value ?? 0)
                        }))
            }
            usleep(250_000)
        }
        let status = agent.waitForExit(timeout: 60)
        feeder.waitUntilExit()
        let wall = Date().timeIntervalSince(started)
        let output = agent.output
        #expect(status == 0, "\(output.suffix(4000))")
        #expect(feeder.terminationStatus == 0)
        #expect(
            !output.contains("level=error") && !output.contains("level=warning"),
            "\(output.split(separator: "\n").filter { $0.contains("level=error") || $0.contains("level=warning") }.prefix(10))"
        )

        let saved = logLines(output, "clip saved")
        let deleted = logLines(output, "clip deleted")
        let stopped = logLines(output, "vigil stopped").last ?? ""
        let frames = Int(logValue(stopped, "frames_total") ?? "") ?? 0
        #expect(frames == Int(seconds * 30), "\(stopped)")
        // Two events in every 10 s of camera time.
        #expect(saved.count >= Int(seconds / 10) * 2, "\(saved.count) clips in \(seconds) s")

        // Flat after the warm-up (the first fifth): the last quarter is no higher than the
        // second (within 2 MB for the allocator). Descriptors: a clip's file and its
        // directory's are open for moments, so a sample may catch one more; a leak keeps them,
        // so the fewest open in the last quarter must be no more than the most in the second.
        try #require(samples.count >= 20, "only \(samples.count) samples: the run was too short to judge")
        let settled = Array(samples.dropFirst(samples.count / 5))
        let quarter = settled.count / 4
        let early = Array(settled[quarter..<(2 * quarter)]), late = Array(settled.suffix(quarter))
        let earlyRSS = early.map(\.rssKB).max() ?? 0, lateRSS = late.map(\.rssKB).max() ?? 0
        let earlyFDs = early.map(\.fds).max() ?? 0, lateFDs = late.map(\.fds).min() ?? 0
        #expect(lateRSS <= earlyRSS + 2048, "resident memory grew from \(earlyRSS) kB to \(lateRSS) kB")
        #expect(lateFDs <= earlyFDs, "open descriptors grew from at most \(earlyFDs) to at least \(lateFDs)")
        // The store: within its cap but for the clip being written (at most max_clip, 10 s).
        let cap = Int64(Self.capMB) << 20
        let largestClip = saved.compactMap { logValue($0, "bytes").flatMap(Int64.init) }.max() ?? 0
        let biggestStore = samples.map(\.storeBytes).max() ?? 0
        #expect(
            biggestStore <= cap + largestClip,
            "the store reached \(biggestStore) bytes (cap \(cap), largest clip \(largestClip))")
        let files = movieFiles(in: storage)
        let finalStore = files.reduce(Int64(0)) { total, file in
            total
                + ((try? FileManager.default.attributesOfItem(atPath: storage + "/" + file)[.size] as? NSNumber)?
                    .int64Value ?? 0)
        }
        #expect(finalStore <= cap)

        // Every clip left is complete and plays, and has its line in the journal, which holds
        // nothing else: it shrinks with retention instead of growing for ever.
        for file in files {
            #expect((try? MovieRepair.inspect(path: storage + "/" + file)) == .complete, "\(file)")
            try expectPlayable(storage + "/" + file)
        }
        let journal = try EventsJournal(directory: storage).records()
        #expect(journal.unreadableLines.isEmpty)
        #expect(
            Set(journal.records.map(\.file)) == Set(files),
            "journal: \(journal.records.count) lines, \(files.count) clips left")
        #expect(
            saved.count == deleted.count + files.count,
            "\(saved.count) saved, \(deleted.count) deleted, \(files.count) left")
        let journalBytes =
            (try? FileManager.default.attributesOfItem(atPath: storage + "/events.jsonl")[.size] as? NSNumber)?.intValue
            ?? 0

        func describe(_ values: [Int]) -> String {
            let sorted = values.sorted()
            return
                "min \(sorted.first ?? 0), median \(sorted.isEmpty ? 0 : sorted[sorted.count / 2]), max \(sorted.last ?? 0)"
        }
        print(
            """
            soak: \(Int(seconds)) s of camera time (320×240, 30 fps, \(frames) frames) in \(Int(wall)) s; \
            \(saved.count) clips saved, \(deleted.count) deleted by retention, \(files.count) left (\(finalStore) bytes, cap \(cap)); \
            journal \(journalBytes) bytes
              resident memory, kB — all: \(describe(samples.map(\.rssKB))); second quarter after warm-up: max \(earlyRSS); last quarter: max \(lateRSS)
              open descriptors — all: \(describe(samples.map(\.fds))); second quarter: max \(earlyFDs); last quarter: min \(lateFDs)
              clip store, bytes — max \(biggestStore) (cap \(cap) + largest clip \(largestClip)); at the end \(finalStore)
              over time: \(stride(from: 0, to: samples.count, by: max(1, samples.count / 12)).map { "\(Int(samples[$0].time))s \(samples[$0].rssKB)kB/\(samples[$0].fds)fd" }.joined(separator: " "))
            """)
    }
}
