extension Settings {
    /// The `onvif` section: ONVIF's device and media services on the web server
    /// (`/onvif/device_service`, `/onvif/media_service`), whose stream is the RTSP server's, and
    /// WS-Discovery, so NVRs and Home Assistant find and add the camera by themselves.
    public struct ONVIF: Equatable, Sendable {
        public var enabled: Bool
        /// WS-Discovery: answer probes (UDP, 239.255.255.250), Hello at start, Bye at stop.
        public var discovery: Bool
        /// Its UDP port: 3702, where every client probes (another only for tests).
        public var discoveryPort: Int
        /// `onvif.password_file`, made absolute; nil when none is set (then a PasswordDigest,
        /// what Home Assistant sends, cannot be checked).
        public var passwordFile: String? = nil
        /// Its users and their passwords (read with onvif.enabled and web.password_file).
        public var passwords: ONVIFPasswords? = nil
        /// Why the file cannot be used (unreadable, not such a file, readable by others): `vigil
        /// check` and `vigil run` exit 78 on it; `vigil passwd --onvif` makes it anew.
        public var problem: ConfigurationError? = nil
        /// Users of the file that `web.password_file` lacks (their pictures and stream, HTTP
        /// and RTSP Digest, would be refused): `vigil check` warns.
        public var usersMissingFromWeb: [String] = []

        /// What `vigil check` warns of: no file while the web's needs one for Home Assistant, or
        /// users the web's file lacks; nil when none.
        public func checkWarnings(web: Settings.Web) -> [String] {
            guard enabled, problem == nil, web.enabled, web.passwordFile != nil else { return [] }
            guard passwordFile != nil else {
                return [
                    "warning: onvif.enabled with web.password_file but no onvif.password_file: a WS-Security PasswordDigest, which Home Assistant's ONVIF integration and most NVRs send, cannot be checked against the web's hashes and is refused — set onvif.password_file (for example \"/etc/vigil/onvif-passwords\") and run `sudo vigil passwd --onvif USER`"
                ]
            }
            return usersMissingFromWeb.map {
                "warning: onvif.password_file: \($0) is not in web.password_file, so Home Assistant's picture (HTTP Digest) and stream (RTSP Digest) for \($0) will be refused — run `sudo vigil passwd --onvif \($0)` to set it in both"
            }
        }
    }

    static func onvif(
        _ v: ConfigValues, web: Web, rtsp: RTSP, directory: String = "/"
    ) throws(ConfigurationError) -> ONVIF {
        var onvif = ONVIF(
            enabled: v.boolean("onvif.enabled"), discovery: v.boolean("onvif.discovery"),
            discoveryPort: v.integer("onvif.discovery_port"))
        if onvif.enabled && (!web.enabled || !rtsp.enabled) {
            let off = [web.enabled ? nil : "web.enabled", rtsp.enabled ? nil : "rtsp.enabled"].compactMap { $0 }
            throw v.error(
                "onvif.enabled",
                "onvif.enabled = true needs web.enabled = true (ONVIF's services are on the web server) and rtsp.enabled = true (its stream is the RTSP server's); \(off.joined(separator: " and ")) \(off.count == 1 ? "is" : "are") false — set \(off.map { "\($0) = true" }.joined(separator: " and ")), or onvif.enabled = false"
            )
        }
        let file = v.text("onvif.password_file")
        onvif.passwordFile = file.isEmpty ? nil : resolve(file, against: directory)
        // Read only when it is used: ONVIF on, with the web's sign-in.
        guard onvif.enabled, let path = onvif.passwordFile, web.passwordFile != nil else { return onvif }
        do {
            let (passwords, status) = try ONVIFPasswords.readWithStatus(path)
            if let problem = SecretFile.problem(
                key: "onvif.password_file", path: path, status: status, holding: "the ONVIF passwords in the clear")
            {
                onvif.problem = v.error("onvif.password_file", problem)
            } else {
                onvif.passwords = passwords
                if let known = web.passwords?.users {
                    onvif.usersMissingFromWeb = passwords.users.keys.sorted().filter { known[$0] == nil }
                }
            }
        } catch {
            onvif.problem = v.error("onvif.password_file", "onvif.password_file: \(error.description)")
        }
        return onvif
    }
}
