// What the server's limits cost in file descriptors, and what it answers beyond its streams.

extension HTTPServer.Limits {
    /// Descriptors a connection may hold: its socket, and the file it sends (a duplicate).
    static let descriptorsPerConnection = 2
    /// Descriptors left for the rest of the agent: the library's listening socket, epoll and
    /// wake-up, the camera, the encoder, the clip and journal files, MQTT, the trigger socket and
    /// its clients, uploads, hooks' pipes.
    static let otherDescriptors = 64

    /// The descriptors these limits may take, with those left for the rest of the agent.
    public var descriptors: Int {
        (connections + spareConnections) * Self.descriptorsPerConnection + Self.otherDescriptors
    }

    /// These limits as the server keeps them for a process that may open `openFiles`
    /// descriptors (its RLIMIT_NOFILE; nil: unknown): streams at most a quarter of the
    /// connections, and the connections lowered to what the descriptors allow; whether they had
    /// to be lowered.
    func fitted(openFiles: Int?) -> (limits: Self, lowered: Bool) {
        var fitted = self
        var lowered = false
        if let openFiles {
            let affordable = (openFiles - Self.otherDescriptors) / Self.descriptorsPerConnection - spareConnections
            if affordable < connections {
                fitted.connections = max(4, affordable)
                fitted.connectionsPerAddress = min(connectionsPerAddress, fitted.connections)
                lowered = true
            }
        }
        fitted.streams = max(1, min(streams, fitted.connections / 4))
        return (fitted, lowered)
    }
}

extension HTTPResponse {
    /// The answer to a stream asked beyond the server's `limit`: at once, with when to try again,
    /// and the connection closed after it (its place is for someone else).
    static func tooManyStreams(_ limit: Int) -> HTTPResponse {
        var response = HTTPResponse.error(
            503, "The camera is sending as many live streams as it may (\(limit)): try again in a while.")
        response.headers += [("Retry-After", "10"), ("Connection", "close")]
        return response
    }
}
