import Foundation
import Synchronization

/// What a child process writes to a pipe, read on a thread of its own and split into lines
/// (an unfinished last line is kept too), until the pipe closes.
public final class LineReader: Sendable {
    private let collected = Mutex<[String]>([])
    private let closed = Mutex(false)

    public init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            var pending = ""
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let line = String(pending[..<newline])
                    pending = String(pending[pending.index(after: newline)...])
                    collected.withLock { $0.append(line) }
                }
            }
            if !pending.isEmpty { collected.withLock { $0.append(pending) } }
            closed.withLock { $0 = true }
        }
    }

    /// The lines so far.
    public var lines: [String] { collected.withLock { $0 } }

    /// Waits until the writer has closed the pipe and every line is in.
    public func waitUntilClosed() {
        while !closed.withLock({ $0 }) { usleep(1000) }
    }
}
