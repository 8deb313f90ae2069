import QuickTime
import Recorder
import Storage

/// `vigil repair FILE…`: finishes clips whose recording was interrupted.
enum RepairCommand: Command {
    static let name = "repair"
    static let abstract = "Turn interrupted clips into normal movies."
    static let synopsis = "FILE…"
    static let discussion = """
        A clip that was being recorded when the agent was killed or the power failed is a
        fragmented movie: it plays up to its last complete second, but some players show no
        duration and cannot seek. repair appends a complete index and hides the fragment
        boxes, without moving any sample, so the file becomes a normal movie holding every
        complete fragment. A partly written last fragment is cut off. A file that is already
        complete is left as it is; a file repair does not understand is never changed.
        The agent does this by itself for its own clips when it starts.

        A clip a running agent is writing is skipped (the agent finishes it itself). A clip
        the agent could not repair when it started is moved aside as NAME.mov.damaged, its
        bytes kept; repair says what it is and leaves it as it is.

        Exit status: 0 when every file was repaired or already complete; 66 when a file does
        not exist; 74 on a read or write error; 65 when a file is not a movie repair can
        finish (or holds nothing to recover); 75 when a file was skipped because an agent is
        writing it.
        """
    static let options: [OptionSpec] = []
    static let positionalLimit = Int.max

    static func run(_ arguments: ParsedArguments) throws(UsageError) -> ExitCode {
        guard !arguments.positionals.isEmpty else { throw UsageError(message: "name at least one FILE to repair") }
        var worst = ExitCode.success
        for path in arguments.positionals {
            do {
                if let report = try MovieRepair.repair(path: path) {
                    var line = "\(path): repaired, \(report.fragments) fragments, \(report.videoFrames) video frames"
                    if report.audioFrames > 0 { line += ", \(report.audioFrames) audio sample frames" }
                    if report.droppedFragments > 0 {
                        line +=
                            ", dropped the last \(report.droppedFragments) fragment(s) that did not reach the disk whole (\(report.dropReason ?? "unreadable")), \(report.discardedBytes) bytes"
                    } else if report.discardedBytes > 0 {
                        line += ", cut \(report.discardedBytes) bytes of an incomplete last fragment"
                    }
                    printOut(line)
                } else {
                    printOut("\(path): already complete")
                }
            } catch  where error.kind == .inUse {
                // An agent is recording it: finishing it now would race the agent's own close.
                printOut("\(path): skipped: a running agent is writing it; it is finished when the clip ends")
                if worst == .success { worst = .temporaryFailure }
            } catch {
                printError("vigil repair: \(error.description)")
                if ClipNaming.isDamaged(path), error.kind == .notRepairable {
                    printError(
                        "vigil repair: \(path): the agent could not repair this clip when it started and moved it aside; "
                            + "no player opens it, its bytes are kept as they were (retention deletes it like a clip)")
                }
                let code: ExitCode =
                    switch error.kind {
                    case .noSuchFile: .noInput
                    case .inputOutput: .ioError
                    case .notRepairable, .nothingRecorded, .inUse: .dataError
                    }
                if worst == .success || worst == .temporaryFailure || code == .ioError { worst = code }
            }
        }
        return worst
    }
}
