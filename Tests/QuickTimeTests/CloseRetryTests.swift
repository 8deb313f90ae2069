import Foundation
import Media
import Storage
import TestSupport
import Testing

@testable import QuickTime

/// A close that finds the disk full (the agent then frees room and closes again) writes
/// nothing twice: whichever of its writes failed — the last GOP's fragment, the index, a sync,
/// the hiding of a fragment or of the header — the next close makes the same movie, byte for
/// byte, as a close that never failed, and it plays.
@Suite struct CloseRetryTests {
    /// Writes the fixture's 150 frames GOP by GOP, as the agent does, the last GOP given just
    /// before the close; the output fails its `failAt`-th operation once. Returns the output,
    /// the operations made before the last GOP, and whether a close failed.
    static func write(
        _ path: String, failAt: Int
    ) throws -> (output: FailingOutput, beforeLast: Int, closeFailed: Bool) {
        let s = try Fixture.h264()
        let gops = s.gops(count: s.samples.count) {
            Timestamp(nanoseconds: 5_000_000_000 + Int64($0) * 1_000_000_000 / 30)
        }
        let output = FailingOutput(try FileMovieOutput(creating: path))
        output.fullOnce(at: failAt)
        let writer = try MovieWriter(output: output, path: path, description: Fixture.description(s))
        for gop in gops.dropLast() {
            try writer.append(gop)
            try writer.synchronize()
        }
        let beforeLast = output.operations
        // A GOP whose write found the disk full waits in the writer for the close.
        do { try writer.append(gops[gops.count - 1]) } catch { #expect(failAt == beforeLast, "\(error)") }
        do {
            try writer.close()
            return (output, beforeLast, false)
        } catch {
            #expect("\(error)".contains("no space left on the device"), "\(error)")
            try writer.close()
            return (output, beforeLast, true)
        }
    }

    @Test func aCloseThatFoundTheDiskFullMakesTheSameMovieWhenTriedAgain() throws {
        let clean = Fixture.directory.file("close-clean.mov")
        let (output, beforeLast, failed) = try Self.write(clean, failAt: .max)
        #expect(!failed)
        let expected = try Data(contentsOf: URL(fileURLWithPath: clean))
        _ = try expectPlayable(clean)
        // The last GOP's fragment, the index, the syncs, the hiding of each fragment and of the header.
        let steps = beforeLast..<output.operations
        #expect(steps.count > 5)
        for failAt in steps {
            let path = Fixture.directory.file("close-full-\(failAt).mov")
            let (_, _, closeFailed) = try Self.write(path, failAt: failAt)
            #expect(closeFailed == (failAt > beforeLast), "operation \(failAt)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == expected, "operation \(failAt) failed once")
        }
        _ = try expectPlayable(Fixture.directory.file("close-full-\(steps.upperBound - 1).mov"))
    }
}
