import Foundation
import Media
import Storage
import Synchronization
import TestSupport
import Testing

@testable import QuickTime

/// A child process writes a long clip and is killed with SIGKILL at many moments: inside a
/// fragment's write, between fragments, and during the close. Every file must decode, hold
/// every fragment the child reported complete, and repair into a normal movie with exactly
/// those frames.
@Suite struct KillTests {
    static let repeats = 3  // the 60-frame stream three times: 18 fragments of 10 frames
    static let framesPerFragment = 10

    /// Runs the child; `killWhen` sees each output line (and nil on a 1 ms tick) and returns
    /// true to kill it there.
    func runChild(
        output: String, stream: String, killAfter trigger: @escaping @Sendable ([String], Double) -> Bool
    ) throws -> (lines: [String], killed: Bool) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtExecutable("movie-writer-child"))
        process.arguments = [output, stream, "64", "48", "\(Self.repeats)"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        let start = Date()
        try process.run()
        let reader = LineReader(pipe.fileHandleForReading)
        var killed = false
        while process.isRunning {
            if trigger(reader.lines, Date().timeIntervalSince(start)) {
                kill(process.processIdentifier, SIGKILL)
                killed = true
                break
            }
            usleep(200)
        }
        process.waitUntilExit()
        reader.waitUntilClosed()
        return (reader.lines, killed && process.terminationReason == .uncaughtSignal)
    }

    /// A kill trigger for `runChild`: `delay` seconds after the child first printed `line`.
    static func killAfter(_ line: String, delay: Double) -> @Sendable ([String], Double) -> Bool {
        let seen = Mutex<Double?>(nil)
        return { lines, t in
            if let at = seen.withLock({ $0 }) { return t >= at + delay }
            if lines.contains(line) { seen.withLock { $0 = t } }
            return false
        }
    }

    @Test func killedAtAnyMomentTheClipIsKeptUpToItsLastFragment() throws {
        let dir = try TemporaryDirectory("vigil-kill")
        defer { dir.remove() }
        _ = try H264TestStream.make(width: 64, height: 48, frames: 60, gop: 10, in: dir)
        let streamPath = dir.file("stream-64x48-60-10.h264")  // where make() leaves the raw stream

        // The clip written without interruption is the reference for every frame.
        let reference = dir.file("reference.mov")
        let full = try runChild(output: reference, stream: streamPath) { _, _ in false }
        #expect(full.lines.last == "closed")
        #expect(try expectPlayable(reference).video?["nb_frames"] == "180")
        let referenceFrames = try frameHashes(reference)
        #expect(referenceFrames.count == 180)

        var generator = SplitMix64(seed: 20261130)
        var outcomes: [String] = []
        for run in 0..<20 {
            let path = dir.file("killed-\(run).mov")
            let r = Double(generator.next() % 10_000) / 10_000
            let trigger: @Sendable ([String], Double) -> Bool
            let plan: String
            switch run % 3 {
            case 0:  // a few milliseconds after a given fragment: inside the next frames or fragment
                let after = 1 + Int(r * 16)
                let delay = Double(generator.next() % 6) / 1000
                plan = "after fragment \(after) + \(Int(delay * 1000)) ms"
                trigger = Self.killAfter("fragment \(after)", delay: delay)
            case 1:  // at a random moment of the whole run
                let at = r * 0.6
                plan = "at \(Int(at * 1000)) ms"
                trigger = { _, t in t >= at }
            default:  // during the close
                let delay = r * 0.03
                plan = "closing + \(Int(delay * 1000)) ms"
                trigger = Self.killAfter("closing", delay: delay)
            }
            let result = try runChild(output: path, stream: streamPath, killAfter: trigger)
            let reported = result.lines.compactMap { $0.hasPrefix("fragment ") ? Int($0.dropFirst(9)) : nil }.max() ?? 0
            let closing = result.lines.contains("closing")
            let closed = result.lines.contains("closed")
            outcomes.append("\(plan): \(reported) fragments\(closing ? ", closing" : "")\(closed ? ", closed" : "")")

            // Before repair: every fragment reported complete is there and decodes — but for one
            // state of the close, between two of its writes: every fragment already hidden, the
            // fragmented header not yet, the index appended. A player then sees a movie of no
            // frames; repair (below, and the agent at its next start) finishes it like any
            // other. (Hiding the header first would leave a `moof` before any movie header,
            // which readers refuse outright.)
            let types = topLevelTypes(path)
            let showsNothing =
                closing && types.first(where: { $0 != "ftyp" }) == "moov" && types.last == "moov"
                && !types.contains("moof") && types.filter { $0 == "moov" }.count == 2
            if showsNothing { outcomes[outcomes.count - 1] += " (every fragment hidden, the header not yet)" }
            if reported > 0 && !showsNothing {
                #expect(
                    try FFmpeg.decodeErrors(path).isEmpty,
                    "run \(run) (\(plan)): the killed file does not decode cleanly")
                if !closing {
                    let visible = Int(try FFprobe.probe(path).video?["nb_read_packets"] ?? "") ?? 0
                    #expect(
                        visible >= reported * Self.framesPerFragment,
                        "run \(run) (\(plan)): \(visible) frames visible, \(reported) fragments reported")
                }
            }

            // Repair, then check it is a normal movie with whole fragments of the right frames.
            do {
                let report = try MovieRepair.repair(path: path)
                if closed { #expect(report == nil, "run \(run): a finished clip needed repair") }
            } catch {
                #expect(reported == 0, "run \(run) (\(plan)): repair failed after \(reported) fragments: \(error)")
                // Killed before it wrote anything (or, on a busy machine, before it even made the file).
                #expect(
                    error.problem.contains("nothing to recover") || error.kind == .noSuchFile, "run \(run): \(error)")
                continue
            }
            #expect(isNormalMovie(path), "run \(run) (\(plan))")
            #expect(try MovieRepair.repair(path: path) == nil, "run \(run): repair is not idempotent")
            let probe = try expectPlayable(path)
            let frames = Int(probe.video?["nb_frames"] ?? "") ?? -1
            #expect(probe.video?["nb_read_packets"] == "\(frames)", "run \(run): index and packets disagree")
            #expect(
                frames >= reported * Self.framesPerFragment,
                "run \(run) (\(plan)): \(frames) frames after repair, \(reported) fragments reported")
            #expect(
                frames % Self.framesPerFragment == 0 || frames == 180, "run \(run): \(frames) is not whole fragments")
            // Every GOP is on disk before close begins: a kill during close loses no frame.
            if closing { #expect(frames == 180, "run \(run) (\(plan)): a kill during close lost frames") }
            outcomes[outcomes.count - 1] += " → \(frames) frames after repair"
            #expect(
                try frameHashes(path) == Array(referenceFrames.prefix(frames)),
                "run \(run) (\(plan)): the frames differ")
        }
        print("kill test outcomes:\n  " + outcomes.joined(separator: "\n  "))
        // The schedule must actually have hit each phase.
        #expect(
            outcomes.contains { $0.contains("closing") && !$0.contains("closed") },
            "no kill landed inside a close: \(outcomes)")
        #expect(
            outcomes.contains { !$0.contains("closing") && !$0.hasSuffix(": 0 fragments") },
            "no kill landed while recording: \(outcomes)")
    }
}
