import Testing
@testable import Logging

@Suite struct LoggerTests {
    @Test func linesAreLogfmt() {
        let sink = MemoryLogSink()
        let log = Logger(level: .info, sink: sink).with(("camera", "shed"))
        log.info("clip saved", [("file", "2026-11-30/shed-1.mov"), ("duration", .seconds(12)), ("frames", 360)])
        log.warning("camera lost", [("reason", "No such device"), ("quote", "say \"hi\""), ("empty", "")])
        #expect(sink.written == [
            "level=info msg=\"clip saved\" file=2026-11-30/shed-1.mov duration=12.000 frames=360 camera=shed",
            "level=warning msg=\"camera lost\" reason=\"No such device\" quote=\"say \\\"hi\\\"\" empty=\"\" camera=shed",
        ])
    }

    @Test func disabledLevelsBuildNothing() {
        let sink = MemoryLogSink()
        let log = Logger(level: .info, sink: sink)
        nonisolated(unsafe) var built = 0
        func expensive() -> String { built += 1; return "x" }
        log.trace(expensive())
        log.debug("d", [("v", .string(expensive()))])
        #expect(built == 0)
        #expect(sink.written.isEmpty)
        log.level = .trace
        log.trace(expensive())
        #expect(built == 1)
        #expect(sink.written.count == 1)
    }

    @Test func controlCharactersAreEscaped() {
        #expect(Logger.quote("a\nb") == "\"a\\nb\"")
        #expect(Logger.quote("plain") == "plain")
        #expect(Logger.quote("a=b") == "\"a=b\"")
    }

    @Test func numbersHaveFixedDecimals() {
        #expect(fixedPoint(0.0615, decimals: 3) == "0.062")
        #expect(fixedPoint(-1.5, decimals: 1) == "-1.5")
        #expect(fixedPoint(2, decimals: 0) == "2")
        #expect(fixedPoint(0.004, decimals: 2) == "0.00")
        #expect(LogLevel(name: "warning") == .warning && LogLevel.error.syslogPriority == 3)
    }
}
