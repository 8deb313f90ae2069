/// The web server's connections as far as keeping room for new clients needs: what each is
/// doing and since when. A value: the server's thread drives it from the library's
/// notifications, and it says which connection to push out when a new one comes and the server
/// already holds `keep`.
///
/// libmicrohttpd has no eviction of its own: at its connection limit it stops accepting, so
/// connections that trickle a request forever (slowloris) or sit idle between requests would
/// lock every new client out. Here a newcomer always gets in and, beyond `keep`, the one to go
/// is, in this order: the connection that has waited longest without sending a whole request
/// (its first one: a slow or hostile client), then the one idle longest between requests (a
/// browser's spare keep-alive), then the one whose answer has been going out longest (the
/// slowest reader). A stream (a live viewer) never goes: streams have a limit of their own,
/// below `keep`, so there is always another to push out. (A request refused at sign-in counts
/// as waiting until its 401 is sent: it is never long.)
struct ConnectionRoom {
    /// What a connection is doing.
    enum Phase: Comparable {
        /// Connected, no whole request yet.
        case waiting
        /// Between requests (keep-alive): one answered, the next not whole yet.
        case idle
        /// A response is being sent (or built on one of the server's work threads).
        case answering
        /// A streamed response (live video) is being sent.
        case streaming
    }

    struct Connection {
        var phase: Phase
        /// When it entered its phase, on the room's own count of events (only the order matters).
        var since: UInt64
        /// Its socket, to be shut down when it must go.
        var descriptor: Int32
        /// Told to go; gone once the library says it is closed.
        var pushedOut = false
    }

    /// How many connections are kept; a newcomer beyond it pushes one out.
    let keep: Int
    private(set) var connections: [UInt: Connection] = [:]
    /// Those told to go that the library has not closed yet.
    private var leaving = 0
    private var clock: UInt64 = 0

    init(keep: Int) { self.keep = keep }

    /// How many connections are open and not told to go.
    var count: Int { connections.count - leaving }

    /// A new connection, `key`, on `descriptor`: the descriptor of the one to push out to make
    /// room for it, if the room is full and one may go.
    mutating func started(_ key: UInt, descriptor: Int32) -> Int32? {
        connections[key] = Connection(phase: .waiting, since: tick(), descriptor: descriptor)
        guard count > keep else { return nil }
        var out: (key: UInt, connection: Connection)?
        for (other, connection) in connections
        where other != key && !connection.pushedOut && connection.phase != .streaming {
            if let o = out, (o.connection.phase, o.connection.since) < (connection.phase, connection.since) { continue }
            out = (other, connection)
        }
        guard let out else { return nil }
        connections[out.key]?.pushedOut = true
        leaving += 1
        return out.connection.descriptor
    }

    /// `key`'s request is whole, and answered: by a response of bytes or of a file, or a stream.
    mutating func answering(_ key: UInt, streaming: Bool) {
        enter(streaming ? .streaming : .answering, key)
    }

    /// `key`'s request is over (its answer sent or given up): it waits for the next.
    mutating func completed(_ key: UInt) { enter(.idle, key) }

    /// The library closed `key`.
    mutating func closed(_ key: UInt) {
        guard let gone = connections.removeValue(forKey: key) else { return }
        if gone.pushedOut { leaving -= 1 }
    }

    private mutating func enter(_ phase: Phase, _ key: UInt) {
        guard connections[key] != nil else { return }
        let now = tick()
        connections[key]?.phase = phase
        connections[key]?.since = now
    }

    private mutating func tick() -> UInt64 {
        clock += 1
        return clock
    }
}
