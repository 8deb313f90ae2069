import Logging
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

/// One parser of an outside request's seconds, one set of limits and words, whichever front end
/// reads the request (the socket's line, the web's JSON, MQTT's payload).
@Suite struct OutsideRequestTests {
    @Test func secondsAsTextAsANumberOrNoneAtAll() {
        #expect(OutsideRequest.seconds("2.5" as Substring) == .success(2.5))
        #expect(OutsideRequest.seconds(nil as Substring?) == .success(10))
        #expect(OutsideRequest.seconds(3600.0) == .success(3600))
        #expect(OutsideRequest.seconds(nil as Double?) == .success(OutsideRequest.defaultSeconds))
        #expect(OutsideRequest.seconds("1e2" as Substring) == .failure(OutsideRequestError(given: "1e2")))
        #expect(OutsideRequest.seconds(0.5) == .failure(OutsideRequestError(given: "0.5")))
        #expect(
            OutsideRequestError(given: "0x10").description
                == "\"0x10\" is not plain decimal seconds from 1 to 3600 (such as 30 or 2.5)")
    }

    @Test func eachRequestReachesTheAgentAsAsked() {
        let control = AgentControl()
        control.ask(.record(seconds: 30), by: "web")
        #expect(control.take().record?.seconds == 30)
        control.ask(.recordUntilStopped, by: "mqtt")
        let untilStopped = control.take().record
        #expect(untilStopped != nil && untilStopped?.seconds == nil && untilStopped?.by == "mqtt")
        control.ask(.stop, by: "mqtt")
        #expect(control.take().stopRecording == "mqtt")
    }

    /// `vigil trigger`'s socket answers a line it cannot record in the parser's words.
    @Test func theSocketRefusesInTheSameWords() {
        let control = AgentControl()
        let answer = TriggerSocket.answer(
            .line("record 0x10"), control: control, noCamera: { nil }, log: Logger(level: .error, sink: MemoryLogSink())
        )
        #expect(answer == "error: \"0x10\" is not plain decimal seconds from 1 to 3600 (such as 30 or 2.5)")
        #expect(
            TriggerSocket.answer(
                .line("record"), control: control, noCamera: { nil }, log: Logger(level: .error, sink: MemoryLogSink()))
                == "ok: recording for 10.0 s, then the post-roll")
        #expect(control.take().record?.seconds == 10)
    }
}
