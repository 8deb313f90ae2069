import Foundation
import Media
import QuickTime
import Storage
import TestSupport
import Testing

/// Runs the built `vigil` binary.
func vigil(_ arguments: String...) throws -> ToolResult {
    try runTool(builtExecutable("vigil"), arguments)
}

@Suite struct RepairCommandTests {
    /// An interrupted clip: three of four GOPs on disk, never closed.
    func interruptedClip(_ dir: TemporaryDirectory, _ name: String) throws -> String {
        let stream = try H264TestStream.make(width: 64, height: 48, frames: 40, gop: 10, in: dir)
        let path = dir.file(name)
        let writer = try MovieWriter(
            path: path,
            description: MovieDescription(
                creationTime: Date(),
                video: VideoTrackFormat(
                    width: 64, height: 48, sequenceParameterSet: stream.sps, pictureParameterSet: stream.pps)))
        for gop in stream.gops(time: { Timestamp(nanoseconds: Int64($0) * 33_333_333) }).dropLast() {
            try writer.append(gop)
        }
        writer.abandon()
        return path
    }

    @Test func repairsInterruptedClipsAndLeavesCompleteOnesAlone() throws {
        let dir = try TemporaryDirectory("vigil-cli")
        defer { dir.remove() }
        let clip = try interruptedClip(dir, "clip.mov")
        let r = try vigil("repair", clip)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "\(clip): repaired, 3 fragments, 30 video frames\n")
        #expect(try FFmpeg.decodeErrors(clip).isEmpty)
        #expect(try FFprobe.probe(clip).video?["nb_frames"] == "30")

        let again = try vigil("repair", clip)
        #expect(again.status == 0)
        #expect(again.stdout == "\(clip): already complete\n")
    }

    @Test func failuresNameTheFileAndSetTheExitStatus() throws {
        let dir = try TemporaryDirectory("vigil-cli")
        defer { dir.remove() }
        let missing = dir.file("missing.mov")
        let r = try vigil("repair", missing)
        #expect(r.status == 66)
        #expect(r.stderr.contains(missing) && r.stderr.contains("no such file"))

        let text = dir.file("notes.mov")
        try "not a movie".write(toFile: text, atomically: true, encoding: .utf8)
        let r2 = try vigil("repair", text)
        #expect(r2.status == 65)
        #expect(r2.stderr.contains(text) && r2.stderr.contains("not a QuickTime movie"))
        #expect(try String(contentsOfFile: text, encoding: .utf8) == "not a movie")

        // One bad file among good ones: the good ones are still repaired.
        let clip = try interruptedClip(dir, "good.mov")
        let r3 = try vigil("repair", text, clip)
        #expect(r3.status == 65)
        #expect(r3.stdout.contains("\(clip): repaired"))
    }

    /// A clip the agent moved aside as damaged: still not a movie repair can finish (exit
    /// 65), and said to be what it is; its bytes stay as they are.
    @Test func aDamagedClipIsSaidToBeOne() throws {
        let dir = try TemporaryDirectory("vigil-cli")
        defer { dir.remove() }
        let path = dir.file("yard-20261130-110405.mov.damaged")
        let bytes = Data(count: 4096) + Data("mdat and the rest of a clip".utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: bytes))
        let r = try vigil("repair", path)
        #expect(r.status == 65, "\(r.stderr)")
        #expect(
            r.stderr.contains(path)
                && r.stderr.contains(
                    "the agent could not repair this clip when it started and moved it aside; no player opens it, its bytes are kept as they were"
                ), "\(r.stderr)")
        #expect(FileManager.default.contents(atPath: path) == bytes)
    }

    @Test func usageErrorsExit64() throws {
        #expect(try vigil("repair").status == 64)
        #expect(try vigil("repair", "--frobnicate", "x").status == 64)
        let unknown = try vigil("frobnicate")
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("unknown command 'frobnicate'"))
        #expect(try vigil().status == 64)
        // An argument a command does not take, said by every command the same way.
        for (arguments, extra) in [
            (["run", "x"], "x"), (["passwd", "viewer", "x"], "x"), (["probe", "/dev/null", "y"], "y"),
        ] {
            let command = arguments[0]
            let unexpected = try runTool(builtExecutable("vigil"), arguments)
            #expect(unexpected.status == 64, "\(command)")
            #expect(
                unexpected.stderr.contains(
                    "vigil \(command): unexpected argument \(extra) — run `vigil \(command) --help`"),
                "\(unexpected.stderr)")
        }
    }

    @Test func helpDescribesEveryCommand() throws {
        let root = try vigil("--help")
        #expect(root.status == 0)
        #expect(root.stdout.contains("repair"))
        let help = try vigil("repair", "--help")
        #expect(help.status == 0)
        #expect(help.stdout.hasPrefix("usage: vigil repair FILE…"))
        #expect(try vigil("help", "repair").stdout == help.stdout)
        #expect(try vigil("--version").stdout.hasPrefix("vigil "))
    }
}
