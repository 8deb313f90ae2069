import Testing

@testable import Logging

@Suite struct LoggerTests {
    @Test func linesAreLogfmt() {
        let sink = MemoryLogSink()
        let log = Logger(level: .info, sink: sink).with(("camera", "shed"))
        log.info("clip saved", [("file", "2026-11-30/shed-1.mov"), ("duration", .seconds(12)), ("frames", 360)])
        log.warning("camera lost", [("reason", "No such device"), ("quote", "say \"hi\""), ("empty", "")])
        #expect(
            sink.written == [
                "level=info msg=\"clip saved\" file=2026-11-30/shed-1.mov duration=12.000 frames=360 camera=shed",
                "level=warning msg=\"camera lost\" reason=\"No such device\" quote=\"say \\\"hi\\\"\" empty=\"\" camera=shed",
            ])
    }

    @Test func disabledLevelsBuildNothing() {
        let sink = MemoryLogSink()
        let log = Logger(level: .info, sink: sink)
        nonisolated(unsafe) var built = 0
        func expensive() -> String {
            built += 1
            return "x"
        }
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
        #expect(LogValue.fixed(0.0615, 3).description == "0.062")
        #expect(LogValue.seconds(-1.5).description == "-1.500")
        #expect(LogValue.fixed(.nan, 2).description == "nan")
        #expect(LogLevel(name: "warning") == .warning && LogLevel.error.syslogPriority == 3)
    }
}
