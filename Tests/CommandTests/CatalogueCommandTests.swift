import Foundation
import Recorder
import TestSupport
import Testing

/// The clip catalogue as an owner meets it: a storage directory an earlier version wrote (clips
/// and `events.jsonl`, no catalogue) catalogued at the first start, and a catalogue that cannot
/// be read moved aside and made again — every clip listed by `/api/clips` either way.
@Suite struct CatalogueCommandTests {
    /// A storage directory with the clips of three events, as an earlier version left it: the
    /// clips and their journal, no catalogue, the first line in the journal's oldest form (the
    /// trigger's time under `trigger`). The directory and the clips' files, oldest first.
    static func earlierVersionsDirectory() throws -> (TemporaryDirectory, [String]) {
        let (dir, config) = try AgentTests.directory(
            "vigil-catalogue", footage: 30,
            objects: [AgentTests.object(3, 5), AgentTests.object(12, 14), AgentTests.object(21, 23)], realtime: false)
        let agent = try AgentProcess(config: config)
        #expect(agent.waitForExit(timeout: 300) == 0, "\(agent.output)")
        let storage = dir.file("clips")
        for name in CatalogueFile.names { try? FileManager.default.removeItem(atPath: storage + "/" + name) }
        let journal = storage + "/" + EventsJournal.name
        var lines = try String(contentsOfFile: journal, encoding: .utf8).split(separator: "\n").map(String.init)
        if var first = try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any] {
            first["trigger"] = first["trigger_time"]
            first["trigger_time"] = nil
            lines[0] = String(
                decoding: try JSONSerialization.data(withJSONObject: first, options: [.sortedKeys]), as: UTF8.self)
        }
        try (lines.joined(separator: "\n") + "\n").write(toFile: journal, atomically: true, encoding: .utf8)
        let files = journalRecords(in: storage).map(\.file)
        return (dir, files)
    }

    /// The agent on the synthetic camera with its web server, on `dir`'s storage (its motion
    /// hardly ever enough to record); its base URL.
    static func agentWithWeb(_ dir: TemporaryDirectory) throws -> (AgentProcess, String) {
        let config = try AgentTests.syntheticConfig(
            dir, extra: "web = { enabled = true; port = 0; };\nmotion = { threshold = 0.4; };")
        let agent = try AgentProcess(config: config)
        do { return (agent, try WebCommandTests.webAddress(of: agent)) } catch {
            agent.kill(SIGKILL)
            throw error
        }
    }

    /// The files `/api/clips` at `base` lists now, newest first.
    static func listed(_ base: String) throws -> [String] {
        try WebCommandTests.listedClips(base)?.compactMap { $0["file"] as? String } ?? []
    }

    @Test func aStorageDirectoryAnEarlierVersionWroteIsCataloguedAtTheFirstStart() throws {
        let (dir, files) = try Self.earlierVersionsDirectory()
        defer { dir.remove() }
        #expect(files.count == 3)
        let (agent, base) = try Self.agentWithWeb(dir)
        defer { agent.kill(SIGKILL) }
        #expect(
            try agent.waitUntil(timeout: 60) { try Self.listed(base).filter(files.contains) == files.reversed() },
            "\(agent.output)")
        let listed = try #require(try WebCommandTests.listedClips(base)).filter {
            files.contains($0["file"] as? String ?? "")
        }
        // The oldest line's form read as it meant: a motion event triggered at that time.
        #expect(listed.last?["trigger"] as? String == "motion" && listed.last?["trigger_time"] is String)
        let said = logLines(agent.output, "clip catalogue brought up to date")
        #expect(said.count == 1 && said.first.flatMap { logValue($0, "written") } == "3", "\(agent.output)")
        #expect(FileManager.default.fileExists(atPath: dir.file("clips/" + CatalogueFile.name)))
        // `vigil clips` beside the agent, which holds the directory: the catalogue, read only.
        let clips = try runTool(builtExecutable("vigil"), ["clips", "--config", dir.file("vigil.conf")])
        #expect(clips.status == 0 && clips.stderr.isEmpty, "\(clips.stderr)")
        let rows = clips.stdout.split(separator: "\n").map(String.init)
        #expect(
            rows.compactMap { $0.split(separator: " ").last.map(String.init) }.filter(files.contains)
                == files.reversed(), "\(clips.stdout)")
        agent.kill(SIGTERM)
        #expect(agent.waitForExit(timeout: 60) == 0, "\(agent.output)")
        #expect(!agent.output.contains("level=error"), "\(agent.output)")
    }

    @Test func aCatalogueThatCannotBeReadIsMovedAsideAndMadeAgain() throws {
        let (dir, files) = try Self.earlierVersionsDirectory()
        defer { dir.remove() }
        let catalogue = dir.file("clips/" + CatalogueFile.name)
        try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: catalogue))
        let (agent, base) = try Self.agentWithWeb(dir)
        defer { agent.kill(SIGKILL) }
        #expect(
            try agent.waitUntil(timeout: 60) { try Self.listed(base).filter(files.contains) == files.reversed() },
            "\(agent.output)")
        let said = logLines(
            agent.output, "the clip catalogue cannot be read; moved aside, a new one is made from the clips")
        #expect(said.count == 1, "\(agent.output)")
        #expect(said.first.flatMap { logValue($0, "level") } == "error")
        // Its bytes kept beside, for whoever wants to look.
        #expect(
            FileManager.default.contents(atPath: catalogue + ".damaged") == Data(repeating: 0x5A, count: 8192))
    }
}
