import Capture
import Foundation
import H264
import TestSupport
import Testing

@testable import Configuration

/// The repository's root, found from this file's place in it.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

func load(_ text: String, directory: String = "/etc/vigil") throws(ConfigurationError) -> Settings {
    try Settings(values: ConfigValues.parse(text, name: "test.conf"), directory: directory)
}

/// The line and message of the error `text` gives.
func failure(_ text: String) -> ConfigurationError? {
    do {
        _ = try load(text)
        return nil
    } catch {
        return error
    }
}

@Suite struct ConfigurationTests {
    @Test func shippedConfigurationDocumentsEveryKeyWithItsDefault() throws {
        let path = repositoryRoot + "/etc/vigil/vigil.conf"
        let settings = try Settings.load(path: path)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false
        ).map(String.init)
        for key in ConfigSchema.keys {
            let isSet = settings.values.isSet(key.name)
            #expect(isSet, "\(key.name) is not in vigil.conf")
            if key.name != "camera.device" {
                let isDefault = settings.values.value(key.name) == key.defaultValue
                #expect(isDefault, "vigil.conf sets \(key.name) to something other than its default")
            }
            // The comment block right above the setting (or above the run of settings it
            // belongs to) says what the default is.
            guard let line = settings.values.line(key.name) else { continue }
            var i = line - 2
            while i >= 0, !lines[i].trimmingCharacters(in: .whitespaces).hasPrefix("#") { i -= 1 }
            var comment = ""
            while i >= 0, lines[i].trimmingCharacters(in: .whitespaces).hasPrefix("#") {
                comment = lines[i] + comment
                i -= 1
            }
            #expect(comment.contains("Default"), "\(key.name) has no comment giving its default")
        }
        #expect(settings.camera.device == .device(path: "/dev/video0"))
    }

    @Test func anEmptyFileMeansEveryDefault() throws {
        let settings = try load("")
        #expect(settings.camera.device == .synthetic)
        #expect(settings.camera.width == 1280 && settings.camera.height == 720)
        #expect(
            settings.recording.preRoll == 5 && settings.recording.postRoll == 5 && settings.recording.maxClip == 300)
        #expect(settings.storage.path == "/var/lib/vigil/clips")
        #expect(
            settings.storage.maxAgeDays == 30 && settings.storage.maxSize == nil
                && settings.storage.minFree == 500 << 20)
        #expect(settings.encoder.x264.tune == [.zerolatency] && settings.encoder.x264.rateCap == .uncapped)
        #expect(settings.motion.threshold == 0.005 && settings.motion.minFrames == 2 && settings.motionMask == nil)
        #expect(settings.log.level == .info && settings.log.statsInterval == 60)
        #expect(settings.hooks.onEventStart == nil)
    }

    @Test func valuesAreTyped() throws {
        let s = try load(
            """
            camera = { device = "file:footage/yard.y4m"; name = "yard-1"; width = 640; height = 480; fps = 25; rotation = 270; realtime = true; };
            recording = { pre_roll = 3; post_roll = 2.5; max_clip = 60; };
            storage = { path = "clips"; max_size_mb = 100; max_age_days = 0; };
            encoder = { tune = "none"; max_bitrate = 2000; };
            log = { level = "debug"; stats_interval = 0; };
            """, directory: "/srv/vigil")
        #expect(s.camera.device == .file(path: "/srv/vigil/footage/yard.y4m"))
        // A libcamera camera, the first or by the id `cam -l` gives (not a path to resolve).
        #expect(try load("camera = { device = \"libcamera\"; };").camera.device == .libcamera(camera: nil))
        #expect(
            try load("camera = { device = \"libcamera:/base/soc/i2c0mux/i2c@1/imx708@1a\"; };").camera.device
                == .libcamera(camera: "/base/soc/i2c0mux/i2c@1/imx708@1a"))
        #expect(s.camera.fps == 25 && s.camera.rotation == .clockwise270 && s.camera.realtime)
        #expect(s.recording.preRoll == 3 && s.recording.postRoll == 2.5)
        #expect(s.storage.path == "/srv/vigil/clips")
        #expect(s.storage.maxSize == 100 << 20 && s.storage.maxAgeDays == nil)
        #expect(s.encoder.x264.tune == [] && s.encoder.x264.rateCap == .vbv(maxBitrateKbps: 2000, bufferKbit: 2000))
        #expect(s.log.level == .debug && s.log.statsInterval == nil)
    }

    /// The overlay's font is read once, with the settings: the pipeline draws with this copy,
    /// and a configuration without overlay text reads none.
    @Test func theOverlayFontIsReadWithTheSettings() throws {
        let drawn = try load("overlay = { text = \"%H:%M:%S\"; };")
        let font = try #require(drawn.overlay.font)
        #expect(font.path.hasSuffix("/Unifont-APL8x16.psf.gz") && font.width == 8 && font.height == 16)
        #expect(font.glyphCount > 0)
        #expect(try load("").overlay.font == nil)
    }

    /// Each broken file gives its line and a message that names the setting and the fix.
    @Test(
        arguments: [
            (
                "camera = { width = 640;\n  hieght = 480; };", 2,
                "unknown setting 'camera.hieght' — did you mean 'camera.height'?"
            ),
            (
                "camera = { width = 99999; };", 1,
                "camera.width = 99999 is out of range — use a whole number from 16 to 4096"
            ),
            (
                "\n\ncamera = { width = \"640\"; };", 3,
                "camera.width must be a whole number from 16 to 4096, not a string"
            ),
            ("camera = { width = 641; };", 1, "camera.width = 641 is odd"),
            ("camera = { rotation = 45; };", 1, "camera.rotation = 45 is not a right angle — use 0, 90, 180 or 270"),
            ("camera = { fps = 0.5; };", 1, "camera.fps = 0.5 is out of range"),
            ("camera = { realtime = 1; };", 1, "camera.realtime must be true or false, not a whole number"),
            ("camera = { device = \"video0\"; };", 1, "camera.device = \"video0\" is not a device"),
            ("camera = { device = \"file:\"; };", 1, "camera.device = \"file:\" is not a device"),
            (
                "camera = { device = \"libcamera:\"; };", 1,
                "camera.device = \"libcamera:\" is not a device — use a device path such as \"/dev/video0\", \"libcamera\""
            ),
            ("camera = { name = \"front door\"; };", 1, "camera.name = \"front door\" cannot go into file names"),
            ("camera = { name = 7; };", 1, "camera.name must be a string in double quotes, not a whole number"),
            ("cammera = { width = 640; };", 1, "unknown section 'cammera' — did you mean 'camera'?"),
            ("stuff = 3;", 1, "unknown section 'stuff'"),
            ("camera = 3;", 1, "'camera' must be a group"),
            ("camera = { width == 640; };", 1, "syntax error"),
            ("camera = {\n width = 640;\n", 1, "syntax error — the { on this line is never closed: add the matching }"),
            ("camera = { width = 640; };\nrecording = { pre_roll = 5.0.0; };", 2, "syntax error"),
            (
                "encoder = { preset = \"fastest\"; };", 1,
                "encoder.preset = \"fastest\" is not allowed — use one of \"ultrafast\""
            ),
            ("encoder = { crf = 60.0; };", 1, "encoder.crf = 60.0 is out of range — use a number from 1.0 to 51.0"),
            ("encoder = {\n tune = \"film,grain\"; };", 2, "encoder.tune"),
            ("encoder = { tune = \"fast\"; };", 1, "names 'fast', which is not an x264 tuning"),
            (
                "motion = {\n threshold = 0.4;\n light_switch_fraction = 0.3; };", 2,
                "motion.threshold: 0.4 is not below motion.light_switch_fraction"
            ),
            ("motion = { pixel_threshold = 0.5; };", 1, "motion.pixel_threshold: 0.5 is out of range"),
            ("motion = { mask = \"/nonexistent/mask.pgm\"; };", 1, "motion.mask: cannot read /nonexistent/mask.pgm"),
            ("motion = { min_frames = 0; };", 1, "motion.min_frames = 0 is out of range"),
            ("encoder = { keyframe_interval = 2.0; };", 1, "encoder.keyframe_interval = 2.0 is out of range"),
            ("recording = { pre_roll = -1.0; };", 1, "recording.pre_roll = -1.0 is out of range"),
            (
                "recording = {\n pre_roll = 20.0;\n max_clip = 10.0; };", 2,
                "recording.pre_roll (20.0 s) must be shorter than recording.max_clip (10.0 s)"
            ),
            (
                "recording = { post_roll = [1, 2]; };", 1,
                "recording.post_roll must be a number from 0.0 to 300.0, not an array"
            ),
            ("storage = { path = \"\"; };", 1, "storage.path is empty"),
            ("storage = { file_pattern = \"%Y/clip.mp4\"; };", 1, "storage.file_pattern must end in .mov"),
            (
                "storage = { file_pattern = \"../%Y%S.mov\"; };", 1,
                "storage.file_pattern must not contain empty, . or .. path parts"
            ),
            ("storage = { file_pattern = \"%Y-%j-%S.mov\"; };", 1, "storage.file_pattern uses a % field other than"),
            ("storage = { file_pattern = \"%Y-%m-%d.mov\"; };", 1, "storage.file_pattern must contain %S"),
            (
                "storage = { file_pattern = \"{camera}-%%S.mov\"; };", 1,
                "storage.file_pattern must contain %S, so that clips started in the same minute get different names — %%S is a percent sign followed by S"
            ),
            (
                "storage = {\n file_pattern = \"a/b/c/d/e/f/g/h/%Y%m%d-%H%M%S.mov\"; };", 2,
                "storage.file_pattern has 9 levels (directories and the file name) — use at most 8"
            ),
            (
                "storage = { file_pattern = \"" + String(repeating: "x", count: 300) + "-%S.mov\"; };", 1,
                "storage.file_pattern can make file names of 312 bytes"
            ),
            ("storage = { max_size_mb = -5; };", 1, "storage.max_size_mb = -5 is out of range"),
            ("log = { level = \"verbose\"; };", 1, "log.level = \"verbose\" is not allowed"),
            (
                "hooks = { on_clip_saved = \"notify.sh\"; };", 1,
                "hooks.on_clip_saved = \"notify.sh\" is not an absolute path"
            ),
            (
                "hooks = { on_clip_saved = \"/nonexistent/notify\"; };", 1,
                "hooks.on_clip_saved: /nonexistent/notify does not exist or is not executable"
            ),
            ("audio = { channels = 6; };", 1, "audio.channels = 6 is out of range — use a whole number from 1 to 2"),
            ("audio = { device = \"\"; };", 1, "audio.device is empty"),
            ("camera = { width = 640; width = 800; };", 1, "duplicate setting"),
            ("mqtt = { enabled = true;\n host = \"\"; };", 2, "mqtt.host is empty"),
            (
                "mqtt = { topic_prefix = \"home/#\"; };", 1,
                "mqtt.topic_prefix = \"home/#\" cannot begin a topic"
            ),
            ("mqtt = { topic_prefix = \"/vigil\"; };", 1, "no leading or trailing /"),
            (
                "mqtt = { enabled = true; tls_cert_file = \"/etc/hostname\"; };", 1,
                "mqtt.tls_cert_file needs mqtt.tls_ca_file too"
            ),
            (
                "mqtt = { enabled = true; tls_ca_file = \"/etc/hostname\"; tls_key_file = \"/etc/hostname\"; };", 1,
                "mqtt.tls_cert_file and mqtt.tls_key_file go together"
            ),
            ("mqtt = { qos = 3; };", 1, "mqtt.qos = 3 is out of range"),
            // 19 synced rewrites of latest.jpg a second were accepted.
            (
                "snapshot = { live_interval = 0.0001; };", 1,
                "snapshot.live_interval = 0.0001 is out of range — use 0 for no latest.jpg, or 1.0 to 3600.0 seconds"
            ),
            ("snapshot = {\n live_interval = 0.5; };", 2, "snapshot.live_interval = 0.5 is out of range"),
            // Without a password the web server serves this machine only.
            (
                "web = { enabled = true;\n listen = \"0.0.0.0\"; };", 2,
                "web.listen = \"0.0.0.0\" serves other machines, and the web server has no password — set web.password_file and make a password with `vigil passwd`"
            ),
            ("web = { listen = \"camera.local\"; };", 1, "use 127.0.0.1 (or ::1)"),
            ("web = { listen = \"127.0.0.256\"; };", 1, "serves other machines"),
            ("web = { port = 70000; };", 1, "web.port = 70000 is out of range"),
        ] as [(String, Int, String)])
    func malformedFilesAreReportedAtTheirLine(text: String, line: Int, message: String) {
        guard let error = failure(text) else {
            Issue.record("accepted: \(text)")
            return
        }
        #expect(error.line == line, "\(error)")
        #expect(error.description.hasPrefix("test.conf:\(line): "), "\(error)")
        #expect(error.message.lowercased().contains(message.lowercased()), "\(error)")
    }

    /// MQTT settings as the sink gets them: the client id from the machine's and the camera's
    /// names, the topics'
    /// base, the password from its file (its first line), relative paths from the
    /// configuration's directory; a configuration that turns MQTT off need not have the files.
    @Test func mqttSettingsAreTypedAndTheirFilesRead() throws {
        let dir = try TemporaryDirectory("vigil-config")
        defer { dir.remove() }
        try "s3cret\nignored\n".write(toFile: dir.file("secret"), atomically: true, encoding: .utf8)
        let on = try load(
            """
            camera = { name = "yard"; };
            mqtt = { enabled = true; host = "broker.lan"; username = "cam"; password_file = "secret"; topic_prefix = "home/cams"; };
            """, directory: dir.path)
        #expect(on.mqtt.clientID(camera: on.camera.name, host: "pi") == "vigil-pi-yard")
        #expect(on.mqtt.base(camera: on.camera.name) == "home/cams/yard")
        #expect(on.mqtt.password == "s3cret" && on.mqtt.username == "cam")
        #expect(on.mqtt.tls == nil && on.mqtt.qos == 1 && on.mqtt.port == 1883)
        let off = try load("mqtt = { enabled = false; password_file = \"/nonexistent/secret\"; };")
        #expect(!off.mqtt.enabled && off.mqtt.password == nil)
    }

    /// Every part of a clip's path must fit a file name (255 bytes) however it expands: `%Y`
    /// is 4 digits, the other fields 2, `%%` one byte, `{camera}` the camera's name, and the
    /// file name may get a "-1000" before `.mov` when names collide. At 255 it is accepted.
    @Test func patternPartsMustFitAFileNameWhateverTheyExpandTo() throws {
        func pattern(camera: String = "yard", _ pattern: String) -> String {
            "camera = { name = \"\(camera)\"; };\nstorage = { file_pattern = \"\(pattern)\"; };"
        }
        let x = { (n: Int) in String(repeating: "x", count: n) }
        // yard (4) + "-" + n + %S (2) + ".mov" + "-1000" = n + 16.
        _ = try load(pattern("{camera}-\(x(239))%S.mov"))
        #expect(failure(pattern("{camera}-\(x(240))%S.mov"))?.message.contains("256 bytes") == true)
        // A 32-character name (the longest camera.name) takes 28 bytes more.
        let long = String(repeating: "c", count: 32)
        _ = try load(pattern(camera: long, "{camera}-\(x(211))%S.mov"))
        #expect(failure(pattern(camera: long, "{camera}-\(x(212))%S.mov"))?.message.contains("256 bytes") == true)
        // A directory gets no suffix: %Y (4) + n.
        _ = try load(pattern("%Y\(x(251))/%S.mov"))
        let directory = failure(pattern("%Y\(x(252))/%S.mov"))
        #expect(directory?.line == 2)
        #expect(
            directory?.message.contains("can make directory names of 256 bytes") == true,
            "\(String(describing: directory))")
        // %% is one byte; a multi-byte character counts its UTF-8 bytes.
        _ = try load(pattern("\(x(243))%%%S.mov"))
        #expect(failure(pattern("\(x(244))%%%S.mov")) != nil)
        _ = try load(pattern("\(String(repeating: "é", count: 122))%S.mov"))
        #expect(failure(pattern("\(String(repeating: "é", count: 123))%S.mov")) != nil)
    }

    /// `%%` is a percent sign: what follows it is text, not a field.
    @Test(arguments: [
        ("%Y/%%%S.mov", true), ("%%%%%S.mov", true), ("%S%%.mov", true), ("%%S.mov", false), ("x%%S%%M.mov", false),
        ("%%%%S.mov", false),
    ])
    func secondsAreFoundOnlyAsAField(pattern: String, accepted: Bool) {
        let error = failure("storage = { file_pattern = \"\(pattern)\"; };")
        #expect((error == nil) == accepted, "\(pattern): \(String(describing: error))")
    }

    /// Eight levels in all (seven directories and the file name) is the most: the storage walk
    /// goes that deep and no deeper.
    @Test func patternsAreAtMostEightLevelsDeep() throws {
        _ = try load("storage = { file_pattern = \"a/b/c/d/e/f/%Y/{camera}-%H%M%S.mov\"; };")
        let error = failure("storage = { file_pattern = \"a/b/c/d/e/f/g/%Y/{camera}-%H%M%S.mov\"; };")
        #expect(error?.message.contains("has 9 levels") == true, "\(String(describing: error))")
    }

    @Test func effectiveSettingsReadBackAsTheSameConfiguration() throws {
        let original = try load("camera = { name = \"porch\"; fps = 12.5; };\nstorage = { max_size_mb = 2048; };")
        let text = original.values.effectiveText
        #expect(text.contains("  name = \"porch\";\n"))
        #expect(text.contains("  fps = 12.5;\n"))
        #expect(text.contains("  width = 1280;  # default\n"))
        let reread = try load(text)
        #expect(
            reread.camera == original.camera && reread.storage == original.storage && reread.encoder == original.encoder
        )
    }

    @Test func includedFilesAreNamedInErrors() throws {
        let dir = try TemporaryDirectory("vigil-conf")
        defer { dir.remove() }
        try "camera = { width = 3; };\n".write(toFile: dir.file("camera.conf"), atomically: true, encoding: .utf8)
        try "@include \"\(dir.file("camera.conf"))\"\nlog = { level = \"info\"; };\n".write(
            toFile: dir.file("main.conf"), atomically: true, encoding: .utf8)
        do {
            _ = try Settings.load(path: dir.file("main.conf"))
            Issue.record("accepted a width of 3")
        } catch {
            #expect(error.file == dir.file("camera.conf"))
            #expect(error.line == 1)
        }
        #expect(throws: ConfigurationError.self) { try Settings.load(path: dir.file("absent.conf")) }
    }
}

@Suite struct UnclosedConstructTests {
    @Test(
        arguments: [
            ("camera = {\n  name = \"yard;\n};\n", 2, "string"),
            ("camera = {\n  name = \"yard;\n};\nlog = { level = \"info\"; };\n", 2, "runs past the end of the line"),
            ("log = {\n  level = \"info\";\n", 1, "{"),
            ("a = [1, 2,\n3\n", 1, "["),
            ("# a \"quote in a comment\n/* { */ log = { level = \"x\\\"y\"; };\n", 0, ""),
            ("s = \"a # not a comment\";\n", 0, ""),
        ] as [(String, Int, String)])
    func findsWhereAnUnclosedStringOrGroupOpened(text: String, line: Int, what: String) {
        let found = unclosedConstruct(in: text)
        if line == 0 {
            #expect(found == nil, "\(String(describing: found))")
        } else {
            #expect(found?.line == line)
            #expect(found?.problem.contains(what) == true)
        }
    }

    @Test func anUnclosedStringIsReportedWhereItStarts() {
        let error = failure("camera = {\n  name = \"yard;\n};\nlog = { level = \"info\"; };\n")
        #expect(error?.line == 2, "\(String(describing: error))")
        #expect(error?.message.contains("closing \"") == true)
    }
}
