import ONVIF
import Testing

/// The XML reader takes what anyone on the network sends: what it reads, and what it refuses
/// without a trap (malformed, truncated, too large or deep, a DTD).
@Suite struct XMLReaderTests {
    @Test func namesAreResolvedWhateverPrefixTheClientChose() throws {
        let text = """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- a comment -->
            <s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" xmlns:x="urn:x">
              <s:Body><GetProfiles xmlns="http://www.onvif.org/ver10/media/wsdl" a='1' x:b="2 &amp; &lt;3&#x21;"/>
              <x:T>dn:NVT <![CDATA[<raw>]]></x:T></s:Body>
            </s:Envelope>
            """
        let root = try XMLReader.parse(Array(text.utf8))
        #expect(root.name == "Envelope")
        #expect(root.namespace == "http://www.w3.org/2003/05/soap-envelope")
        let body = try #require(root.child("Body"))
        let operation = try #require(body.child("GetProfiles", namespace: "http://www.onvif.org/ver10/media/wsdl"))
        #expect(operation.attribute("a") == "1")
        #expect(operation.attribute("b") == "2 & <3!")
        #expect(operation.attributes.first { $0.name == "b" }?.namespace == "urn:x")
        let t = try #require(body.child("T", namespace: "urn:x"))
        #expect(t.text == "dn:NVT <raw>")
        #expect(t.resolve("x:Thing") == ("urn:x", "Thing"))
        #expect(t.resolve("nope:Thing").namespace == nil)
    }

    @Test(arguments: [
        "", "<", "<a>", "<a></b>", "<a><b></a></b>", "<a/><b/>", "text", "<a>&unknown;</a>", "<a>&#0;</a>",
        "<a x=1/>", "<a x='1/>", "<p:a/>", "<a>&#x110000;</a>", "<a b='<'/>", "<a>&</a>", "</a>", "<a x='1'y='2'/>",
        "<a><!-- never closed </a>", "<a><![CDATA[ open </a>", "<?xml", "<a/>junk",
    ])
    func malformedDocumentsAreRefused(_ text: String) {
        #expect(throws: XMLError.self) { try XMLReader.parse(Array(text.utf8)) }
    }

    @Test func aDoctypeIsRefusedSoNoEntityIsEverExpanded() {
        let bomb = """
            <?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>
            <a>&lol2;</a>
            """
        #expect(throws: XMLError.doctype) { try XMLReader.parse(Array(bomb.utf8)) }
    }

    @Test func sizeDepthAndElementsAreBounded() {
        var limits = XMLReader.Limits()
        limits.bytes = 100
        #expect(throws: XMLError.tooLarge(limit: 100)) {
            try XMLReader.parse(Array(("<a>" + String(repeating: " ", count: 100) + "</a>").utf8), limits: limits)
        }
        let deep = String(repeating: "<a>", count: 40) + String(repeating: "</a>", count: 40)
        #expect(throws: XMLError.tooDeep(limit: 32)) { try XMLReader.parse(Array(deep.utf8)) }
        let wide = "<a>" + String(repeating: "<b/>", count: 5000) + "</a>"
        #expect(throws: XMLError.tooManyElements(limit: 4096)) { try XMLReader.parse(Array(wide.utf8)) }
    }

    /// Every prefix of a real request, and every one-byte change of it, is read or refused,
    /// never a trap.
    @Test func truncatedAndCorruptedRequestsNeverTrap() {
        let bytes = Array(ONVIFFixtures.getProfiles.utf8)
        for end in 0...bytes.count { _ = try? XMLReader.parse(Array(bytes[..<end])) }
        let replacements: [UInt8] = [0, 0x3C, 0x3E, 0x26, 0x22, 0x2F, 0x3A, 0xFF, 0x3B]
        for at in bytes.indices {
            for replacement in replacements {
                var changed = bytes
                changed[at] = replacement
                _ = try? XMLReader.parse(changed)
                _ = SOAPRequest.parse(changed)
                _ = DiscoveryProbe.parse(changed)
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let noise = (0..<Int.random(in: 0..<200, using: &generator)).map { _ in
                "<>/=:&;'\" abx!?[]-#".utf8.randomElement(using: &generator) ?? 0
            }
            _ = try? XMLReader.parse(noise)
        }
        #expect(throws: Never.self) { try XMLReader.parse(bytes) }
    }
}

/// Requests as onvif-zeep-async (Home Assistant's client) writes them.
enum ONVIFFixtures {
    static let getProfiles = """
        <?xml version='1.0' encoding='utf-8'?>
        <soap-env:Envelope xmlns:soap-env="http://www.w3.org/2003/05/soap-envelope"><soap-env:Header><wsse:Security xmlns:wsse="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-secext-1.0.xsd"><wsse:UsernameToken><wsse:Username>admin</wsse:Username><wsse:Password Type="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText">secret</wsse:Password><wsu:Created xmlns:wsu="http://docs.oasis-open.org/wss/2004/01/oasis-200401-wss-wssecurity-utility-1.0.xsd">2026-12-07T14:00:00+00:00</wsu:Created></wsse:UsernameToken></wsse:Security><wsa:Action xmlns:wsa="http://www.w3.org/2005/08/addressing">http://www.onvif.org/ver10/media/wsdl/GetProfiles</wsa:Action></soap-env:Header><soap-env:Body><ns0:GetProfiles xmlns:ns0="http://www.onvif.org/ver10/media/wsdl"/></soap-env:Body></soap-env:Envelope>
        """

    static func request(_ operation: String, namespace: String, arguments: String = "", header: String = "") -> [UInt8]
    {
        Array(
            """
            <?xml version="1.0"?><e:Envelope xmlns:e="http://www.w3.org/2003/05/soap-envelope"><e:Header>\(header)</e:Header><e:Body><o:\(operation) xmlns:o="\(namespace)" xmlns:tt="http://www.onvif.org/ver10/schema">\(arguments)</o:\(operation)></e:Body></e:Envelope>
            """.utf8)
    }
}
