import Foundation
import Media
import QuickTime
import Storage

/// What the durability protocol costs the writer thread: the same GOPs written as a clip in
/// `directory` (on the disk the benchmark runs from, not a tmpfs) two ways, in turn, three
/// rounds each — appended only (what a design that survives kills but not power cuts could
/// do: the kernel writes when it likes), and as the agent writes them (each fragment appended
/// hidden, fsynced, revealed) — then closed. Wall-clock time, since an fsync is time spent
/// waiting for the disk, not CPU.
func measureWriting(
    samples: [EncodedSample], video: VideoTrackFormat, column: String, directory: String, table: inout BenchTable
) throws {
    var gops: [GOP] = []
    for sample in samples {
        if var last = gops.last, last.append(sample) {
            gops[gops.count - 1] = last
        } else if let gop = GOP(keyframe: sample) {
            if let previous = gops.last { gops[gops.count - 1] = previous.ended(at: sample.pts) }
            gops.append(gop)
        }
    }
    guard gops.count >= 2 else { return }
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let description = MovieDescription(creationTime: Date(), video: video)
    var appendOnly: [Double] = [], synced: [Double] = [], closeAppendOnly: [Double] = [], closeSynced: [Double] = []
    for round in 0..<3 {
        for sync in [false, true] {
            let path = directory + "/write-\(sync ? "synced" : "append")-\(round).mov"
            try? FileManager.default.removeItem(atPath: path)
            let writer = try MovieWriter(path: path, description: description)
            let writing = try time {
                for gop in gops {
                    try writer.append(gop)
                    if sync { try writer.synchronize() }
                }
            }
            let closing = try time { try writer.close() }
            try? FileManager.default.removeItem(atPath: path)
            if sync {
                synced.append(writing * 1000 / Double(gops.count))
                closeSynced.append(closing * 1000)
            } else {
                appendOnly.append(writing * 1000 / Double(gops.count))
                closeAppendOnly.append(closing * 1000)
            }
        }
    }
    func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
    // The checksum each fragment carries, over the same payloads.
    let payloads = gops.map { $0.samples.flatMap(\.data) }
    let megabytes = Double(payloads.reduce(0) { $0 + $1.count }) / 1_000_000
    var crcTimes: [Double] = []
    for _ in 0..<5 {
        crcTimes.append(time { for p in payloads { _ = CRC32.checksum(p) } } * 1000 / megabytes)
    }
    table.record("fragment checksum (CRC-32)", unit: "ms/MB", column: column, value: median(crcTimes))
    table.record(
        "write a fragment (1 s), appended only", unit: "ms", column: column, value: median(appendOnly))
    table.record(
        "write a fragment: hidden, fsync, revealed (vigil)", unit: "ms", column: column, value: median(synced))
    table.record(
        "close after either (index, 3 fsyncs)", unit: "ms", column: column,
        value: median(closeSynced + closeAppendOnly))
    table.record(
        "the fsync's share of a second of writer time", unit: "%", column: column,
        value: (median(synced) - median(appendOnly)) / 10)
}
