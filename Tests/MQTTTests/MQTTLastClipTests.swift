import Capture
import Foundation
import Media
import TestSupport
import Testing

@testable import Agent
@testable import MQTT
@testable import Recorder

/// MQTT's `last_clip` when the agent starts: the catalogue's newest clip (one entry asked,
/// however many there are), retained, so that a broker that restarted meanwhile — or never
/// heard of the camera — has it; the events journal is not read for it.
@Suite struct MQTTLastClipTests {
    static func record(_ file: String, at seconds: Double) -> ClipRecord {
        ClipRecord(
            file: file, camera: "yard", start: MQTTMessagesTableTests.time(seconds),
            end: MQTTMessagesTableTests.time(seconds + 4), cause: .motion, triggerTime: nil, triggerSourceSeconds: nil,
            preRollSeconds: 1, durationSeconds: 4, frames: 60, audioFrames: 0, bytes: 1, peakScore: 0.2, part: 1)
    }

    @Test func theStorageComingUpSaysTheCataloguesNewestClipWithoutReadingTheJournal() throws {
        let inner = MemoryStorage()
        // Any read of the journal fails: the newest clip must come from the catalogue.
        let storage = JournalReadHook(inner) { _ throws(FileError) in
            throw FileError(path: "events.jsonl", operation: "read", reason: "not to be read")
        }
        let messages = MQTTMessages(base: "vigil/yard", camera: "yard", timeZone: MQTTMessagesTableTests.utc)
        #expect(MQTTSink.newestClip(in: storage) == nil, "no clip yet: nothing to say")
        let catalogue = try inner.openCatalogue()
        try catalogue.add(
            (0..<250).map { Self.record("2026-12-01/yard-\($0).mov", at: Double($0) * 60) }.map {
                CatalogueEntry(record: $0)
            })
        // An older clip entered last: the newest is by its start, not by when it was entered.
        try catalogue.add(CatalogueEntry(record: Self.record("2026-11-30/yard-old.mov", at: -86_400)))
        let newest = try #require(MQTTSink.newestClip(in: storage))
        #expect(
            MQTTMessagesTableTests.Row(messages.lastClip(newest)).description
                == MQTTMessagesTableTests.Row("last_clip", retain: true, .text("2026-12-01/yard-249.mov")).description)

        // With a link base, its URL, as the `saved` event's `last_clip` says it.
        let linked = MQTTMessages(
            base: "vigil/yard", camera: "yard", timeZone: MQTTMessagesTableTests.utc,
            linkBase: "http://garage.local:8080")
        #expect(linked.lastClip(newest).text == "http://garage.local:8080/clips/2026-12-01/yard-249.mov")
    }
}

extension MQTTBrokerTests {
    /// The agent restarted on a new broker (one that lost its retained messages): `last_clip`
    /// is the newest clip of the storage directory, retained, before any clip is recorded.
    @Test func afterARestartTheNewestClipIsRetainedOnANewBroker() throws {
        let dir = try TemporaryDirectory("vigil-mqtt-last-clip")
        defer { dir.remove() }
        let first = try Broker(dir)
        let footage = try writeFootage(
            scene(seconds: 10, objects: [crossing(1, 3), crossing(6, 8)]), to: dir.file("two.y4m"))
        let agent = try AgentProcess(config: config(dir, footage: footage, port: first.port, realtime: false))
        #expect(agent.waitForExit(timeout: 120) == 0, "\(agent.output)")
        let clips = movieFiles(in: dir.file("clips")).sorted()
        try #require(clips.count == 2, "\(agent.output)")

        // A broker that never heard of the camera; the synthetic camera, where nothing moves enough.
        let second = try Broker(dir)
        let watcher = try Subscriber(port: second.port, topic: "vigil/yard/last_clip", in: dir)
        let again = try AgentProcess(
            config: config(dir, footage: nil, port: second.port, extra: "motion = { threshold = 0.4; };"))
        defer { again.kill(SIGKILL) }
        #expect(watcher.waitFor(timeout: 60) { !$0.isEmpty }, "\(again.output)")
        watcher.stop()
        #expect(watcher.messages.map(\.payload) == [clips[1]], "\(watcher.messages)")
        // Retained: what a newcomer gets.
        let newcomer = try Subscriber(port: second.port, topic: "vigil/yard/last_clip", in: dir)
        #expect(newcomer.waitFor(timeout: 10) { !$0.isEmpty })
        newcomer.stop()
        #expect(newcomer.messages.map(\.payload) == [clips[1]] && newcomer.messages.first?.retained == true)
        again.kill(SIGTERM)
        #expect(again.waitForExit(timeout: 60) == 0, "\(again.output)")
        #expect(movieFiles(in: dir.file("clips")).sorted() == clips, "nothing recorded meanwhile")
    }
}
