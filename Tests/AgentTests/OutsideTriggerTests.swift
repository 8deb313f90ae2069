import Testing

@testable import Agent

/// The seconds an outside request may ask for (`vigil trigger --seconds`, the socket's
/// `record N`, MQTT's `record/set`): plain decimal seconds from 1 to 3600, nothing else.
@Suite struct OutsideTriggerTests {
    @Test(arguments: [("1", 1.0), ("10", 10.0), ("2.5", 2.5), ("3600", 3600.0), ("030", 30.0)])
    func plainDecimalSecondsAreTaken(text: String, seconds: Double) {
        #expect(OutsideTrigger.seconds(text) == seconds)
    }

    /// `0x10` was 16 s, `1e2` 100 s, `+5` 5 s: what Swift's `Double(_:)` reads, not what a person
    /// sending a doorbell's request means.
    @Test(arguments: [
        "0x10", "0X10", "1e2", "1E1", "+5", "-5", "0", "0.5", "3601", "inf", "nan", "", " 5", "5 ", ".5", "1,5",
        "٣", "1_0", "1.",
    ])
    func anythingElseIsRefused(text: String) {
        #expect(OutsideTrigger.seconds(text) == nil, "\(text)")
    }
}
