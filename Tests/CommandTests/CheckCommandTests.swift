import Foundation
import TestSupport
import Testing

@Suite struct CheckCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test func shippedConfigurationPasses() throws {
        let r = try vigil("check", "--config", Self.root + "/etc/vigil/vigil.conf")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("configuration OK"))
        #expect(r.stdout.contains("  device = \"/dev/video0\";\n"))
        #expect(r.stderr.isEmpty)
    }

    @Test(arguments: [
        ("camera = {\n  width = 640;\n  fps = \"fast\";\n};\n", ":3: camera.fps must be a number"),
        (
            "recording = { pre_roll = 5.0; };\nstorage = { min_free = 10; };\n",
            ":2: unknown setting 'storage.min_free' — did you mean 'storage.min_free_mb'?"
        ),
        ("log = {\n level = \"loud\";\n};\n", ":2: log.level = \"loud\" is not allowed"),
        (
            "web = { enabled = true; };\nonvif = {\n  enabled = true;\n};\n",
            ":3: onvif.enabled = true needs web.enabled = true (ONVIF's services are on the web server) and rtsp.enabled = true (its stream is the RTSP server's); rtsp.enabled is false — set rtsp.enabled = true, or onvif.enabled = false"
        ),
    ])
    func invalidConfigurationExits78WithFileAndLine(text: String, expected: String) throws {
        let dir = try TemporaryDirectory("vigil-check")
        defer { dir.remove() }
        let path = dir.file("vigil.conf")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let r = try vigil("check", "--config", path)
        #expect(r.status == 78)
        #expect(r.stderr.hasPrefix(path + expected), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
    }

    /// An empty file (or one of comments alone) is what a save cut short leaves: it would
    /// run on every default (keeping clips 30 days, recording the synthetic scene), so both
    /// `check` and `run` refuse it, and `run` before touching anything.
    @Test(arguments: ["", "\n\n", "# the camera by the door\n// nothing yet\n"])
    func anEmptyFileIsRefused(text: String) throws {
        let dir = try TemporaryDirectory("vigil-check")
        defer { dir.remove() }
        let path = dir.file("vigil.conf")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        for command in ["check", "run"] {
            let r = try vigil(command, "--config", path)
            #expect(r.status == 78, "vigil \(command): \(r.stderr)")
            #expect(r.stderr.hasPrefix(path + ": the file sets nothing"), "vigil \(command): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["vigil.conf"])
    }

    @Test func missingFileExits78() throws {
        let r = try vigil("check", "--config", "/nonexistent/vigil.conf")
        #expect(r.status == 78)
        #expect(r.stderr.contains("/nonexistent/vigil.conf: no such file"))
    }
}
