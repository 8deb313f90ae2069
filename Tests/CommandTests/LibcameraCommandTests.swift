import Foundation
import Recorder
import TestSupport
import Testing

/// `camera.device = "libcamera"` as a user meets it: without the vigil-libcamera package, and
/// with a plugin (the stand-in of Tests/Fixtures/FakeLibcamera, NV12 frames in memfd buffers).
@Suite struct LibcameraCommandTests {
    static let missing = ["VIGIL_LIBCAMERA_PLUGIN": "/nonexistent/libvigil-libcamera.so"]
    static let message =
        "camera.device = libcamera needs the vigil-libcamera package — apt install vigil-libcamera"

    static var fake: [String: String] {
        let vigil = builtExecutable("vigil")
        let directory = String(vigil[..<(vigil.lastIndex(of: "/") ?? vigil.endIndex)])
        return ["VIGIL_LIBCAMERA_PLUGIN": directory + "/libvigil-libcamera-fake.so"]
    }

    static func config(_ dir: TemporaryDirectory, device: String) throws -> String {
        let path = dir.file("vigil.conf")
        try """
        camera = { device = "\(device)"; name = "pi"; width = 320; height = 240; fps = 30.0; };
        recording = { pre_roll = 1.0; post_roll = 1.0; };
        storage = { path = "\(dir.file("clips"))"; min_free_mb = 1; };
        encoder = { threads = 1; };
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func run(_ arguments: [String], environment: [String: String]) throws -> ToolResult {
        try runTool(
            builtExecutable("vigil"), arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 })
    }

    /// Without the plugin: `check` accepts the file and warns, `run` exits 69 before it
    /// touches the storage, `probe` says what to install.
    @Test func withoutThePluginItSaysWhatToInstall() throws {
        let dir = try TemporaryDirectory("vigil-libcamera")
        defer { dir.remove() }
        let config = try Self.config(dir, device: "libcamera")
        let check = try Self.run(["check", "--config", config], environment: Self.missing)
        #expect(check.status == 0 && check.stdout.contains("device = \"libcamera\";"), "\(check)")
        #expect(check.stderr.hasPrefix("warning: " + Self.message), "\(check)")
        let run = try Self.run(["run", "--config", config], environment: Self.missing)
        #expect(run.status == 69 && run.stderr.hasPrefix("vigil run: \(config): " + Self.message), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("clips")))
        let probe = try Self.run(["probe", "libcamera"], environment: Self.missing)
        #expect(probe.status == 69 && probe.stderr.contains(Self.message), "\(probe)")
        let all = try Self.run(["probe"], environment: Self.missing)
        #expect(
            all.status == 0
                && all.stdout.contains(
                    "Cameras (libcamera)\n\n  not looked for: the vigil-libcamera package is not installed"),
            "\(all)")
    }

    @Test func probeListsLibcamerasCameras() throws {
        let all = try Self.run(["probe", "--size", "640x480", "--fps", "25"], environment: Self.fake)
        #expect(all.status == 0, "\(all)")
        let section = all.stdout.components(separatedBy: "Cameras (libcamera)\n").last ?? ""
        #expect(section.hasPrefix("\nlibcamera:one-buffer — fake, external\n"), "\(all.stdout)")
        #expect(section.contains("    NV12      64x64 to 1920x1080\n              sizes: 640x480 1280x720\n"))
        #expect(
            section.contains(
                "      device = \"libcamera\";\n      width = 640;\n      height = 480;\n      fps = 25.0;\n"))
        let unknown = try Self.run(["probe", "libcamera:back-door"], environment: Self.fake)
        #expect(
            unknown.status == 66 && unknown.stderr.contains("libcamera has no camera 'back-door' (it has one-buffer)"),
            "\(unknown)")
    }

    /// The agent records from a libcamera camera: a triggered clip every reader plays, at the
    /// camera's size.
    @Test func runRecordsFromALibcameraCamera() throws {
        let dir = try TemporaryDirectory("vigil-libcamera")
        defer { dir.remove() }
        let config = try Self.config(dir, device: "libcamera:one-buffer")
        let (agent, _) = try AgentProcess.running(config: config, environment: Self.fake)
        defer { agent.kill(SIGKILL) }
        let open = try #require(agent.outputLines.first { $0.contains("msg=\"source open\"") })
        #expect(
            logValue(open, "source") == "libcamera:one-buffer" && logValue(open, "format") == "NV12 320×240 @ 30/1 fps",
            "\(open)")
        // What it agreed to, said once, as for a V4L2 camera: what was asked, so no warning.
        let negotiated = try #require(agent.outputLines.first { $0.contains("msg=\"camera negotiated\"") })
        #expect(
            logValue(negotiated, "camera") == "one-buffer" && logValue(negotiated, "pixel_format") == "NV12"
                && logValue(negotiated, "size") == "320x240" && logValue(negotiated, "fps") == "30",
            "\(negotiated)")
        #expect(!agent.output.contains("does not offer the requested size or rate"), "\(agent.output)")
        Thread.sleep(forTimeInterval: 2)  // some pre-roll in the ring
        let trigger = try Self.run(
            ["trigger", "--config", config, "--seconds", "2"],
            environment: ["VIGIL_RUNTIME_DIR": agent.runtimeDirectory])
        #expect(trigger.status == 0, "\(trigger)")
        try #require(
            agent.waitUntil(timeout: 60) { !journalRecords(in: dir.file("clips")).isEmpty }, "\(agent.output)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        let records = try EventsJournal(directory: dir.file("clips")).records().records
        try #require(records.count == 1, "\(records)\n\(agent.output)")
        let probe = try expectPlayable(dir.file("clips") + "/" + records[0].file, "the clip:")
        #expect(probe?.video?["width"] == "320" && probe?.video?["height"] == "240", "\(String(describing: probe))")
        #expect(!agent.output.contains("camera lost"), "\(agent.output)")
    }
}
