import Media

/// WS-Discovery (2005/04, as ONVIF uses it): the probes NVRs and Home Assistant multicast to
/// find cameras, and what the camera says: a ProbeMatch to the one who asked, Hello when it
/// starts, Bye when it stops. Values only: the socket is the agent's.
public struct DiscoveryProbe: Sendable, Equatable {
    /// Its `wsa:MessageID`, which the match relates to.
    public let messageID: String
    /// The types asked for, resolved (a prefix that is not declared leaves the namespace nil:
    /// matched by local name).
    public let types: [QualifiedName]
    public let scopes: [String]
    /// `MatchBy` of the scopes; nil for RFC 3986's (the default).
    public let matchBy: String?

    public struct QualifiedName: Sendable, Equatable {
        public var namespace: String?
        public var name: String
    }

    /// The probe `bytes` hold; nil when they are not one (or not XML, or too large).
    public static func parse(_ bytes: [UInt8]) -> DiscoveryProbe? {
        var limits = XMLReader.Limits()
        limits.elements = 256
        guard case .success(let request) = SOAPRequest.parse(bytes, limits: limits),
            request.operation.name == "Probe", request.operation.namespace == Namespace.discovery,
            let id = request.header?.child("MessageID")?.trimmedText, !id.isEmpty, id.utf8.count <= 256
        else { return nil }
        let probe = request.operation
        var types: [QualifiedName] = []
        if let element = probe.child("Types") {
            for qname in words(element.text) {
                let (namespace, name) = element.resolve(qname)
                types.append(QualifiedName(namespace: namespace, name: name))
            }
        }
        let scopes = probe.child("Scopes")
        return DiscoveryProbe(
            messageID: id, types: types, scopes: scopes.map { words($0.text).map(String.init) } ?? [],
            matchBy: scopes?.attribute("MatchBy"))
    }

    /// The words of a list (XML Schema's `list`: separated by white space).
    static func words(_ text: String) -> [Substring] {
        text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" })
    }

    /// Whether `device` answers it: every type asked is one of a camera's
    /// (`dn:NetworkVideoTransmitter`, `tds:Device`), every scope asked matches one of its own.
    public func matches(_ device: ONVIFDevice) -> Bool {
        let ours = [
            QualifiedName(namespace: Namespace.network, name: "NetworkVideoTransmitter"),
            QualifiedName(namespace: Namespace.device, name: "Device"),
        ]
        let typed = types.allSatisfy { asked in
            ours.contains { $0.name == asked.name && (asked.namespace == nil || asked.namespace == $0.namespace) }
        }
        guard typed else { return false }
        let exact: Bool
        switch matchBy {
        case nil, "http://schemas.xmlsoap.org/ws/2005/04/discovery/rfc3986": exact = false
        case "http://schemas.xmlsoap.org/ws/2005/04/discovery/strcmp0": exact = true
        default: return false
        }
        let own = device.scopes
        return scopes.allSatisfy { asked in
            own.contains { scope in
                if exact { return scope == asked }
                let a = asked.lowercased()
                let s = scope.lowercased()
                return s == a || s.hasPrefix(a.hasSuffix("/") ? a : a + "/")
            }
        }
    }
}

/// The messages the camera sends: each with a fresh `MessageID`, and `AppSequence` (the run's
/// `instance`, a `message` number that grows) so listeners order them.
public enum DiscoveryMessage {
    static let hello = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello"
    static let bye = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye"
    static let probeMatches = "http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches"
    static let multicastTo = "urn:schemas-xmlsoap-org:ws:2005:04:discovery"
    static let anonymous = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous"

    /// The answer to `probe` for `device`, whose device service is at `xaddr`.
    public static func probeMatch(
        _ probe: DiscoveryProbe, device: ONVIFDevice, xaddr: String, instance: UInt32, message: UInt32
    ) -> [UInt8] {
        envelope(
            action: probeMatches, to: anonymous, relatesTo: probe.messageID, instance: instance, message: message,
            body:
                "<wsd:ProbeMatches><wsd:ProbeMatch>\(description(device, xaddr: xaddr))</wsd:ProbeMatch></wsd:ProbeMatches>"
        )
    }

    /// Hello: `device` has come, its device service at `xaddr`.
    public static func hello(device: ONVIFDevice, xaddr: String, instance: UInt32, message: UInt32) -> [UInt8] {
        envelope(
            action: hello, to: multicastTo, relatesTo: nil, instance: instance, message: message,
            body: "<wsd:Hello>\(description(device, xaddr: xaddr))</wsd:Hello>")
    }

    /// Bye: `device` is going.
    public static func bye(device: ONVIFDevice, instance: UInt32, message: UInt32) -> [UInt8] {
        envelope(
            action: bye, to: multicastTo, relatesTo: nil, instance: instance, message: message,
            body:
                "<wsd:Bye><wsa:EndpointReference><wsa:Address>\(device.endpoint)</wsa:Address></wsa:EndpointReference></wsd:Bye>"
        )
    }

    static func description(_ device: ONVIFDevice, xaddr: String) -> String {
        "<wsa:EndpointReference><wsa:Address>\(device.endpoint)</wsa:Address></wsa:EndpointReference><wsd:Types>dn:NetworkVideoTransmitter tds:Device</wsd:Types><wsd:Scopes>\(MarkupText.escaped(device.scopes.joined(separator: " ")))</wsd:Scopes><wsd:XAddrs>\(MarkupText.escaped(xaddr))</wsd:XAddrs><wsd:MetadataVersion>1</wsd:MetadataVersion>"
    }

    static func envelope(
        action: String, to: String, relatesTo: String?, instance: UInt32, message: UInt32, body: String
    ) -> [UInt8] {
        let related = relatesTo.map { "<wsa:RelatesTo>\(MarkupText.escaped($0))</wsa:RelatesTo>" } ?? ""
        let text =
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<env:Envelope xmlns:env=\"\(Namespace.soap12)\" xmlns:wsa=\"\(Namespace.addressing)\" xmlns:wsd=\"\(Namespace.discovery)\" xmlns:dn=\"\(Namespace.network)\" xmlns:tds=\"\(Namespace.device)\"><env:Header><wsa:MessageID>\(newMessageID())</wsa:MessageID>\(related)<wsa:To>\(to)</wsa:To><wsa:Action>\(action)</wsa:Action><wsd:AppSequence InstanceId=\"\(instance)\" MessageNumber=\"\(message)\"/></env:Header><env:Body>\(body)</env:Body></env:Envelope>\n"
        return Array(text.utf8)
    }

    /// `urn:uuid:` and a random (version 4) UUID.
    static func newMessageID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in generator.next() as UInt8 }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { byte -> String in
            let digits = Array("0123456789abcdef")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined()
        let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map {
            String(hex.dropFirst($0.lowerBound).prefix($0.count))
        }
        return "urn:uuid:" + parts.joined(separator: "-")
    }
}
