import Testing

@testable import Configuration

/// The `onvif` section: off by default, discovery on at port 3702 once it is on; on only with
/// the web server (its services) and the RTSP server (its stream), which a refusal names.
@Suite struct ONVIFSettingsTests {
    @Test func theDefaultsAreOffWithDiscoveryOnPort3702() throws {
        #expect(try load("").onvif == Settings.ONVIF(enabled: false, discovery: true, discoveryPort: 3702))
        let on = try load(
            "web = { enabled = true; };\nrtsp = { enabled = true; };\nonvif = { enabled = true; discovery = false; discovery_port = 13702; };"
        ).onvif
        #expect(on == Settings.ONVIF(enabled: true, discovery: false, discoveryPort: 13702))
    }

    @Test(arguments: [
        ("", "web.enabled and rtsp.enabled are false — set web.enabled = true and rtsp.enabled = true"),
        ("web = { enabled = true; };", "rtsp.enabled is false — set rtsp.enabled = true"),
        ("rtsp = { enabled = true; };", "web.enabled is false — set web.enabled = true"),
    ])
    func onvifWithoutTheWebServerOrTheRTSPServerIsRefusedNamingBoth(text: String, expected: String) {
        #expect {
            try load(text + "\nonvif = { enabled = true; };")
        } throws: { error in
            let said = "\(error)"
            return said.contains("onvif.enabled = true needs web.enabled = true") && said.contains(expected)
                && said.contains("or onvif.enabled = false")
        }
    }
}
