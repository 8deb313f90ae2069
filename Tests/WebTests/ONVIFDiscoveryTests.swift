import Logging
import ONVIF
import POSIX
import Testing

@testable import Web

/// Where a ProbeMatch says the device service is: the address the web server listens on when it
/// names one (a loopback one, IPv6 too), else the address of the interface the probe came in on.
@Suite struct ONVIFDiscoveryTests {
    static func discovery(listen: String) throws -> ONVIFDiscovery {
        try ONVIFDiscovery(
            device: ONVIFAccessTests.device, listen: listen, webPort: 8080, port: 0,
            log: Logger(level: .error, sink: MemoryLogSink()))
    }

    @Test func theDeviceServiceIsWhereTheWebServerListens() throws {
        let probedOn: [UInt8] = [127, 0, 0, 1]
        #expect(try Self.discovery(listen: "127.0.0.1").xaddr(probedOn) == "http://127.0.0.1:8080/onvif/device_service")
        #expect(try Self.discovery(listen: "::1").xaddr(probedOn) == "http://[::1]:8080/onvif/device_service")
        #expect(try Self.discovery(listen: "127.0.0.2").xaddr(probedOn) == "http://127.0.0.2:8080/onvif/device_service")
    }
}
