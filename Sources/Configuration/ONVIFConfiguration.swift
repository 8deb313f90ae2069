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
    }

    static func onvif(_ v: ConfigValues, web: Web, rtsp: RTSP) throws(ConfigurationError) -> ONVIF {
        let onvif = ONVIF(
            enabled: v.boolean("onvif.enabled"), discovery: v.boolean("onvif.discovery"),
            discoveryPort: v.integer("onvif.discovery_port"))
        if onvif.enabled && (!web.enabled || !rtsp.enabled) {
            let off = [web.enabled ? nil : "web.enabled", rtsp.enabled ? nil : "rtsp.enabled"].compactMap { $0 }
            throw v.error(
                "onvif.enabled",
                "onvif.enabled = true needs web.enabled = true (ONVIF's services are on the web server) and rtsp.enabled = true (its stream is the RTSP server's); \(off.joined(separator: " and ")) \(off.count == 1 ? "is" : "are") false — set \(off.map { "\($0) = true" }.joined(separator: " and ")), or onvif.enabled = false"
            )
        }
        return onvif
    }
}
