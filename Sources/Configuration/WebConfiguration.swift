extension Settings {
    /// The `web` section: the agent's own web server (`/`, `/api/clips`, the clips, `/metrics`).
    public struct Web: Equatable, Sendable {
        public var enabled: Bool
        /// The numeric address it listens on: this machine's loopback only (127.0.0.1, ::1).
        public var listen: String
        /// Its port; 0 for any free one (the log says which).
        public var port: Int
    }

    static func web(_ v: ConfigValues) throws(ConfigurationError) -> Web {
        let listen = v.text("web.listen")
        if !Web.isLoopback(listen) {
            throw v.error(
                "web.listen",
                "web.listen = \"\(listen)\" is not this machine's loopback address — the web server has no password, so it serves this machine only: use 127.0.0.1 (or ::1), and from another computer reach it through SSH (ssh -L 8080:127.0.0.1:8080 the-camera, then http://localhost:8080/)"
            )
        }
        return Web(enabled: v.boolean("web.enabled"), listen: listen, port: v.integer("web.port"))
    }
}

extension Settings.Web {
    /// Whether `address` is a numeric loopback address: 127.x.y.z or ::1.
    public static func isLoopback(_ address: String) -> Bool {
        if address == "::1" { return true }
        let parts = address.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCII) && part.allSatisfy(\.isNumber)
                && (Int(part) ?? 256) <= 255
        }
    }
}
