import FoundationEssentials
import Logging
import POSIX
import Recorder

/// The events journal as an event sink: a line for every saved clip, in the storage directory
/// the clip is in, and the lines of the clips retention deleted pruned away.
public struct JournalSink: EventSink {
    let log: Logger

    public init(log: Logger) {
        self.log = log.with(("component", "journal"))
    }

    public func handle(_ event: AgentEvent) {
        switch event {
        case .clipSaved(let saved):
            do { try EventsJournal(storage: saved.storage).append(saved.record) } catch {
                log.error("events journal not written", [("error", .string(error.description))])
            }
        case .clipsDeleted(let deleted):
            // The journal keeps lines for the clips that are still there.
            let storage = deleted.storage
            do { try EventsJournal(storage: storage).prune { storage.exists($0) } } catch {
                log.warning("events journal not shortened", [("error", .string(error.description))])
            }
        case .motionStarted, .motionEnded, .clipStarted, .stats, .reloaded, .detection, .notice, .livePicture,
            .storageReady, .clipUploaded:
            break
        }
    }
}

extension ClipNaming {
    /// Names in the system's local time.
    init(pattern: String, camera: String) {
        self.init(pattern: pattern, camera: camera, timeZone: SystemTimeZone())
    }
}

extension ClipRecord {
    /// A journal timestamp in the system's local time.
    static func timestamp(_ date: Date) -> String {
        timestamp(date, timeZone: SystemTimeZone())
    }
}
