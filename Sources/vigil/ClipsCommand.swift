import Configuration
import FoundationEssentials
import Media
import Recorder
import Storage

/// `vigil clips`: the recorded clips, from the events journal.
enum ClipsCommand: Command {
    static let name = "clips"
    static let abstract = "List recorded clips from the events journal."
    static let synopsis = "[--config FILE] [--json]"
    static let discussion = """
        Reads storage.path/events.jsonl and prints one line per clip: when it starts, how long
        it is, the motion score, and its file (marked "deleted" once retention removed it).
        --json prints the journal lines themselves.
        """
    static let options = [
        configOption, OptionSpec(name: "json", valueName: nil, help: "print the journal's JSON lines"),
    ]

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard arguments.positionals.isEmpty else {
            throw UsageError(message: "unexpected argument \(arguments.positionals[0])")
        }
        guard let (_, settings) = loadSettings(arguments) else { return .config }
        let storage = DiskStorage(root: settings.storage.path)
        let journal = EventsJournal(storage: storage)
        let records: [ClipRecord]
        do {
            let (read, bad) = try journal.records()
            records = read
            if !bad.isEmpty {
                printError(
                    "vigil clips: \(journal.path): \(bad.count) unreadable line(s), first at line \(bad[0]); skipped")
            }
        } catch {
            printError("vigil clips: \(error.description)")
            return .ioError
        }
        if arguments.flag("json") {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for r in records {
                if let data = try? encoder.encode(r) { printOut(String(decoding: data, as: UTF8.self)) }
            }
            return .success
        }
        if records.isEmpty {
            printOut("no clips recorded yet in \(settings.storage.path)")
            return .success
        }
        printOut("start".padding(to: 31) + "duration".padding(to: 10) + "peak".padding(to: 8) + "file")
        for r in records {
            let exists = storage.exists(r.file)
            let duration = DecimalText.fixed(r.durationSeconds, 1) + "s"
            let peak = r.peakScore.map { DecimalText.fixed($0, 3) } ?? (r.repaired == true ? "repaired" : "-")
            printOut(
                r.start.padding(to: 31) + duration.padding(to: 10) + peak.padding(to: 8) + r.file
                    + (exists ? "" : "  (deleted)"))
        }
        printOut("\(records.count) clip(s) in \(settings.storage.path)")
        return .success
    }
}
