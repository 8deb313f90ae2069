import Configuration
import Foundation
import TestSupport
import Testing

@testable import Agent

/// `ReloadPlan` for settings loaded from configuration files, as a reload loads them: each
/// kind of change is sorted to when it applies.
@Suite struct ReloadPlanTests {
    /// The configuration every case starts from, key by key.
    static let base: [(key: String, value: String)] = [
        ("camera.device", "\"synthetic\""), ("camera.name", "\"yard\""),
        ("camera.width", "320"), ("camera.height", "240"), ("camera.fps", "15"),
        ("audio.enabled", "false"), ("encoder.crf", "23"), ("motion.threshold", "0.005"),
        ("recording.pre_roll", "2"), ("recording.post_roll", "2"),
        ("recording.max_clip", "60"), ("recording.pre_roll_max_mb", "16"),
        ("storage.path", "\"clips\""), ("storage.min_free_mb", "1"),
        ("log.level", "\"info\""), ("log.stats_interval", "0"),
        ("hooks.timeout", "30"),
    ]

    /// Writes the base configuration with `changes` to `name` in `dir` and loads it.
    static func settings(
        _ changes: [String: String] = [:], in dir: TemporaryDirectory, name: String
    ) throws -> Settings {
        let added = changes.filter { change in !base.contains { $0.key == change.key } }.sorted { $0.key < $1.key }
        var sections: [(name: Substring, lines: [String])] = []
        for (key, value) in base.map({ ($0.key, changes[$0.key] ?? $0.value) }) + added.map({ ($0.key, $0.value) }) {
            let parts = key.split(separator: ".")
            let line = "\(parts[1]) = \(value);"
            if let i = sections.firstIndex(where: { $0.name == parts[0] }) {
                sections[i].lines.append(line)
            } else {
                sections.append((parts[0], [line]))
            }
        }
        let text = sections.map { "\($0.name) = { \($0.lines.joined(separator: " ")) };" }.joined(separator: "\n")
        try text.write(toFile: dir.file(name), atomically: true, encoding: .utf8)
        return try Settings.load(path: dir.file(name))
    }

    /// The plan for a change from the base configuration.
    static func plan(_ changes: [String: String]) throws -> ReloadPlan {
        let dir = try TemporaryDirectory("vigil-reload-plan")
        defer { dir.remove() }
        // A mask that watches the left half of a 4×2 picture, for `motion.mask`.
        try "P2\n4 2\n255\n255 255 0 0\n255 255 0 0\n".write(
            toFile: dir.file("mask.pgm"), atomically: true, encoding: .utf8)
        return ReloadPlan(
            from: try settings(in: dir, name: "old.conf"), to: try settings(changes, in: dir, name: "new.conf"))
    }

    /// What a plan says, as one comparable value.
    struct Says: Equatable, CustomStringConvertible {
        var restart: [String] = []
        var log = false, detection = false, events = false, preRoll = false, storage = false
        var overlay = false, snapshot = false

        init(
            restart: [String] = [], log: Bool = false, detection: Bool = false, events: Bool = false,
            preRoll: Bool = false, storage: Bool = false, overlay: Bool = false, snapshot: Bool = false
        ) {
            (self.restart, self.log, self.detection, self.events, self.preRoll, self.storage) = (
                restart, log, detection, events, preRoll, storage
            )
            (self.overlay, self.snapshot) = (overlay, snapshot)
        }

        init(_ plan: ReloadPlan) {
            self.init(
                restart: plan.needsRestart, log: plan.logChanged, detection: plan.detectionChanged,
                events: plan.eventsChanged, preRoll: plan.preRollChanged, storage: plan.storageChanged,
                overlay: plan.overlayChanged, snapshot: plan.snapshotChanged)
        }

        var description: String {
            "restart \(restart) log \(log) detection \(detection) events \(events) pre-roll \(preRoll) storage \(storage) overlay \(overlay) snapshot \(snapshot)"
        }
    }

    /// Each setting changed on its own is sorted to when it applies; the settings that
    /// apply alike are listed together.
    @Test(arguments: [
        (
            Says(restart: ["camera"]),
            ["camera.width": "640", "camera.device": "\"/dev/video1\"", "camera.rotation": "180"]
        ),
        (Says(restart: ["audio"]), ["audio.enabled": "true"]),
        (Says(restart: ["encoder"]), ["encoder.crf": "28", "encoder.keyframe_interval": "0.5"]),
        (Says(log: true), ["log.level": "\"debug\"", "log.stats_interval": "60"]),
        (Says(detection: true), ["motion.threshold": "0.01", "motion.mask": "\"mask.pgm\""]),
        (Says(events: true), ["recording.post_roll": "5", "recording.max_clip": "120"]),
        (Says(preRoll: true), ["recording.pre_roll": "3", "recording.pre_roll_max_mb": "32"]),
        (
            Says(storage: true),
            [
                "storage.file_pattern": "\"{camera}/%H%M%S.mov\"", "storage.max_age_days": "3",
                "storage.min_free_mb": "5", "hooks.timeout": "10",
            ]
        ),
        (Says(restart: ["storage.path"]), ["storage.path": "\"elsewhere\""]),
        (
            Says(overlay: true),
            ["overlay.text": "\"%H:%M\"", "overlay.position": "\"bottom-right\"", "overlay.scale": "2"]
        ),
        (Says(snapshot: true), ["snapshot.enabled": "false", "snapshot.width": "320", "snapshot.live_interval": "5"]),
        (Says(restart: ["camera"]), ["camera.name": "\"porch\""]),
    ])
    func eachChangeAppliesWhenItCan(expected: Says, changes: [String: String]) throws {
        for (key, value) in changes {
            #expect(Says(try Self.plan([key: value])) == expected, "\(key) = \(value)")
        }
    }

    /// Every section that waits for a restart is named, in the order of the file.
    @Test func restartSectionsInFileOrder() throws {
        let plan = try Self.plan([
            "encoder.crf": "28", "camera.fps": "10", "audio.rate": "16000", "log.level": "\"debug\"",
            "storage.path": "\"elsewhere\"",
        ])
        #expect(Says(plan) == Says(restart: ["camera", "audio", "encoder", "storage.path"], log: true))
    }

    /// The pipeline swaps something between events for detection, events, pre-roll, overlay and
    /// snapshot changes, and for nothing else. (An overlay or snapshot change alone once never
    /// reached the pipeline: the text and the pictures stayed as they were until a restart.)
    @Test(arguments: [
        (["motion.threshold": "0.01"], true), (["recording.post_roll": "5"], true), (["recording.pre_roll": "3"], true),
        (["overlay.text": "\"%H:%M\""], true), (["snapshot.quality": "50"], true),
        (["storage.min_free_mb": "5"], false), (["log.level": "\"debug\""], false), (["camera.width": "640"], false),
    ])
    func changesPipeline(changes: [String: String], expected: Bool) throws {
        #expect(try Self.plan(changes).changesPipeline == expected)
    }

    /// `sections` names every section of `Settings` (its stored properties, the mask with
    /// motion and the file's raw values aside), and each is sorted to when it applies.
    @Test func everySectionOfTheSettingsIsPlanned() throws {
        let defaults = try Settings.defaults()
        let fields = Mirror(reflecting: defaults).children.compactMap(\.label)
            .filter { $0 != "values" && $0 != "motionMask" }
        let planned = ReloadPlan.sections.map(\.section)
        #expect(
            Set(fields).subtracting(planned).isEmpty, "not in ReloadPlan.sections: \(Set(fields).subtracting(planned))")
        #expect(Set(planned).subtracting(fields + ["storage.path"]).isEmpty)
        #expect(
            ReloadPlan.sections.filter { $0.applies == .afterRestart }.map(\.section)
                == ["camera", "audio", "encoder", "mqtt", "web", "upload", "rtsp", "onvif", "storage.path"])
    }

    /// Two reloads before the pipeline applied the first: what either changed is applied.
    @Test func reloadsThatCameTogetherAreMerged() throws {
        let first = try Self.plan(["motion.threshold": "0.01"])
        let second = try Self.plan(["overlay.text": "\"%H:%M\"", "camera.width": "640"])
        #expect(Says(first.merging(second)) == Says(restart: ["camera"], detection: true, overlay: true))
        #expect(Says(second.merging(first)) == Says(restart: ["camera"], detection: true, overlay: true))
    }

    @Test func identicalSettingsChangeNothing() throws {
        #expect(Says(try Self.plan([:])) == Says())
        let defaults = try Settings.defaults()
        #expect(Says(ReloadPlan(from: defaults, to: defaults)) == Says())
        #expect(!ReloadPlan(from: defaults, to: defaults).changesPipeline)
    }

    /// Each retention setting a reload changes, old and new as the file writes them, and
    /// whether the new value deletes clips the old one kept (0 is "no limit" for age and size).
    @Test(
        arguments: [
            (["storage.max_age_days": "0"], ["storage.max_age_days": "30"], "storage.max_age_days", "0", "30", true),
            (["storage.max_age_days": "30"], ["storage.max_age_days": "0"], "storage.max_age_days", "30", "0", false),
            (["storage.max_age_days": "30"], ["storage.max_age_days": "7"], "storage.max_age_days", "30", "7", true),
            (["storage.max_size_mb": "500"], ["storage.max_size_mb": "0"], "storage.max_size_mb", "500", "0", false),
            (["storage.max_size_mb": "0"], ["storage.max_size_mb": "100"], "storage.max_size_mb", "0", "100", true),
            (["storage.min_free_mb": "1"], ["storage.min_free_mb": "900"], "storage.min_free_mb", "1", "900", true),
            (["storage.min_free_mb": "900"], ["storage.min_free_mb": "1"], "storage.min_free_mb", "900", "1", false),
        ] as [([String: String], [String: String], String, String, String, Bool)])
    func retentionChangesAreNamedWithTheirValues(
        old: [String: String], new: [String: String], setting: String, was: String, now: String, deletesMore: Bool
    ) throws {
        let dir = try TemporaryDirectory("vigil-reload-plan")
        defer { dir.remove() }
        let before = try Self.settings(old, in: dir, name: "old.conf")
        let after = try Self.settings(new, in: dir, name: "new.conf")
        #expect(
            ReloadPlan.retentionChanges(from: before.storage, to: after.storage) == [
                ReloadPlan.RetentionChange(setting: setting, old: was, new: now, deletesMore: deletesMore)
            ])
        #expect(ReloadPlan.retentionChanges(from: before.storage, to: before.storage).isEmpty)
    }
}
