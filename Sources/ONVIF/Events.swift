import Media

/// Motion as ONVIF events (the events service, ver10, with WS-BaseNotification's pull point):
/// the messages a pull point's subscriber reads, as Home Assistant's parsers map them to a
/// motion sensor — `tns1:RuleEngine/CellMotionDetector/Motion` with `IsMotion`. Values only:
/// the subscriptions are the web server's.
public enum ONVIFEvents {
    public static let namespace = "http://www.onvif.org/ver10/events/wsdl"
    public static let notification = "http://docs.oasis-open.org/wsn/b-2"
    public static let addressing = "http://www.w3.org/2005/08/addressing"
    public static let topics = "http://www.onvif.org/ver10/topics"

    /// A change of the motion state at a moment (seconds since 1970, UTC); `initial`: the state
    /// a new subscriber (or a synchronization point) is told, not a change.
    public struct Motion: Sendable, Equatable {
        public var moving: Bool
        public var at: Double
        public var initial: Bool

        public init(moving: Bool, at: Double, initial: Bool = false) {
            self.moving = moving
            self.at = at
            self.initial = initial
        }
    }

    /// When a subscription that asked to end at `requested` (an xs:duration such as `PT60S`, or
    /// a date) at `now` ends: within `shortest`…`longest` seconds of now (none asked: a minute).
    public static func termination(
        _ requested: String?, now: Double, shortest: Double = 10, longest: Double = 3600
    )
        -> Double
    {
        let text = requested?.trimmingXMLSpace ?? ""
        let asked =
            if let seconds = duration(String(text)) { now + seconds } else if let date = ISO8601.seconds(String(text)) {
                date
            } else { now + 60 }
        return min(max(asked, now + shortest), now + longest)
    }

    /// An xs:duration of days, hours, minutes and seconds (`PT60S`, `PT1M30S`, `P1DT2H`); nil
    /// for anything else (years and months are not a fixed time).
    public static func duration(_ text: String) -> Double? {
        guard text.hasPrefix("P"), text.count > 1 else { return nil }
        var total = 0.0
        var number = ""
        var inTime = false
        var units = 0
        for character in text.dropFirst() {
            switch character {
            case "T":
                guard number.isEmpty, !inTime else { return nil }
                inTime = true
            case "0"..."9", ".": number.append(character)
            case "D", "H", "M", "S":
                guard let value = Double(number), value.isFinite else { return nil }
                let unit: Double =
                    switch (character, inTime) {
                    case ("D", false): 86400
                    case ("H", true): 3600
                    case ("M", true): 60
                    case ("S", true): 1
                    default: -1
                    }
                guard unit > 0 else { return nil }
                total += value * unit
                number = ""
                units += 1
            default: return nil
            }
        }
        return number.isEmpty && units > 0 ? total : nil
    }

    static let prefixes =
        "xmlns:tev=\"\(namespace)\" xmlns:wsnt=\"\(notification)\" xmlns:wsa5=\"\(addressing)\" xmlns:tns1=\"\(topics)\""

    /// `body` in an envelope that declares the events' prefixes too.
    static func envelope(_ body: String) -> SOAPReply {
        var reply = SOAPReply.envelope(body)
        reply.body = reply.body.replacing("<env:Body>", with: "<env:Body \(prefixes)>")
        return reply
    }

    public static var serviceCapabilities: String {
        "<tev:Capabilities WSSubscriptionPolicySupport=\"false\" WSPausableSubscriptionManagerInterfaceSupport=\"false\" MaxNotificationProducers=\"0\" MaxPullPoints=\"8\" PersistentNotificationStorage=\"false\"/>"
    }

    public static func capabilitiesReply() -> SOAPReply {
        envelope("<tev:GetServiceCapabilitiesResponse>\(serviceCapabilities)</tev:GetServiceCapabilitiesResponse>")
    }

    /// CreatePullPointSubscription's answer: the pull point at `address`, until `termination`.
    public static func created(address: String, now: Double, termination: Double) -> SOAPReply {
        envelope(
            "<tev:CreatePullPointSubscriptionResponse><tev:SubscriptionReference><wsa5:Address>\(MarkupText.escaped(address))</wsa5:Address></tev:SubscriptionReference><wsnt:CurrentTime>\(ISO8601.text(now))</wsnt:CurrentTime><wsnt:TerminationTime>\(ISO8601.text(termination))</wsnt:TerminationTime></tev:CreatePullPointSubscriptionResponse>"
        )
    }

    /// PullMessages' answer: `messages`, oldest first.
    public static func pulled(_ messages: [Motion], now: Double, termination: Double) -> SOAPReply {
        envelope(
            "<tev:PullMessagesResponse><tev:CurrentTime>\(ISO8601.text(now))</tev:CurrentTime><tev:TerminationTime>\(ISO8601.text(termination))</tev:TerminationTime>\(messages.map(message).joined())</tev:PullMessagesResponse>"
        )
    }

    public static func renewed(now: Double, termination: Double) -> SOAPReply {
        envelope(
            "<wsnt:RenewResponse><wsnt:TerminationTime>\(ISO8601.text(termination))</wsnt:TerminationTime><wsnt:CurrentTime>\(ISO8601.text(now))</wsnt:CurrentTime></wsnt:RenewResponse>"
        )
    }

    public static func unsubscribed() -> SOAPReply { envelope("<wsnt:UnsubscribeResponse/>") }

    public static func synchronized() -> SOAPReply { envelope("<tev:SetSynchronizationPointResponse/>") }

    /// A subscription that is not (or no longer) there.
    public static func noSubscription() -> SOAPReply {
        .fault(
            "env:Receiver", ["ter:Action", "ter:InvalidSubscription"],
            "No such subscription: it ended (unsubscribed, or past its termination time); create another.")
    }

    /// One motion message, as a camera's cell motion detector says it.
    static func message(_ motion: Motion) -> String {
        "<wsnt:NotificationMessage><wsnt:Topic Dialect=\"http://www.onvif.org/ver10/tev/topicExpression/ConcreteSet\">tns1:RuleEngine/CellMotionDetector/Motion</wsnt:Topic><wsnt:Message><tt:Message UtcTime=\"\(ISO8601.text(motion.at))\" PropertyOperation=\"\(motion.initial ? "Initialized" : "Changed")\"><tt:Source><tt:SimpleItem Name=\"VideoSourceConfigurationToken\" Value=\"video_source_config\"/><tt:SimpleItem Name=\"VideoAnalyticsConfigurationToken\" Value=\"motion\"/><tt:SimpleItem Name=\"Rule\" Value=\"MotionDetectorRule\"/></tt:Source><tt:Data><tt:SimpleItem Name=\"IsMotion\" Value=\"\(motion.moving)\"/></tt:Data></tt:Message></wsnt:Message></wsnt:NotificationMessage>"
    }
}
