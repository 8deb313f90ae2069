import ONVIF
import Testing

/// The events service's values: how long a subscription asked to last, and the motion message
/// as Home Assistant's parser reads it.
@Suite struct ONVIFEventsTests {
    @Test func aTerminationIsADurationOrADateWithinBounds() {
        let now = 1_796_652_000.0
        #expect(ONVIFEvents.duration("PT60S") == 60)
        #expect(ONVIFEvents.duration("PT1M30S") == 90)
        #expect(ONVIFEvents.duration("P1DT2H") == 93600)
        for bad in ["", "P", "60S", "PT", "PT1Y", "P1M", "PTS", "PT1.5.5S", "PT60"] {
            #expect(ONVIFEvents.duration(bad) == nil, "\(bad)")
        }
        #expect(ONVIFEvents.termination("PT60S", now: now) == now + 60)
        #expect(ONVIFEvents.termination("2026-12-07T14:05:00Z", now: now) == now + 300)
        #expect(ONVIFEvents.termination(nil, now: now) == now + 60)
        #expect(ONVIFEvents.termination("PT1S", now: now) == now + 10, "at least 10 s")
        #expect(ONVIFEvents.termination("P30D", now: now) == now + 3600, "at most an hour")
        #expect(ONVIFEvents.termination("2020-01-01T00:00:00Z", now: now) == now + 10)
    }

    @Test func aPullAnswerCarriesTheCellMotionDetectorsMessages() throws {
        let reply = ONVIFEvents.pulled(
            [.init(moving: false, at: 1_796_652_000, initial: true), .init(moving: true, at: 1_796_652_001)],
            now: 1_796_652_002, termination: 1_796_652_060)
        let root = try XMLReader.parse(Array(reply.body.utf8))
        let response = try #require(root.child("Body")?.child("PullMessagesResponse", namespace: ONVIFEvents.namespace))
        let messages = response.children.filter { $0.name == "NotificationMessage" }
        #expect(messages.count == 2)
        let topic = try #require(messages.last?.child("Topic"))
        #expect(topic.resolve(Substring(topic.text)) == (ONVIFEvents.topics, "RuleEngine/CellMotionDetector/Motion"))
        let message = try #require(messages.last?.child("Message")?.child("Message", namespace: Namespace.schema))
        #expect(message.attribute("PropertyOperation") == "Changed")
        #expect(message.attribute("UtcTime") == "2026-12-07T14:00:01Z")
        let data = message.child("Data")?.child("SimpleItem")
        #expect(data?.attribute("Name") == "IsMotion" && data?.attribute("Value") == "true")
        #expect(messages.first?.child("Message")?.child("Message")?.attribute("PropertyOperation") == "Initialized")
    }
}
