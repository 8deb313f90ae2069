import Media
import ONVIF
import Testing

/// The device and media services' answers, the UsernameToken's checks, and WS-Discovery's
/// matching, on values.
@Suite struct ONVIFAnswerTests {
    static let device = ONVIFDevice(
        camera: "porch", version: "1.2.3", machine: "0123abcd", hardware: "x86_64",
        video: .init(width: 1280, height: 720, framesPerSecond: 15, keyframeInterval: 15, profile: "High"),
        rtspPort: 8554, webScheme: "http")

    func answer(_ operation: String, _ service: ONVIFService, arguments: String = "") throws -> (SOAPReply, XMLElement)
    {
        let namespace = service == .device ? Namespace.device : Namespace.media
        let request = try SOAPRequest.parse(
            ONVIFFixtures.request(operation, namespace: namespace, arguments: arguments)
        )
        .get()
        let reply = Self.device.answer(
            request, service: service, authority: "192.0.2.7:8080", host: "192.0.2.7", now: 1_796_652_000.5)
        let root = try XMLReader.parse(Array(reply.body.utf8))
        return (reply, try #require(root.child("Body")?.children.first))
    }

    @Test func theIdentityIsStablePerCameraAndDiffersBetweenCameras() {
        let again = ONVIFDevice(
            camera: "porch", version: "9", machine: "0123abcd", hardware: "aarch64", video: Self.device.video,
            rtspPort: 1, webScheme: "https")
        let other = ONVIFDevice(
            camera: "garden", version: "1.2.3", machine: "0123abcd", hardware: "x86_64", video: Self.device.video,
            rtspPort: 8554, webScheme: "http")
        #expect(again.serialNumber == Self.device.serialNumber)
        #expect(again.endpoint == Self.device.endpoint)
        #expect(other.serialNumber != Self.device.serialNumber)
        #expect(other.endpoint != Self.device.endpoint)
        #expect(Self.device.endpoint.hasPrefix("urn:uuid:"))
        #expect(Self.device.endpoint.count == 45)
    }

    @Test func theDeviceSaysWhoItIsAndWhereItsServicesAre() throws {
        let (_, information) = try answer("GetDeviceInformation", .device)
        #expect(information.child("Manufacturer")?.text == "Vigil")
        #expect(information.child("FirmwareVersion")?.text == "1.2.3")
        #expect(information.child("SerialNumber")?.text == Self.device.serialNumber)
        let (_, capabilities) = try answer("GetCapabilities", .device, arguments: "<o:Category>All</o:Category>")
        let all = try #require(capabilities.child("Capabilities"))
        #expect(all.child("Device")?.child("XAddr")?.text == "http://192.0.2.7:8080/onvif/device_service")
        #expect(all.child("Media")?.child("XAddr")?.text == "http://192.0.2.7:8080/onvif/media_service")
        #expect(all.child("Events")?.child("XAddr")?.text == "http://192.0.2.7:8080/onvif/events_service")
        #expect(all.child("Events")?.child("WSPullPointSupport")?.text == "true")
        #expect(all.child("Imaging") == nil && all.child("PTZ") == nil)
        let (services, _) = try answer(
            "GetServices", .device, arguments: "<o:IncludeCapability>false</o:IncludeCapability>")
        #expect(services.body.contains("<tds:XAddr>http://192.0.2.7:8080/onvif/media_service</tds:XAddr>"))
        #expect(services.body.contains("<tds:XAddr>http://192.0.2.7:8080/onvif/events_service</tds:XAddr>"))
        let (_, scopes) = try answer("GetScopes", .device)
        let items = scopes.children.compactMap { $0.child("ScopeItem")?.text }
        #expect(items.contains("onvif://www.onvif.org/name/porch"))
    }

    @Test func theClockIsUTC() throws {
        let (_, time) = try answer("GetSystemDateAndTime", .device)
        let utc = try #require(time.child("SystemDateAndTime")?.child("UTCDateTime"))
        let fields = [
            utc.child("Date")?.child("Year"), utc.child("Date")?.child("Month"), utc.child("Date")?.child("Day"),
            utc.child("Time")?.child("Hour"), utc.child("Time")?.child("Minute"), utc.child("Time")?.child("Second"),
        ].map { $0?.text }
        // 1_796_652_000 s after 1970 is 2026-12-07 14:00:00 UTC.
        #expect(fields == ["2026", "12", "7", "14", "0", "0"])
        #expect(ISO8601.seconds("2026-12-07T14:00:00Z") == 1_796_652_000)
        #expect(ISO8601.seconds("2026-12-07T15:00:00.250+01:00") == 1_796_652_000.25)
        #expect(ISO8601.text(1_796_652_000) == "2026-12-07T14:00:00Z")
        #expect(ISO8601.text(951_782_400) == "2000-02-29T00:00:00Z")
        for bad in ["", "2026-12-07", "2026-13-07T14:00:00Z", "2026-12-07T14:00:00+1", "x026-12-07T14:00:00Z"] {
            #expect(ISO8601.seconds(bad) == nil)
        }
    }

    @Test func theProfileTheStreamAndThePicture() throws {
        let (_, profiles) = try answer("GetProfiles", .media)
        let profile = try #require(profiles.child("Profiles"))
        #expect(profile.attribute("token") == "main")
        let encoder = try #require(profile.child("VideoEncoderConfiguration"))
        #expect(encoder.child("Encoding")?.text == "H264")
        #expect(encoder.child("Resolution")?.child("Width")?.text == "1280")
        #expect(encoder.child("Resolution")?.child("Height")?.text == "720")
        #expect(encoder.child("RateControl")?.child("FrameRateLimit")?.text == "15")
        let (_, stream) = try answer(
            "GetStreamUri", .media,
            arguments:
                "<o:StreamSetup><tt:Stream>RTP-Unicast</tt:Stream><tt:Transport><tt:Protocol>RTSP</tt:Protocol></tt:Transport></o:StreamSetup><o:ProfileToken>main</o:ProfileToken>"
        )
        #expect(stream.child("MediaUri")?.child("Uri")?.text == "rtsp://192.0.2.7:8554/porch")
        let (_, snapshot) = try answer("GetSnapshotUri", .media, arguments: "<o:ProfileToken>main</o:ProfileToken>")
        #expect(snapshot.child("MediaUri")?.child("Uri")?.text == "http://192.0.2.7:8080/latest.jpg")
        let (wrong, fault) = try answer("GetStreamUri", .media, arguments: "<o:ProfileToken>other</o:ProfileToken>")
        #expect(wrong.status == 400)
        #expect(fault.name == "Fault")
    }

    @Test func anUnknownActionIsAFaultNotAServerError() throws {
        for (operation, service) in [
            ("SystemReboot", ONVIFService.device), ("GetOSDs", .media), ("GetProfiles", .device),
        ] {
            let (reply, fault) = try answer(operation, service)
            #expect(reply.status == 400)
            #expect(fault.name == "Fault")
            #expect(reply.body.contains("ter:ActionNotSupported"))
        }
        let (interfaces, _) = try answer("GetNetworkInterfaces", .device)
        #expect(interfaces.body.contains("not implemented"))
    }

    @Test func onlyTheClockAndTheServicesNeedNoSignIn() throws {
        func preAuth(_ operation: String, _ namespace: String) throws -> Bool {
            ONVIFDevice.preAuthentication(
                try SOAPRequest.parse(ONVIFFixtures.request(operation, namespace: namespace)).get())
        }
        #expect(try preAuth("GetSystemDateAndTime", Namespace.device))
        #expect(try preAuth("GetServices", Namespace.device))
        #expect(try preAuth("GetCapabilities", Namespace.device))
        #expect(try !preAuth("GetDeviceInformation", Namespace.device))
        #expect(try !preAuth("GetStreamUri", Namespace.media))
        #expect(try !preAuth("GetSystemDateAndTime", Namespace.media))
    }

    @Test func aUsernameTokenIsCheckedAgainstTheDigestHashesWithoutAPassword() throws {
        let realm = "vigil"
        let users = ["admin": MD5.digest(Array("admin:vigil:secret".utf8))]
        let now = 1_796_652_000.0
        let token = try #require(SOAPRequest.parse(Array(ONVIFFixtures.getProfiles.utf8)).get().usernameToken)
        #expect(token.username == "admin")
        #expect(token.password == .text("secret"))
        #expect(token.check(users: users, realm: realm, now: now) == .signedIn("admin"))
        #expect(token.check(users: users, realm: realm, now: now + 301) == .stale("admin"))
        #expect(token.check(users: users, realm: realm, now: now - 301) == .stale("admin"))
        let wrong = UsernameToken(username: "admin", password: .text("guess"), created: nil)
        #expect(wrong.check(users: users, realm: realm, now: now) == .wrongPassword("admin"))
        let nobody = UsernameToken(username: "nobody", password: .text("secret"), created: nil)
        #expect(nobody.check(users: users, realm: realm, now: now) == .wrongPassword("nobody"))
        let digest = UsernameToken(username: "admin", password: .digest("abc="), created: "2026-12-07T14:00:00Z")
        #expect(digest.check(users: users, realm: realm, now: now) == .digestCannotBeChecked("admin"))
        let garbled = UsernameToken(username: "admin", password: .text("secret"), created: "yesterday")
        #expect(garbled.check(users: users, realm: realm, now: now) == .stale("admin"))
    }
}
