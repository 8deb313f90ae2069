extension Settings {
    /// The `rtsp` section: the camera's H.264 over RTSP at `rtsp://HOST:PORT/<camera.name>`, from
    /// the GOPs the agent encodes for its clips (nothing encoded again), for NVRs, VLC and Home
    /// Assistant. Same rule as the web server: this machine only without a password; with
    /// `web.password_file`, Digest with the same users.
    public struct RTSP: Equatable, Sendable {
        public var enabled: Bool
        /// The numeric address it listens on: this machine's loopback only (127.0.0.1, ::1)
        /// unless `web.password_file` is set.
        public var listen: String
        /// Its port; 0 for any free one (the log says which).
        public var port: Int
        /// `web.password_file`, made absolute; nil when none is set (then: loopback only).
        public var passwordFile: String?
        /// The realm of that file (read when the settings are loaded, with the server on).
        public var realm: String?
        /// Its users (read with the realm): the sign-in throttle checks a refused response
        /// against them (the server reads the file itself).
        public var passwords: WebPasswords?
        /// Why the server cannot run as configured (its password file cannot be read or is not
        /// one): the agent records without it, and says so.
        public var problem: ConfigurationError?

        /// What `vigil check` says of `problem` (the server would stay off), as FILE:LINE.
        public var checkWarning: String? {
            guard enabled, let problem else { return nil }
            return problem.warning("the RTSP server stays off until then; recording is not affected")
        }
    }

    static func rtsp(_ v: ConfigValues, web: Web) throws(ConfigurationError) -> RTSP {
        let listen = v.text("rtsp.listen")
        if !Web.isLoopback(listen) && web.passwordFile == nil {
            throw v.error(
                "rtsp.listen",
                "rtsp.listen = \"\(listen)\" serves other machines, and there is no password — set web.password_file and make a password with `vigil passwd`, or use 127.0.0.1 (or ::1)"
            )
        }
        var rtsp = RTSP(
            enabled: v.boolean("rtsp.enabled"), listen: listen, port: v.integer("rtsp.port"),
            passwordFile: web.passwordFile)
        guard rtsp.enabled, let path = rtsp.passwordFile else { return rtsp }
        if let passwords = web.passwords {
            rtsp.realm = passwords.realm
            rtsp.passwords = passwords
            return rtsp
        }
        do {
            let (passwords, status) = try WebPasswords.readWithStatus(path)
            if let problem = SecretFile.problem(
                key: "web.password_file", path: path, status: status,
                holding: "hashes that sign in as well as the passwords")
            {
                rtsp.problem = v.error("web.password_file", problem)
            } else {
                rtsp.realm = passwords.realm
                rtsp.passwords = passwords
            }
        } catch {
            rtsp.problem = v.error("web.password_file", error.description)
        }
        return rtsp
    }
}

extension Settings.RTSP {
    /// A server on `listen`:`port` without a password (what the bench serves).
    package init(listen: String, port: Int) {
        self.init(enabled: true, listen: listen, port: port, passwordFile: nil)
    }
}
