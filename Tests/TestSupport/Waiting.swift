import Foundation
import Media
import POSIX
import Recorder
import Storage

// Waiting for what happened, not for what the log says of it: the clips in a storage
// directory and its events journal, a broker's messages, an API's answer, an event sink's
// events — each asked again until it holds. One loop for every test that waits on a value.

/// Waits until `condition` holds, asking it again every `interval` seconds; false if it still
/// did not after `timeout` seconds (a test's "gave up waiting": generous, only a broken agent
/// waits that long, and never a measure of how long anything took).
@discardableResult
public func waitUntil(timeout: Double, every interval: Double = 0.02, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Clock.monotonic.now() + Timestamp.Duration(seconds: timeout)
    while true {
        if try condition() { return true }
        if Clock.monotonic.now() >= deadline { return false }
        usleep(UInt32(interval * 1_000_000))
    }
}

/// What the events journal of the storage directory `storage` lists — the clips saved (or
/// repaired), in order — now; none while it has no journal or cannot be read. A clip's line goes
/// in before the agent says it saved it.
public func journalRecords(in storage: String) -> [ClipRecord] {
    (try? EventsJournal(directory: storage).records().records) ?? []
}

/// The clip files under `storage` its journal does not list (yet): the clip being recorded, or
/// one a killed agent left. A clip's file is made when it starts, before the agent says so.
public func unsavedClips(in storage: String) -> [String] {
    // The files first: a clip saved in between is then in the journal read after them.
    let files = movieFiles(in: storage)
    let saved = Set(journalRecords(in: storage).map(\.file))
    return files.filter { !saved.contains($0) }
}

extension AgentProcess {
    /// Waits until `condition` holds, or the agent has ended (then `condition` is asked once more,
    /// of what it left): false if it did not hold within `timeout` seconds.
    @discardableResult
    public func waitUntil(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        var holds = false
        try TestSupport.waitUntil(timeout: timeout) {
            holds = try condition()
            return holds || !isRunning
        }
        if !holds && !isRunning { holds = try condition() }
        return holds
    }

    /// The agent's "web server listening" line, which holds the port the kernel chose (`address`)
    /// and the URL (`url`): nothing else says them. Nil if it did not come within `timeout` seconds.
    public func webServerListening(timeout: Double = 60) -> String? {
        waitFor("msg=\"web server listening\"", timeout: timeout)
    }
}
