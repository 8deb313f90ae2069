internal import CMicroHTTPD
import POSIX
import Synchronization

// Answers that need work beyond memory (reading the journal, walking the storage directory),
// built off the polling thread. The polling thread serves every connection: a page built on it
// (seconds on a slow SD card, with a year of clips) would hold up every other client, the live
// viewers first. So a request the server's `needsWork` picks is handed to one of a few work
// threads of the server's own (`WorkThreads`, "web-work" in `top -H`) and its connection is
// suspended, costing nothing, until the answer is built; the work thread then resumes it, and
// the library, calling the access handler again, finds the answer and queues it (`answer`).
// The queue is bounded: beyond it, a request is answered 503 at once. The stop does not wait
// for a build: each request waiting or being built is answered 503 and its connection resumed
// (the library must not stop with one suspended); what a work thread builds afterwards is
// dropped.

/// One request whose answer a work thread builds, and its connection meanwhile. The lock orders
/// the polling thread's suspension and the answer's arrival (from a work thread, or from the
/// stop): the connection is resumed only after it was suspended, once, and never after its
/// answer was given — so never once the library may have closed it.
final class PendingAnswer: Sendable {
    struct State {
        /// The answer: the first one given (built, or the stop's 503) is kept.
        var response: HTTPResponse?
        var suspended = false
    }
    let request: HTTPRequest
    let connection: ConnectionPointer
    let state = Mutex(State())

    init(request: HTTPRequest, connection: OpaquePointer) {
        self.request = request
        self.connection = ConnectionPointer(pointer: connection)
    }

    /// On the polling thread, once it is queued: the answer when it is already there (it is
    /// then queued at once); else the connection is suspended until it is.
    func suspendUnlessAnswered() -> HTTPResponse? {
        state.withLock { s in
            if let response = s.response { return response }
            MHD_suspend_connection(connection.pointer)
            s.suspended = true
            return nil
        }
    }

    /// The answer (from a work thread, or the stop's): kept, and the connection resumed, when
    /// it is the first; else dropped (the stop answered first).
    func answer(_ response: HTTPResponse) {
        let kept = state.withLock { s -> Bool in
            guard s.response == nil else { return false }
            s.response = response
            if s.suspended {
                s.suspended = false
                MHD_resume_connection(connection.pointer)
            }
            return true
        }
        if !kept, case .stream(let stream) = response.body { stream.close() }
    }

    /// On the polling thread, called again after the resume: the answer to queue.
    var answered: HTTPResponse? { state.withLock { $0.response } }
}

/// What became of a request handed to the work threads.
enum Handed {
    case queued
    /// Not queued: the queue is full, or the server stops; answer this now.
    case refused(HTTPResponse)
}

/// The web server's work threads and their bounded queue (`Limits.workThreads`,
/// `Limits.workQueue`): each takes the oldest request waiting, builds its answer with the
/// server's handler and gives it to the request (`PendingAnswer.answer`).
///
/// `@unchecked Sendable`: `waiting`, `building` and `stopping` are read and written only while
/// holding `condition`.
final class WorkThreads: @unchecked Sendable {
    private let condition = Condition()
    private var waiting: [PendingAnswer] = []
    private var building: [ObjectIdentifier: PendingAnswer] = [:]
    private var stopping = false
    let threads: Int
    let capacity: Int
    let handler: HTTPServer.Handler

    init(threads: Int, capacity: Int, handler: @escaping HTTPServer.Handler) {
        self.threads = threads
        self.capacity = capacity
        self.handler = handler
    }

    /// Starts the threads; on failure, those started end (`stop`).
    func start() throws(ThreadStartError) {
        for _ in 0..<threads {
            do { try startDetachedThread("web-work") { [self] in run() } } catch {
                _ = stop()
                throw error
            }
        }
    }

    /// Queues `pending`, unless the queue is full or the server stops.
    func hand(_ pending: PendingAnswer) -> Handed {
        condition.withLock {
            if stopping { return .refused(.serverStopping) }
            // Counted with those being built, so the bound holds while a thread has yet to wake
            // for the one it is about to take.
            guard waiting.count + building.count < capacity + threads else {
                return .refused(.workQueueFull(capacity))
            }
            waiting.append(pending)
            condition.broadcast()
            return .queued
        }
    }

    /// Requests waiting for a thread, and answers being built (for tests).
    var counts: (waiting: Int, building: Int) { condition.withLock { (waiting.count, building.count) } }

    /// The server stops: nothing more is queued, an idle thread ends, a busy one ends after its
    /// build (not waited for). Returns the requests waiting and being built, for the stop to
    /// answer.
    func stop() -> [PendingAnswer] {
        condition.withLock {
            stopping = true
            condition.broadcast()
            defer { waiting = [] }
            return waiting + building.values
        }
    }

    private func run() {
        while true {
            let next = condition.withLock { () -> PendingAnswer? in
                while waiting.isEmpty && !stopping { condition.wait() }
                guard !stopping else { return nil }
                let pending = waiting.removeFirst()
                building[ObjectIdentifier(pending)] = pending
                return pending
            }
            guard let next else { return }
            next.answer(handler(next.request))
            condition.withLock { _ = building.removeValue(forKey: ObjectIdentifier(next)) }
        }
    }
}

/// Hands `request` on `connection` to the work threads (the access handler's last call for it,
/// on the polling thread): the connection is suspended until its answer is built, or answered
/// now when the queue is full or the server stops.
func handToWork(
    _ request: HTTPRequest, on connection: OpaquePointer?, body: RequestBody, server: Context
) -> MHD_Result {
    guard let connection else { return MHD_Result.NO }
    let pending = PendingAnswer(request: request, connection: connection)
    if case .refused(let response) = server.work.hand(pending) {
        return queue(response, on: connection, server: server)
    }
    body.pending = pending
    // Its request is whole and being answered: not one waiting for a request, the first to go
    // when a newcomer needs room.
    server.room.withLock { $0.answering(UInt(bitPattern: connection), streaming: false) }
    if let response = pending.suspendUnlessAnswered() { return queue(response, on: connection, server: server) }
    return MHD_Result.YES
}

extension HTTPResponse {
    /// The answer to a request that needs work when the work threads' queue is full: at once,
    /// with when to try again, and the connection closed after it.
    static func workQueueFull(_ limit: Int) -> HTTPResponse {
        var response = HTTPResponse.error(
            503, "The camera is building as many pages as it may (\(limit) waiting): try again in a moment.")
        response.headers += [("Retry-After", "5"), ("Connection", "close")]
        return response
    }

    /// The answer to a request while the server stops.
    static let serverStopping: HTTPResponse = {
        var response = HTTPResponse.error(503, "The server is stopping.")
        response.headers += [("Retry-After", "5"), ("Connection", "close")]
        return response
    }()
}
