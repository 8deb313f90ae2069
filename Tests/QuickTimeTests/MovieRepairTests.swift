import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import QuickTime

/// A small stream (64×48, a keyframe every 10 frames) so that a movie is a few kilobytes and
/// can be cut at many byte positions.
enum SmallFixture {
    static let stream: Result<H264TestStream, any Error> = Result {
        try H264TestStream.make(width: 64, height: 48, frames: 60, gop: 10, in: Fixture.directory)
    }

    static func time(_ i: Int) -> Timestamp { Timestamp(nanoseconds: 2_000_000_000 + Int64(i) * 40_000_000) }

    /// Writes the 60 frames (six GOPs) plus audio, each GOP's sound before it, each fragment
    /// synced as the agent does (`sync: false` leaves them all written but hidden, as a power
    /// cut before their sync would). Closed when asked (six fragments); otherwise the last GOP
    /// is still being recorded (five fragments on disk, its sound given) and is returned with
    /// the writer.
    static func write(
        to output: any MovieOutput, path: String, audio: Bool = true,
        close: Bool, sync: Bool = true
    ) throws -> (writer: MovieWriter, open: GOP?) {
        let s = try stream.get()
        let d = Fixture.description(
            s, rotation: .clockwise90, audio: audio ? AudioTrackFormat(sampleRate: 8000, channels: 1) : nil)
        let writer = try MovieWriter(output: output, path: path, description: d)
        var gops = s.gops(end: time(60), time: time)
        let open = close ? nil : gops.popLast()
        var frame = 0
        for gop in gops + (open.map { [$0] } ?? []) {
            for _ in gop.samples {
                if audio {
                    try writer.appendAudio(
                        sine(frames: 320, channels: 1, rate: 8000, startFrame: frame * 320), time: time(frame))
                }
                frame += 1
            }
            if gop != open {
                try writer.append(gop)
                if sync { try writer.synchronize() }
            }
        }
        if close { try writer.close() }
        return (writer, open)
    }

    static func file(_ name: String, close: Bool, audio: Bool = true, sync: Bool = true) throws -> String {
        let path = Fixture.directory.file(name)
        let output = try FileMovieOutput(creating: path)
        let (writer, _) = try write(to: output, path: path, audio: audio, close: close, sync: sync)
        if !close { writer.abandon() }
        return path
    }
}

func fileBytes(_ path: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: path) ?? Data()) }

/// Every box the file has at the top level, and whether any `moov` still holds an `mvex`.
func isNormalMovie(_ path: String) -> Bool {
    let types = topLevelTypes(path)
    guard types.filter({ $0 == "moov" }).count == 1, !types.contains("moof") else { return false }
    // The one moov is the last box: it must not announce fragments.
    let bytes = fileBytes(path)
    guard let moovStart = lastBoxOffset(bytes) else { return false }
    return !bytes[moovStart...].windows(ofCount: 4).contains { $0.elementsEqual("mvex".utf8) }
}

private func lastBoxOffset(_ bytes: [UInt8]) -> Int? {
    var offset = 0, last: Int?
    while offset + 8 <= bytes.count {
        let size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        guard size >= 8 else { return nil }
        last = offset
        offset += size
    }
    return last
}

extension Collection {
    func windows(ofCount n: Int) -> [SubSequence] {
        guard count >= n else { return [] }
        var result: [SubSequence] = []
        var start = startIndex
        var end = index(startIndex, offsetBy: n)
        while true {
            result.append(self[start..<end])
            if end == endIndex { break }
            formIndex(after: &start)
            formIndex(after: &end)
        }
        return result
    }
}

@Suite struct MovieRepairTests {
    @Test func completeMovieIsLeftAlone() throws {
        let path = try SmallFixture.file("complete.mov", close: true)
        let before = fileBytes(path)
        #expect(try MovieRepair.inspect(path: path) == .complete)
        #expect(try MovieRepair.repair(path: path) == nil)
        #expect(fileBytes(path) == before)
        #expect(isNormalMovie(path))
        #expect(try expectPlayable(path).video?["nb_frames"] == "60")
    }

    @Test func interruptedMovieBecomesTheSameMovieACloseWouldHaveWritten() throws {
        let closed = try SmallFixture.file("reference.mov", close: true)
        let open = try SmallFixture.file("interrupted.mov", close: false)
        // Abandoned after the last frame: five GOPs are on disk, the sixth was still open.
        #expect(try MovieRepair.inspect(path: open) == .interrupted(fragments: 6 - 1))
        let report = try #require(try MovieRepair.repair(path: open))
        #expect(report.fragments == 5)
        #expect(report.videoFrames == 50)
        #expect(report.discardedBytes == 0)
        #expect(isNormalMovie(open))
        let probe = try expectPlayable(open)
        #expect(probe.video?["nb_frames"] == "50")
        #expect(probe.video?["nb_read_packets"] == "50")
        #expect(probe.videoRotation == -90)
        // Each fragment carries the audio that arrived before it was written.
        #expect(probe.audio?["duration_ts"] == "\(50 * 320)")
        #expect(try frameHashes(open) == Array(try frameHashes(closed).prefix(50)))
        // A second repair finds nothing to do.
        let repaired = fileBytes(open)
        #expect(try MovieRepair.repair(path: open) == nil)
        #expect(fileBytes(open) == repaired)
    }

    /// Cuts a fragmented movie at many byte positions (every byte at the start and around each
    /// box boundary, a stride elsewhere) and repairs each cut.
    @Test func repairsACutAtAnyByte() throws {
        let full = fileBytes(try SmallFixture.file("cut-source.mov", close: false, audio: true))
        let scratch = Fixture.directory.file("cut.mov")
        // Where each fragment (moof+mdat) ends, from an independent scan of the file.
        var boundaries: [Int] = []
        var offset = 0
        while offset + 8 <= full.count {
            boundaries.append(offset)
            offset += full[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        }
        boundaries.append(full.count)
        let types = topLevelTypes(Fixture.directory.file("cut-source.mov"))
        let fragmentEnds = boundaries.indices.dropFirst().filter { types[$0 - 1] == "mdat" }.map { boundaries[$0] }
        #expect(fragmentEnds.count == 5)

        var cuts = Set(0..<min(full.count, 1500))
        for b in boundaries { cuts.formUnion(max(0, b - 12)...min(full.count, b + 12)) }
        cuts.formUnion(stride(from: 0, through: full.count, by: 41))
        var checkedWithFFmpeg = Set<Int>()
        for cut in cuts.sorted() {
            let prefix = Array(full[0..<cut])
            #expect(FileManager.default.createFile(atPath: scratch, contents: Data(prefix)))
            let complete = fragmentEnds.filter { $0 <= cut }.count
            do {
                let report = try MovieRepair.repair(path: scratch)
                #expect(complete > 0, "a cut at \(cut) before any complete fragment was repaired")
                #expect(report?.fragments == complete, "cut at \(cut)")
                #expect(report?.videoFrames == complete * 10, "cut at \(cut)")
                #expect(
                    report?.videoDuration == Timestamp.Duration(nanoseconds: Int64(complete) * 400_000_000),
                    "cut at \(cut)")
                #expect(report?.bytes == UInt64(fileBytes(scratch).count), "cut at \(cut)")
                #expect(isNormalMovie(scratch), "cut at \(cut)")
                #expect(
                    try MovieRepair.repair(path: scratch) == nil, "second repair of the cut at \(cut) changed something"
                )
                if checkedWithFFmpeg.insert(complete).inserted {
                    let probe = try expectPlayable(scratch)
                    #expect(probe.video?["nb_frames"] == "\(complete * 10)")
                }
            } catch let error as MovieRepairError {
                #expect(complete == 0, "cut at \(cut) with \(complete) complete fragments: \(error)")
                #expect(fileBytes(scratch) == prefix, "a failed repair changed the file (cut at \(cut))")
                #expect(error.problem.contains("nothing to recover"), "\(error)")
                // Only the start of the first write: the agent may delete it at its next start.
                #expect(error.kind == .nothingRecorded, "cut at \(cut): \(error)")
            }
        }
        #expect(checkedWithFFmpeg.count == 5)
    }

    /// A close that stops after any of its steps (a kill, a power cut) leaves a file that
    /// plays in every reader — at worst the fragmented movie with its oldest fragments, never
    /// a movie with no frame — and repair finishes it into exactly the movie a full close
    /// writes, with every frame.
    @Test func interruptedCloseIsFinishedByRepair() throws {
        let reference = try SmallFixture.file("close-reference.mov", close: true)
        let expected = fileBytes(reference)
        let allFrames = try #require(Int(try expectPlayable(reference)?.video?["nb_frames"] ?? ""))
        var step = 0
        var fewest = Int.max
        while true {
            step += 1
            let path = Fixture.directory.file("close-\(step).mov")
            let output = FailingOutput(try FileMovieOutput(creating: path))
            let (writer, open) = try SmallFixture.write(to: output, path: path, close: false)
            output.stop(from: output.operations + step)
            do {
                // What the agent does at the end of a clip: the last GOP, then the close.
                try writer.append(try #require(open))
                try writer.close()
                // The close got through every step: the whole sequence has been covered.
                #expect(fileBytes(path) == expected)
                break
            } catch {
                writer.abandon()
            }
            let probe = try expectPlayable(path, "after close step \(step):")
            let visible = Int(probe?.video?["nb_read_packets"] ?? "") ?? 0
            fewest = min(fewest, visible)
            // Nil once the last hide is written: only its sync was left.
            let report = try MovieRepair.repair(path: path)
            #expect(report.map { $0.videoFrames == allFrames } ?? true, "after close step \(step)")
            #expect(fileBytes(path) == expected, "repair after close step \(step) wrote a different movie")
        }
        #expect(step > 5)
        // The first fragment of the small fixture holds ten frames.
        #expect(fewest >= 10, "a stopped close left a file showing \(fewest) frames")
    }

    @Test func filesItDoesNotUnderstandAreLeftUntouched() throws {
        func check(
            _ name: String, _ bytes: [UInt8], _ expectedProblem: String, kind: MovieRepairError.Kind = .notRepairable
        ) {
            let path = Fixture.directory.file(name)
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            do {
                try MovieRepair.repair(path: path)
                Issue.record("\(name) was repaired")
            } catch {
                #expect(error.problem.contains(expectedProblem), "\(name): \(error)")
                #expect(error.kind == kind, "\(name): \(error)")
                #expect(error.description.hasPrefix(path))
            }
            #expect(fileBytes(path) == bytes, "\(name) was changed")
        }
        check("empty.mov", [], "the file is empty", kind: .nothingRecorded)
        check("text.mov", Array("hello, this is not a movie\n".utf8), "not a QuickTime movie")
        check("short-text.mov", Array("hello".utf8), "not a QuickTime movie")
        let full = fileBytes(try SmallFixture.file("header-only-source.mov", close: false))
        let headerEnd = Int(full[20..<24].reduce(0) { $0 << 8 | Int($1) }) + 20
        check("header-only.mov", Array(full[0..<headerEnd]), "nothing to recover", kind: .nothingRecorded)
        check("ftyp-only.mov", Array(full[0..<20]), "nothing to recover", kind: .nothingRecorded)
        check("ftyp-cut.mov", Array(full[0..<11]), "nothing to recover", kind: .nothingRecorded)
        // A power cut on exFAT kept the length of a clip whose data never reached the disk.
        check("zeros.mov", [UInt8](repeating: 0, count: 9002), "are all zero", kind: .nothingRecorded)
        check(
            "zeros-then-data.mov", [UInt8](repeating: 0, count: 9000) + [1, 2], "not a QuickTime movie")
        // Someone else's movie with our kind of name: not ours to call empty.
        check(
            "other.mov",
            Array(
                [
                    Array(full[0..<20]), [0, 0, 0, 16], Array("mdat".utf8), [UInt8](repeating: 7, count: 8),
                    [0, 0, 0, 8], Array("wide".utf8),
                ].joined()),
            "no movie header")
        // A fragment that points outside its media data.
        var broken = full
        let moof = headerEnd
        let mdatSizeOffset = moof + full[moof..<moof + 4].reduce(0) { $0 << 8 | Int($1) }
        broken[mdatSizeOffset + 3] = 8  // shrink the first mdat to its header
        check("broken.mov", broken, "points outside its media data")
        #expect(throws: MovieRepairError.self) { try MovieRepair.repair(path: Fixture.directory.file("missing.mov")) }
    }

    /// Flips each byte of the header and the first fragment in turn: repair must never crash,
    /// and whenever it gives up the file must be exactly as it was.
    @Test func corruptedBytesNeverCrashRepair() throws {
        let full = fileBytes(try SmallFixture.file("corrupt-source.mov", close: false))
        let scratch = Fixture.directory.file("corrupt.mov")
        let types = topLevelTypes(Fixture.directory.file("corrupt-source.mov"))
        #expect(types.starts(with: ["ftyp", "moov", "moof", "mdat"]))
        let headerAndFirstMoof = min(full.count, 2000)
        var repaired = 0
        for i in 0..<headerAndFirstMoof {
            var bytes = full
            bytes[i] ^= 0xFF
            #expect(FileManager.default.createFile(atPath: scratch, contents: Data(bytes)))
            do {
                if try MovieRepair.repair(path: scratch) != nil { repaired += 1 }
            } catch {
                #expect(fileBytes(scratch) == bytes, "a failed repair changed the file (byte \(i) flipped)")
            }
        }
        // Most flips land in fields repair does not depend on (sample payloads, matrices, names).
        #expect(repaired > 0)
    }

    /// Sample data past 4 GiB needs 64-bit chunk offsets: a sparse 4 GiB `free` box between the
    /// header and the fragments puts every sample there without using the disk.
    @Test func repairUsesCO64PastFourGiB() throws {
        let full = fileBytes(try SmallFixture.file("big-source.mov", close: false))
        let headerEnd = Int(full[20..<24].reduce(0) { $0 << 8 | Int($1) }) + 20
        let path = Fixture.directory.file("big.mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(full[0..<headerEnd])))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        let gap: UInt64 = 1 << 32
        try handle.seekToEnd()
        try handle.write(
            contentsOf: [0, 0, 0, 1] + Array("free".utf8)
                + (0..<8).map { UInt8(truncatingIfNeeded: gap >> (56 - 8 * UInt64($0))) })
        try handle.seek(toOffset: UInt64(headerEnd) + gap)
        try handle.write(contentsOf: full[headerEnd...])  // fragments use moof-relative offsets
        try handle.close()
        defer { try? FileManager.default.removeItem(atPath: path) }

        let report = try #require(try MovieRepair.repair(path: path))
        #expect(report.videoFrames == 50)
        let bytes = try FileMovieOutput(updating: path)
        let tail = try bytes.read(at: bytes.length - 4096, count: 4096)
        try bytes.close()
        #expect(tail.windows(ofCount: 4).contains { $0.elementsEqual("co64".utf8) })
        #expect(!tail.windows(ofCount: 4).contains { $0.elementsEqual("stco".utf8) })
        let probe = try expectPlayable(path)
        #expect(probe.video?["nb_frames"] == "50")
    }
}

/// A file output whose operations (numbered from 0, appends, overwrites and syncs alike) fail
/// as the test says: all from one on, the way a killed process or a power cut stops a close
/// part-way (`stop(from:)`), or one alone finding the disk full (`fullOnce(at:)`). A failed
/// operation leaves nothing of itself, as `FileMovieOutput`'s failed append does.
final class FailingOutput: MovieOutput {
    let inner: FileMovieOutput
    private(set) var operations = 0
    private var failure: (Int) -> FileError? = { _ in nil }

    init(_ inner: FileMovieOutput) { self.inner = inner }

    /// Every operation from `first` on fails.
    func stop(from first: Int) {
        failure = { [path = inner.path] in
            $0 >= first ? FileError(path: path, operation: "write", reason: "stopped for the test") : nil
        }
    }

    /// Operation `operation` finds the disk full; the others go through.
    func fullOnce(at operation: Int) {
        failure = { [path = inner.path] in
            $0 == operation
                ? FileError(path: path, operation: "write", reason: "no space left on the device", isOutOfSpace: true)
                : nil
        }
    }

    var length: UInt64 { inner.length }

    private func step() throws(FileError) {
        defer { operations += 1 }
        if let error = failure(operations) { throw error }
    }

    func append(_ bytes: [UInt8]) throws(FileError) {
        try step()
        try inner.append(bytes)
    }
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        try step()
        try inner.overwrite(at: offset, with: bytes)
    }
    func synchronize() throws(FileError) {
        try step()
        try inner.synchronize()
    }
    func close() throws(FileError) { try inner.close() }
}
