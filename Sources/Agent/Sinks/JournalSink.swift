import FoundationEssentials
import Logging
import POSIX
import Recorder
import Synchronization

/// The events journal as an event sink: a line for every saved clip, in the storage directory
/// the clip is in, and the lines of the clips retention deleted pruned away — at once while the
/// journal is small (under `pruneAlways`), else once it has grown to twice its size after the
/// last pruning (or since the agent started): a journal of 100,000 clips is not written anew
/// for every batch retention deletes, and stays within twice what its clips need.
public final class JournalSink: EventSink {
    let log: Logger
    /// Per storage directory, the journal's size after it was last pruned (or first seen).
    private let pruned = Mutex<[String: Int64]>([:])
    /// A journal smaller than this is pruned at every deletion.
    static let pruneAlways: Int64 = 1 << 20

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
            guard let size = (try? storage.readTail(EventsJournal.name, maxBytes: 0))?.size else { return }
            let due = pruned.withLock { sizes in
                guard size >= Self.pruneAlways else { return true }
                guard let last = sizes[storage.root] else {
                    sizes[storage.root] = size
                    return false
                }
                return size >= 2 * last
            }
            guard due else { return }
            do { try EventsJournal(storage: storage).prune { storage.exists($0) } } catch {
                log.warning("events journal not shortened", [("error", .string(error.description))])
                return
            }
            let after = (try? storage.readTail(EventsJournal.name, maxBytes: 0))?.size ?? size
            pruned.withLock { $0[storage.root] = after }
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
