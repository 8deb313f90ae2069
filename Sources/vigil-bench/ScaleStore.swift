// A storage directory of N clips, made fast as issue 43's reproduction made it: one real clip
// and its picture, recorded once by `vigil run` on its synthetic camera, hard-linked under day
// folders with the names the default file pattern makes (about 351 a day, going back in time
// from an hour ago), and an `events.jsonl` of one line per clip written by the journal's own
// encoder (`EventsJournal.line`). The scale rows (ScaleBench.swift) start the agent on it.

import Foundation
import POSIX
import Recorder

#if canImport(Glibc)
import Glibc
#endif

/// The clip every link of a made directory is: its movie, its picture and its journal record.
struct SampleClip {
    var movie: String
    var picture: String?
    var record: ClipRecord
    /// What retention counts for each link: the movie's size and its picture's.
    var totalBytes: Int64
}

enum ScaleStore {
    /// Clips a day, as the busy camera made (one day of it: 351 clips).
    static let clipsPerDay = 351

    /// Records one clip: `vigil run` on the synthetic camera's demo scene (something moves in
    /// 5 s after the start) at 640×480 until the first clip is saved, then SIGTERM. The clip,
    /// its picture and its journal line are moved to `dir`.
    static func recordSample(vigil: String, in dir: String) throws -> SampleClip {
        let storage = dir + "/sample-store"
        try? FileManager.default.removeItem(atPath: storage)
        let config = dir + "/sample.conf"
        try """
        camera = { device = "synthetic"; name = "\(benchCameraName)"; width = 640; height = 480; fps = 30.0; };
        recording = { pre_roll = 2.0; post_roll = 1.0; max_clip = 10.0; };
        storage = { path = "\(storage)"; min_free_mb = 1; };
        log = { level = "info"; stats_interval = 0; };
        """.write(toFile: config, atomically: true, encoding: .utf8)
        let agent = try MeasuredProcess(vigil, ["run", "--config", config], outputPath: dir + "/sample.log")
        let saved = agent.waitFor("msg=\"clip saved\"", timeout: 90)
        agent.child.signal(.terminate)
        let r = agent.wait()
        guard saved else {
            throw AgentRunError(description: "vigil run saved no clip on the synthetic camera in 90 s:\n\(r.output)")
        }
        let journal = try String(contentsOfFile: storage + "/" + EventsJournal.name, encoding: .utf8)
        guard let line = journal.split(separator: "\n").first else {
            throw AgentRunError(description: "vigil run saved a clip but wrote no journal line:\n\(r.output)")
        }
        var record = try JSONDecoder().decode(ClipRecord.self, from: Data(line.utf8))
        let movie = dir + "/sample.mov"
        try? FileManager.default.removeItem(atPath: movie)
        try FileManager.default.moveItem(atPath: storage + "/" + record.file, toPath: movie)
        var picture: String?
        if let snapshot = record.snapshot, FileManager.default.fileExists(atPath: storage + "/" + snapshot) {
            picture = dir + "/sample.jpg"
            try? FileManager.default.removeItem(atPath: dir + "/sample.jpg")
            try FileManager.default.moveItem(atPath: storage + "/" + snapshot, toPath: dir + "/sample.jpg")
        } else {
            record.snapshot = nil
        }
        try? FileManager.default.removeItem(atPath: storage)
        let size = { (path: String?) in
            Int64(
                (path.flatMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? NSNumber })?.int64Value
                    ?? 0)
        }
        return SampleClip(movie: movie, picture: picture, record: record, totalBytes: size(movie) + size(picture))
    }

    /// Makes `path` a storage directory of `count` clips, each a hard link to the sample (and
    /// its picture), the newest an hour ago and `86,400 / 351` s between them, and their
    /// journal. Returns the seconds it took.
    static func make(_ path: String, count: Int, sample: SampleClip) throws -> Double {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let naming = ClipNaming(
            pattern: "%Y-%m-%d/{camera}-%Y%m%d-%H%M%S.mov", camera: benchCameraName, timeZone: SystemTimeZone())
        let spacing = 86_400.0 / Double(clipsPerDay)
        let newest = Date().addingTimeInterval(-3600)
        let duration = sample.record.durationSeconds
        let preRoll = sample.record.preRollSeconds ?? 0
        return try time {
            guard FileManager.default.createFile(atPath: path + "/" + EventsJournal.name, contents: nil),
                let journal = FileHandle(forWritingAtPath: path + "/" + EventsJournal.name)
            else { throw UsageError("cannot create \(path)/\(EventsJournal.name)") }
            defer { try? journal.close() }
            var lines: [UInt8] = []
            var days = Set<String>()
            // Oldest first, as the agent appends them.
            for n in stride(from: count - 1, through: 0, by: -1) {
                // Whole seconds: the pattern names a clip to the second.
                let start = Date(
                    timeIntervalSince1970: (newest.timeIntervalSince1970 - Double(n) * spacing).rounded(.down))
                let file = naming.relativePath(for: start)
                let day = (file as NSString).deletingLastPathComponent
                if days.insert(day).inserted {
                    try FileManager.default.createDirectory(
                        atPath: path + "/" + day, withIntermediateDirectories: true)
                }
                // A file system counts a file's links (ext4: 65,000 at most): a copy of the
                // sample for each 50,000.
                let copy = n / 50_000
                try hardLink(try sampleCopy(sample.movie, copy), path + "/" + file)
                var record = sample.record
                record.file = file
                record.camera = benchCameraName
                record.start = ClipRecord.timestamp(start, timeZone: SystemTimeZone())
                record.end = ClipRecord.timestamp(start.addingTimeInterval(duration), timeZone: SystemTimeZone())
                record.triggerTime = ClipRecord.timestamp(start.addingTimeInterval(preRoll), timeZone: SystemTimeZone())
                if let picture = sample.picture {
                    let snapshot = ClipNaming.snapshotPath(of: file)
                    try hardLink(try sampleCopy(picture, copy), path + "/" + snapshot)
                    record.snapshot = snapshot
                }
                lines += try EventsJournal.line(record)
                if lines.count > 1 << 20 {
                    try journal.write(contentsOf: lines)
                    lines.removeAll(keepingCapacity: true)
                }
            }
            try journal.write(contentsOf: lines)
        }
    }

    /// The sample file `path`, or its `n`th copy beside it (made when missing).
    static func sampleCopy(_ path: String, _ n: Int) throws -> String {
        guard n > 0 else { return path }
        let copy = "\(path).\(n)"
        if !FileManager.default.fileExists(atPath: copy) {
            try FileManager.default.copyItem(atPath: path, toPath: copy)
        }
        return copy
    }

    /// `link(2)`: a second name for the same file (no copy: the disk holds the sample once or twice).
    static func hardLink(_ existing: String, _ new: String) throws {
        guard link(existing, new) == 0 else {
            let code = errno
            throw UsageError(
                "cannot make \(new) a link to \(existing): \(String(cString: strerror(code)))"
                    + (code == EXDEV ? " — the bench's directory must be on one file system" : ""))
        }
    }
}
