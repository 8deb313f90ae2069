import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import QuickTime

/// A movie output that records what the writer does, in order: each append (where it landed
/// and its first bytes), each overwrite, each sync.
final class RecordingOutput: MovieOutput {
    enum Operation: Equatable {
        case append(Range<UInt64>, head: [UInt8])
        case overwrite(at: UInt64, [UInt8])
        case sync
    }
    let inner: FileMovieOutput
    var operations: [Operation] = []

    init(_ inner: FileMovieOutput) { self.inner = inner }

    var length: UInt64 { inner.length }
    func append(_ bytes: [UInt8]) throws(FileError) {
        operations.append(.append(inner.length..<inner.length + UInt64(bytes.count), head: bytes))
        try inner.append(bytes)
    }
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        operations.append(.overwrite(at: offset, bytes))
        try inner.overwrite(at: offset, with: bytes)
    }
    func synchronize() throws(FileError) {
        operations.append(.sync)
        try inner.synchronize()
    }
    func close() throws(FileError) { try inner.close() }
}

/// A movie output that stops at overwrite number `stopAt` (counting from 0) without making
/// it, and keeps what it was: where, and the bytes.
final class TearingOutput: MovieOutput {
    let inner: FileMovieOutput
    let stopAt: Int
    var overwrites = 0
    var stopped: (offset: UInt64, bytes: [UInt8])?

    init(_ inner: FileMovieOutput, stopAt: Int) {
        self.inner = inner
        self.stopAt = stopAt
    }

    var length: UInt64 { inner.length }
    func append(_ bytes: [UInt8]) throws(FileError) { try inner.append(bytes) }
    func overwrite(at offset: UInt64, with bytes: [UInt8]) throws(FileError) {
        defer { overwrites += 1 }
        if overwrites == stopAt {
            stopped = (offset, bytes)
            throw FileError(path: inner.path, operation: "write", reason: "stopped for the test")
        }
        try inner.overwrite(at: offset, with: bytes)
    }
    func synchronize() throws(FileError) { try inner.synchronize() }
    func close() throws(FileError) { try inner.close() }
}

/// The durability protocol (docs/ARCHITECTURE.md) as the writer and repair keep it: a fragment
/// is visible only once its payload is durable, a fragment whose payload never reached the
/// disk is dropped by repair, and a finished movie hides nothing that looks live.
@Suite struct DurabilityTests {
    /// Every fragment is appended typed `free`; the overwrite that reveals it as a `moof` comes
    /// after a sync issued after its append. Close syncs before it appends the index, syncs the
    /// index before it hides anything, and ends with a sync.
    @Test func aFragmentIsRevealedOnlyAfterItsPayloadIsSynced() throws {
        let path = Fixture.directory.file("durability-order.mov")
        let output = RecordingOutput(try FileMovieOutput(creating: path))
        _ = try SmallFixture.write(to: output, path: path, close: true)
        let ops = output.operations
        let file = fileBytes(path)
        let boxes = topLevelBoxes(file)
        let fragments = boxes.filter {
            $0.type == "free" && file[$0.offset + 12..<$0.offset + 16].elementsEqual("vgmf".utf8)
        }
        #expect(fragments.count == 6)
        var reveals = 0
        for fragment in fragments {
            let start = UInt64(fragment.offset)
            guard
                let appended = ops.firstIndex(where: {
                    if case .append(let range, _) = $0 { return range.contains(start) }
                    return false
                }),
                case .append(let range, let head) = ops[appended]
            else {
                Issue.record("no append wrote the fragment at \(start)")
                continue
            }
            let at = Int(start - range.lowerBound)
            #expect(head[at + 4..<at + 8].elementsEqual("free".utf8), "the fragment at \(start) was appended visible")
            for (i, op) in ops.enumerated() {
                guard case .overwrite(let offset, let bytes) = op, offset == start + 4, bytes == Array("moof".utf8)
                else { continue }
                reveals += 1
                #expect(
                    ops[appended..<i].contains(.sync),
                    "the fragment at \(start) was revealed before a sync after its append")
            }
        }
        // Each of the six revealed by the sync after it (the fixture syncs as the agent does).
        #expect(reveals == 6)
        // The close: sync, the index appended, sync, the boxes hidden, sync.
        guard let index = ops.lastIndex(where: { if case .append = $0 { return true } else { return false } }) else {
            Issue.record("nothing appended")
            return
        }
        #expect(index > 0 && ops[index - 1] == .sync)
        #expect(ops[index + 1] == .sync)
        #expect(ops.last == .sync)
        let hides = ops[(index + 2)...].dropLast()
        // Fragments six to two, newest first, then the header with the first fragment after it.
        #expect(hides.count == 6)
        #expect(hides.allSatisfy { if case .overwrite = $0 { return true } else { return false } })
    }

    /// A power cut can tear any in-place write: a box type that straddles a sector boundary is
    /// two sectors on the disk, and either may be kept ("foof": a reveal torn on exFAT). For
    /// every reveal and every hide the writer and its close make, and every way of keeping
    /// only the write's first or last bytes: repair takes every fragment the file holds — the
    /// same movie as without the write — and the contents reader calls the file finished only
    /// when repair does.
    @Test func aTornRevealOrHideLosesNoFragment() throws {
        // What the agent does: fragments synced and revealed as they come, the last GOP, the close.
        func record(_ output: any MovieOutput, _ path: String) throws {
            let (writer, open) = try SmallFixture.write(to: output, path: path, close: false)
            try writer.append(try #require(open))
            try writer.close()
        }
        let reference = RecordingOutput(try FileMovieOutput(creating: Fixture.directory.file("tear-reference.mov")))
        try record(reference, reference.inner.path)
        let overwrites = reference.operations.filter { if case .overwrite = $0 { true } else { false } }.count
        #expect(overwrites == 11)  // five reveals; five hides, and the header with the first fragment
        var states = 0
        for n in 0..<overwrites {
            // The file just before overwrite n, and the write itself.
            let before = Fixture.directory.file("tear-\(n)-before.mov")
            let output = TearingOutput(try FileMovieOutput(creating: before), stopAt: n)
            do {
                try record(output, before)
                Issue.record("overwrite \(n) never came")
                continue
            } catch {}
            let (offset, new) = try #require(output.stopped)
            let untouched = fileBytes(before)
            let old = Array(untouched[Int(offset)..<Int(offset) + new.count])
            let expected = try expectedRepair(before)
            var torn = Set<[UInt8]>()
            for k in 1..<new.count {
                torn.insert(Array(new[..<k] + old[k...]))
                torn.insert(Array(old[..<k] + new[k...]))
            }
            torn.remove(old)
            torn.remove(new)
            for (j, bytes) in torn.enumerated() {
                let path = Fixture.directory.file("tear-\(n)-\(j).mov")
                var file = untouched
                file.replaceSubrange(Int(offset)..<Int(offset) + bytes.count, with: bytes)
                #expect(FileManager.default.createFile(atPath: path, contents: Data(file)))
                let state = try MovieRepair.inspect(path: path)
                let report = try MovieRepair.repair(path: path)
                #expect(
                    (report == nil) == (state == .complete),
                    "overwrite \(n) torn (\(j)): \(state), \(String(describing: report))")
                #expect(
                    report?.videoFrames ?? expected.frames == expected.frames && report?.droppedFragments ?? 0 == 0,
                    "overwrite \(n) torn (\(j)): \(String(describing: report)), \(expected.frames) frames without the write"
                )
                if report != nil {
                    #expect(fileBytes(path) == expected.bytes, "overwrite \(n) torn (\(j)): repair wrote another movie")
                }
                #expect(try FFmpeg.decodeErrors(path).isEmpty, "overwrite \(n) torn (\(j))")
                try? FileManager.default.removeItem(atPath: path)
                states += 1
            }
            try? FileManager.default.removeItem(atPath: before)
        }
        print("torn writes: \(states) states from \(overwrites) overwrites")
        #expect(states > 4 * overwrites)
    }

    /// What repair makes of `path` (on a copy): its bytes and its video frames.
    private func expectedRepair(_ path: String) throws -> (bytes: [UInt8], frames: Int) {
        let copy = path + ".repaired"
        #expect(FileManager.default.createFile(atPath: copy, contents: Data(fileBytes(path))))
        defer { try? FileManager.default.removeItem(atPath: copy) }
        let report = try MovieRepair.repair(path: copy)
        if let report { return (fileBytes(copy), report.videoFrames) }
        let probe = try FFprobe.probe(copy)
        return (fileBytes(copy), Int(probe.video?["nb_read_packets"] ?? "") ?? -1)
    }

    /// A power cut after fragments were written but before their sync leaves them hidden.
    /// Their samples are whole: repair takes every one.
    @Test func hiddenFragmentsWithWholeSamplesAreTaken() throws {
        let reference = try frameHashes(try SmallFixture.file("hidden-reference.mov", close: true))
        let path = try SmallFixture.file("hidden.mov", close: false, sync: false)
        let types = topLevelTypes(path)
        #expect(!types.contains("moof"))
        #expect(types.filter { $0 == "free" }.count == 5)
        let report = try #require(try MovieRepair.repair(path: path))
        #expect(report.fragments == 5 && report.videoFrames == 50 && report.droppedFragments == 0)
        #expect(try expectPlayable(path).video?["nb_frames"] == "50")
        #expect(try frameHashes(path) == Array(reference.prefix(50)))
    }

    /// What a power cut leaves of a fragment appended but not yet synced: its boxes, and in
    /// place of its samples zeros or old blocks (stale data of a deleted file). Repair drops it
    /// as part of the tail, says so, and keeps every fragment before it.
    @Test(arguments: ["zeros", "stale", "stale-visible"])
    func aFragmentWhoseSamplesNeverReachedTheDiskIsDropped(fill: String) throws {
        let reference = try frameHashes(try SmallFixture.file("payload-reference-\(fill).mov", close: true))
        let source = try SmallFixture.file("payload-source-\(fill).mov", close: false)
        var bytes = fileBytes(source)
        let boxes = topLevelBoxes(bytes)
        let moofs = boxes.indices.filter { ["moof", "free"].contains(boxes[$0].type) && $0 > 1 }
        #expect(moofs.count == 5)
        let last = boxes[moofs[4]], mdat = boxes[moofs[4] + 1]
        // Written, not synced: still hidden (the old writer revealed it at once: "stale-visible").
        if fill != "stale-visible" {
            bytes.replaceSubrange(last.offset + 4..<last.offset + 8, with: Array("free".utf8))
        }
        var random = SplitMix64(seed: 14)
        for i in (mdat.offset + 8)..<(mdat.offset + mdat.size) {
            bytes[i] = fill == "zeros" ? 0 : UInt8(truncatingIfNeeded: random.next())
        }
        let path = Fixture.directory.file("payload-\(fill).mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let report = try #require(try MovieRepair.repair(path: path))
        #expect(report.fragments == 4 && report.videoFrames == 40)
        #expect(report.droppedFragments == 1)
        #expect(report.dropReason?.contains("did not reach the disk") == true, "\(report.dropReason ?? "")")
        #expect(report.discardedBytes == UInt64(last.size + mdat.size))
        #expect(try expectPlayable(path).video?["nb_frames"] == "40")
        #expect(try frameHashes(path) == Array(reference.prefix(40)))
    }

    /// A power cut can keep some pages of a fragment and not others: one page of zeros in the
    /// middle of a picture leaves every length prefix in place, so only the fragment's own
    /// checksum tells. Repair drops it.
    @Test func aFragmentWithOnePageMissingIsDropped() throws {
        let source = try SmallFixture.file("page-source.mov", close: false)
        var bytes = fileBytes(source)
        let boxes = topLevelBoxes(bytes)
        let mdats = boxes.filter { $0.type == "mdat" }
        let last = mdats[mdats.count - 1]
        // Inside the first sample (the IDR, far longer than the 64 bytes zeroed), past its first NAL header.
        let at = last.offset + 8 + 600
        for i in at..<(at + 64) { bytes[i] = 0 }
        let path = Fixture.directory.file("page.mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let report = try #require(try MovieRepair.repair(path: path))
        #expect(report.fragments == 4 && report.droppedFragments == 1)
        #expect(report.dropReason?.contains("checksum") == true, "\(report.dropReason ?? "")")
        #expect(try expectPlayable(path).video?["nb_frames"] == "40")
    }

    /// Damage followed by fragments that reached the disk is not what a power cut leaves:
    /// repair leaves the file as it is rather than cut away the good fragments after it.
    @Test func damageBeforeGoodFragmentsLeavesTheFileAlone() throws {
        var bytes = fileBytes(try SmallFixture.file("middle-source.mov", close: false))
        let boxes = topLevelBoxes(bytes)
        let mdats = boxes.filter { $0.type == "mdat" }
        #expect(mdats.count == 5)
        for i in (mdats[2].offset + 8)..<(mdats[2].offset + mdats[2].size) { bytes[i] = 0 }
        let path = Fixture.directory.file("middle.mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        #expect(throws: MovieRepairError.self) { try MovieRepair.repair(path: path) }
        do {
            try MovieRepair.repair(path: path)
        } catch {
            #expect(error.kind == .notRepairable)
            #expect(error.problem.contains("complete fragments follow it"), "\(error)")
        }
        #expect(fileBytes(path) == bytes)
    }

    /// A power cut in the first second: the header and one hidden fragment of zeros. Nothing
    /// was recorded (the agent removes such a file); a lone fragment whose boxes are broken is
    /// not called empty.
    @Test func aLoneFragmentOfZerosIsNothingRecorded() throws {
        var bytes = fileBytes(try SmallFixture.file("lone-source.mov", close: false, sync: false))
        var boxes = topLevelBoxes(bytes)
        bytes.removeSubrange(boxes[4].offset...)  // ftyp, moov, the first fragment
        boxes = topLevelBoxes(bytes)
        #expect(boxes.map(\.type) == ["ftyp", "moov", "free", "mdat"])
        for i in (boxes[3].offset + 8)..<bytes.count { bytes[i] = 0 }
        let path = Fixture.directory.file("lone.mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        do {
            try MovieRepair.repair(path: path)
            Issue.record("a fragment of zeros was repaired")
        } catch {
            #expect(error.kind == .nothingRecorded, "\(error)")
        }
        #expect(fileBytes(path) == bytes)
    }

    /// Closed and repaired movies hide every fragment and the fragmented header behind Vigil's
    /// mark; a movie closed before the mark existed (its hidden boxes still starting with
    /// `mfhd` and `mvhd`) is complete as it is, and left untouched.
    @Test func finishedMoviesHideNothingThatLooksLiveAndOldOnesAreStillComplete() throws {
        let closed = try SmallFixture.file("marks-closed.mov", close: true)
        #expect(hiddenBoxesThatLookLive(closed).isEmpty)
        let repaired = try SmallFixture.file("marks-repaired.mov", close: false, sync: false)
        try MovieRepair.repair(path: repaired)
        #expect(hiddenBoxesThatLookLive(repaired).isEmpty)
        #expect(topLevelTypes(repaired).filter { $0 == "free" }.count == 6)  // header and five fragments

        // The same movie as the writer finished it before the mark: the checker sees it.
        var old = fileBytes(closed)
        var marks = 0
        for box in topLevelBoxes(old) where box.type == "free" {
            let child = box.offset + 12
            if old[child..<child + 4].elementsEqual("vgmf".utf8) {
                old.replaceSubrange(child..<child + 4, with: Array("mfhd".utf8))
                marks += 1
            } else if old[child..<child + 4].elementsEqual("vgmv".utf8) {
                old.replaceSubrange(child..<child + 4, with: Array("mvhd".utf8))
                marks += 1
            }
        }
        #expect(marks == 7)
        let path = Fixture.directory.file("marks-old.mov")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(old)))
        #expect(hiddenBoxesThatLookLive(path).count == 7)
        #expect(try MovieRepair.inspect(path: path) == .complete)
        #expect(try MovieRepair.repair(path: path) == nil)
        #expect(try MovieContentsTests().contents(path).0?.videoFrames == 60)
        #expect(fileBytes(path) == old)
    }
}
