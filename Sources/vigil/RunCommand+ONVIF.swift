import Configuration
import Logging
import ONVIF
import POSIX
import Web

extension RunCommand {
    /// The camera as ONVIF describes it, with `onvif.enabled` and an RTSP server listening on
    /// `rtspPort`; nil otherwise (said when the RTSP server is what is missing).
    static func onvifDevice(_ settings: Settings, version: String, rtspPort: Int?, log: Logger) -> ONVIFDevice? {
        guard settings.onvif.enabled else { return nil }
        guard let rtspPort else {
            log.error(
                "onvif off: the RTSP server, whose stream it gives, is off; recording goes on without it — fix what the rtsp error says, then restart"
            )
            return nil
        }
        let camera = settings.camera
        return ONVIFDevice(
            camera: camera.name, version: version, machine: HostName.machineID, hardware: HostName.hardware,
            video: .init(
                width: camera.width, height: camera.height, framesPerSecond: camera.fps,
                keyframeInterval: max(1, Int((camera.fps * settings.encoder.keyframeInterval).rounded())),
                profile: "High"),
            rtspPort: rtspPort, webScheme: settings.web.scheme)
    }

    /// WS-Discovery for `device`, with `onvif.discovery`; nil without it, or when its port
    /// cannot be had (said: the services still answer whoever knows the address).
    static func onvifDiscovery(_ settings: Settings, device: ONVIFDevice, webPort: Int, log: Logger) -> ONVIFDiscovery?
    {
        guard settings.onvif.discovery else { return nil }
        // The web server on "::" is IPv6 only, and WS-Discovery here IPv4 only: no address to
        // give an IPv4 client.
        guard settings.web.listen != "::" else {
            log.warning(
                "onvif discovery off: web.listen = \"::\" takes no IPv4 client, and discovery is IPv4 only — set web.listen = \"0.0.0.0\" (or one IPv4 address) for NVRs to find the camera",
                [("listen", .string(settings.web.listen))])
            return nil
        }
        do {
            return try ONVIFDiscovery(
                device: device, listen: settings.web.listen, webPort: webPort, port: settings.onvif.discoveryPort,
                log: log)
        } catch {
            log.error(
                "onvif discovery off: its UDP port cannot be had; NVRs must be given the camera's address — free the port (or set onvif.discovery_port for a test), then restart",
                [("port", .int(settings.onvif.discoveryPort)), ("error", .string("\(error)"))])
            return nil
        }
    }
}
