import Foundation
import TestSupport
import Testing

/// Broken configuration files, as people write them: typos, wrong types, values out of range,
/// broken syntax. `vigil check` and `vigil run` must both exit 78 with `FILE:LINE: message`
/// naming the line at fault, and `vigil run` must not touch storage (or anything else) first.
@Suite struct ConfigTests {
    /// Every file starts with a storage section (line 1), so that an agent that went ahead
    /// would create the storage directory.
    static let storageLine = "storage = { path = \"clips\"; min_free_mb = 1; };\n"

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var line: Int
        var message: String
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // Names and typos.
        Case(
            name: "unknown section", text: "camra = {\n  width = 640;\n};\n", line: 2,
            message: "unknown section 'camra' — did you mean 'camera'?"),
        Case(
            name: "unknown setting", text: "camera = {\n  widht = 640;\n};\n", line: 3,
            message: "unknown setting 'camera.widht' — did you mean 'camera.width'?"),
        Case(name: "setting outside a section", text: "\nwidth = 640;\n", line: 3, message: "unknown section 'width'"),
        Case(name: "section given a value", text: "camera = 5;\n", line: 2, message: "'camera' must be a group"),
        Case(
            name: "setting given twice", text: "camera = {\n  width = 640;\n  width = 800;\n};\n", line: 4,
            message: "duplicate setting name"),
        Case(
            name: "section given twice", text: "camera = {\n  width = 640;\n};\ncamera = {\n  height = 480;\n};\n",
            line: 5, message: "duplicate setting name"),
        // Syntax.
        Case(name: "doubled semicolon", text: "camera = {\n  width = 640;;\n};\n", line: 3, message: "syntax error"),
        Case(name: "missing name", text: "camera = {\n  = 640;\n};\n", line: 3, message: "syntax error"),
        Case(name: "doubled equals sign", text: "camera = {\n  width == 640;\n};\n", line: 3, message: "syntax error"),
        // Types.
        Case(
            name: "number as a string", text: "camera = {\n  width = \"640\";\n};\n", line: 3,
            message: "camera.width must be a whole number from 16 to 4096, not a string"),
        Case(
            name: "list for a number", text: "camera = {\n  width = [640];\n};\n", line: 3,
            message: "camera.width must be a whole number from 16 to 4096, not an array"),
        Case(
            name: "string for a boolean", text: "camera = {\n  realtime = \"yes\";\n};\n", line: 3,
            message: "camera.realtime must be true or false, not a string"),
        // Values.
        Case(
            name: "width too small", text: "camera = {\n  width = 8;\n};\n", line: 3,
            message: "camera.width = 8 is out of range"),
        Case(
            name: "odd width", text: "camera = {\n  width = 641;\n};\n", line: 3, message: "camera.width = 641 is odd"),
        Case(
            name: "zero frame rate", text: "camera = {\n  fps = 0.0;\n};\n", line: 3,
            message: "camera.fps = 0.0 is out of range"),
        Case(
            name: "rotation not a right angle", text: "camera = {\n  rotation = 45;\n};\n", line: 3,
            message: "camera.rotation = 45 is not a right angle"),
        Case(
            name: "device not a source", text: "camera = {\n  device = \"video0\";\n};\n", line: 3,
            message: "camera.device = \"video0\" is not a device"),
        Case(
            name: "file source without a path", text: "camera = {\n  device = \"file:\";\n};\n", line: 3,
            message: "camera.device = \"file:\" is not a device"),
        Case(
            name: "camera name with a space", text: "camera = {\n  name = \"front door\";\n};\n", line: 3,
            message: "camera.name = \"front door\" cannot go into file names"),
        Case(
            name: "sample rate too low", text: "audio = {\n  rate = 7000;\n};\n", line: 3,
            message: "audio.rate = 7000 is out of range"),
        Case(
            name: "three channels", text: "audio = {\n  channels = 3;\n};\n", line: 3,
            message: "audio.channels = 3 is out of range"),
        Case(
            name: "unknown preset", text: "encoder = {\n  preset = \"turbo\";\n};\n", line: 3,
            message: "encoder.preset = \"turbo\" is not allowed"),
        Case(
            name: "two psychovisual tunings", text: "encoder = {\n  tune = \"film,grain\";\n};\n", line: 3,
            message: "encoder.tune = film,grain combines 2 psychovisual tunings"),
        Case(
            name: "quality out of range", text: "encoder = {\n  crf = 60.0;\n};\n", line: 3,
            message: "encoder.crf = 60.0 is out of range"),
        Case(
            name: "keyframes too far apart", text: "encoder = {\n  keyframe_interval = 2.0;\n};\n", line: 3,
            message: "encoder.keyframe_interval = 2.0 is out of range"),
        Case(
            name: "negative bit rate", text: "encoder = {\n  max_bitrate = -1;\n};\n", line: 3,
            message: "encoder.max_bitrate = -1 is out of range"),
        Case(
            name: "threshold too high", text: "motion = {\n  threshold = 0.9;\n};\n", line: 3,
            message: "motion.threshold = 0.9 is out of range"),
        Case(
            name: "despeckle over 8", text: "motion = {\n  despeckle = 9;\n};\n", line: 3,
            message: "motion.despeckle = 9 is out of range"),
        Case(
            name: "missing mask", text: "motion = {\n  threshold = 0.01;\n  mask = \"missing.pgm\";\n};\n", line: 4,
            message: "motion.mask: cannot read"),
        Case(
            name: "negative pre-roll", text: "recording = {\n  pre_roll = -1.0;\n};\n", line: 3,
            message: "recording.pre_roll = -1.0 is out of range"),
        Case(
            name: "post-roll too long", text: "recording = {\n  pre_roll = 5.0;\n  post_roll = 3000.0;\n};\n", line: 4,
            message: "recording.post_roll = 3000.0 is out of range"),
        Case(
            name: "clips too short", text: "recording = {\n  max_clip = 5.0;\n};\n", line: 3,
            message: "recording.max_clip = 5.0 is out of range"),
        Case(
            name: "log level unknown", text: "log = {\n  level = \"verbose\";\n};\n", line: 3,
            message: "log.level = \"verbose\" is not allowed"),
        Case(
            name: "negative stats interval", text: "log = {\n  stats_interval = -5;\n};\n", line: 3,
            message: "log.stats_interval = -5 is out of range"),
        Case(
            name: "relative hook", text: "hooks = {\n  on_clip_saved = \"relative/path.sh\";\n};\n", line: 3,
            message: "hooks.on_clip_saved = \"relative/path.sh\" is not an absolute path"),
        Case(
            name: "hook timeout too short", text: "hooks = {\n  timeout = 0.5;\n};\n", line: 3,
            message: "hooks.timeout = 0.5 is out of range"),
    ]

    /// A storage section whose `file_pattern`, on line 3, is `pattern`.
    static func pattern(_ name: String, _ pattern: String, message: String) -> Case {
        Case(
            name: name, text: "storage = {\n  path = \"clips\";\n  file_pattern = \"\(pattern)\";\n};\n", line: 3,
            message: message)
    }

    /// Storage settings, in their own file (line 1 is not the storage line there).
    static let storageCases: [Case] = [
        pattern("pattern without seconds", "clip.mov", message: "storage.file_pattern must contain %S"),
        pattern("pattern not a .mov", "%Y/%S.mp4", message: "storage.file_pattern"),
        pattern("seconds only as a literal %%S", "{camera}-%%S.mov", message: "storage.file_pattern must contain %S"),
        pattern(
            "file name longer than 255 bytes", String(repeating: "x", count: 300) + "-%S.mov",
            message: "storage.file_pattern can make file names of 312 bytes"),
        pattern("pattern nine levels deep", "a/b/c/d/e/f/g/h/%H%M%S.mov", message: "storage.file_pattern has 9 levels"),
        pattern(
            "absolute pattern", "/tmp/%H%M%S.mov", message: "storage.file_pattern must be relative to storage.path"),
        pattern(
            "pattern climbing out with ..", "../%H%M%S.mov",
            message: "storage.file_pattern must not contain empty, . or .. path parts"),
        Case(
            name: "empty storage path", text: "storage = {\n  path = \"\";\n};\n", line: 2,
            message: "storage.path is empty"),
        Case(
            name: "age out of range", text: "storage = {\n  path = \"clips\";\n  max_age_days = 5000;\n};\n", line: 3,
            message: "storage.max_age_days = 5000 is out of range"),
    ]

    static func check(_ c: Case, text: String, line: Int) throws {
        let dir = try TemporaryDirectory("vigil-faults-config")
        defer { dir.remove() }
        let path = dir.file("vigil.conf")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        let expected = "\(path):\(line): "
        for command in ["check", "run"] {
            let r = try runTool(builtExecutable("vigil"), [command, "--config", path])
            #expect(r.status == 78, "vigil \(command), \(c.name): exit \(r.status)\n\(r.stderr)")
            let first = r.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(first.hasPrefix(expected), "vigil \(command), \(c.name): expected \(expected)…, got: \(r.stderr)")
            #expect(first.contains(c.message), "vigil \(command), \(c.name): expected “\(c.message)” in: \(first)")
            #expect(r.stdout.isEmpty, "vigil \(command), \(c.name): \(r.stdout)")
        }
        // Nothing was created beside the configuration file.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["vigil.conf"], "\(c.name)")
    }

    @Test(arguments: cases)
    func aBrokenConfigurationExits78NamingItsLine(_ c: Case) throws {
        try Self.check(c, text: Self.storageLine + c.text, line: c.line)
    }

    @Test(arguments: storageCases)
    func aBrokenStorageSettingExits78NamingItsLine(_ c: Case) throws {
        try Self.check(c, text: c.text, line: c.line)
    }

    /// A string or a group left open runs to the end of the file, where libconfig notices: the
    /// message names the line where the string or group opened, not the end of the file.
    @Test(arguments: [
        Case(
            name: "string left open", text: "camera = {\n  name = \"yard;\n};\nlog = { level = \"info\"; };\n", line: 3,
            message: "syntax error"),
        Case(name: "group left open", text: "log = {\n  level = \"info\";\n", line: 2, message: "syntax error"),
    ])
    func aFileEndingInsideAStringOrGroupNamesWhereItOpened(_ c: Case) throws {
        try Self.check(c, text: Self.storageLine + c.text, line: c.line)
    }

    @Test func thereAreAtLeastThirty() {
        #expect(Self.cases.count + Self.storageCases.count >= 30)
    }
}
